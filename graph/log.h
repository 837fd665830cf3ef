// Kiln's own diagnostics on stderr, one "kiln: " line (or block) per message, at the level
// KILN_LOG asks for (error, warn, info, debug; read once; warn when unset). What drivers and
// compilers say on success (build logs) is logged at debug, so a run that fails nothing is quiet.
#pragma once

#include <sstream>
#include <string>

namespace kiln::logging {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

// The process's level, from KILN_LOG on first call; an unknown value says so once and means warn.
Level level();

inline bool enabled(Level l) { return static_cast<int>(l) <= static_cast<int>(level()); }

// Writes every line of `message` as "kiln: <level>: <line>" to stderr in one call, so messages
// of concurrent threads never interleave. Callers check enabled() first; write() does not.
void write(Level l, const std::string& message);

template <typename... Parts>
void at(Level l, const Parts&... parts) {
  if (!enabled(l)) return;
  std::ostringstream os;
  (os << ... << parts);
  write(l, os.str());
}

template <typename... Parts>
void error(const Parts&... parts) {
  at(Level::error, parts...);
}
template <typename... Parts>
void warn(const Parts&... parts) {
  at(Level::warn, parts...);
}
template <typename... Parts>
void info(const Parts&... parts) {
  at(Level::info, parts...);
}
template <typename... Parts>
void debug(const Parts&... parts) {
  at(Level::debug, parts...);
}

}  // namespace kiln::logging
