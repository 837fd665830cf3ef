// Building OpenCL programs, with built binaries cached on disk: one file per (source, device,
// driver, build options) under $KILN_CACHE_DIR/opencl (default ~/.cache/kiln/opencl), written
// from clGetProgramInfo(CL_PROGRAM_BINARIES) and loaded with clCreateProgramWithBinary, so a
// second process skips the OpenCL C compiler. An entry carries a magic, the key hashes, the
// payload size and an FNV-1a checksum; one that does not verify or whose binary the driver
// refuses is rebuilt from source and overwritten. The folder must be the user's own and not
// writable by others (binaries become code); otherwise programs are built without the cache.
// A build failure raises kiln::Error carrying the compiler's log; a successful build's log goes
// to the debug log (KILN_LOG=debug, graph/log.h), never to the terminal.
#pragma once

#include <string>

#include "backends/opencl/device.h"

namespace kiln::opencl {

// The Kiln cache folder ($KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln, /tmp/kiln-<uid>);
// "" when refused.
std::string kiln_cache_dir();

// Points PoCL's own kernel cache (POCL_CACHE_DIR) inside Kiln's, unless the user set it.
void place_pocl_cache();

struct BuiltProgram {
  cl_program program = nullptr;
  bool from_cache = false;
};

// `name` is for messages (the Kiln kernel's name).
BuiltProgram build_program(ClDevice& dev, const std::string& source, const std::string& name);

// The cache file a source would use on `dev` ("" without a usable cache folder).
std::string program_cache_path(const ClDevice& dev, const std::string& source);

}  // namespace kiln::opencl
