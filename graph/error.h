// kiln::Error is the one exception type users see. Every user mistake (bad shape, dtype, axis,
// device, file) raises it with a message naming what was wrong and what would be valid.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "graph/shape.h"  // so messages can stream shapes

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Builds a message from streamable parts: throw_error("reshape: ", shape, " has ", n, " elements").
template <typename... Parts>
[[noreturn]] void throw_error(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(os.str());
}

}  // namespace kiln
