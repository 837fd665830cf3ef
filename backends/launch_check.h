// Every backend checks each launch against its kernel before running it, so a wrong argument
// raises kiln::Error instead of touching memory outside a buffer (Kernel::validate_launch). The
// part that does not depend on the launch is done once, when the kernel is compiled.
#pragma once

#include <utility>
#include <vector>

#include "backends/backend.h"

namespace kiln {

class LaunchCheck {
 public:
  LaunchCheck() = default;
  explicit LaunchCheck(const Kernel& k);
  // Throws kiln::Error when `args` do not fit `k` (the kernel this check was made for).
  void operator()(const Kernel& k, const KernelArgs& args) const;

 private:
  int nparams_ = 0;
  bool fixed_ = false;  // no runtime dims: every address range is known at compile time
  bool empty_ = false;  // an empty domain touches nothing
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // per buffer, when fixed
};

}  // namespace kiln
