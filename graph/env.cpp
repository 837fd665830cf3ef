#include "graph/env.h"

#include <cstdlib>
#include <string>

#include "graph/error.h"

namespace kiln {

std::optional<uint64_t> env_count(const char* name, const char* what) {
  const char* e = std::getenv(name);
  if (!e || !*e) return std::nullopt;
  std::string s(e);
  // At most 18 digits: below 2^62, so callers may add and shift without overflow.
  if (s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
    throw_error(name, "='", s, "' is not a whole number: give ", what,
                " as digits alone (0 to 999999999999999999)");
  return std::stoull(s);
}

}  // namespace kiln
