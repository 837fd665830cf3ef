#include "graph/log.h"

#include <strings.h>
#include <cstdio>
#include <cstdlib>

namespace kiln::logging {

namespace {

const char* const kNames[] = {"error", "warn", "info", "debug"};

Level read_level() {
  const char* v = std::getenv("KILN_LOG");
  if (!v || !*v) return Level::warn;
  for (int i = 0; i < 4; ++i)
    if (strcasecmp(v, kNames[i]) == 0) return static_cast<Level>(i);
  if (strcasecmp(v, "warning") == 0) return Level::warn;
  // A typo must not silence errors, nor go unnoticed.
  std::fprintf(stderr,
               "kiln: warn: KILN_LOG='%s' is not one of error, warn, info, debug; using warn\n", v);
  return Level::warn;
}

}  // namespace

Level level() {
  static const Level l = read_level();
  return l;
}

void write(Level l, const std::string& message) {
  std::string prefix = std::string("kiln: ") + kNames[static_cast<int>(l)] + ": ";
  std::string out;
  out.reserve(message.size() + 64);
  size_t start = 0;
  while (start <= message.size()) {
    size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    out += prefix;
    out.append(message, start, end - start);
    out += '\n';
    start = end + 1;
    if (start == message.size()) break;  // a trailing newline adds no empty line
  }
  // One stdio call: stderr is locked for its duration, so threads' messages stay whole.
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

}  // namespace kiln::logging
