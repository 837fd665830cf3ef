// libFuzzer target for load_npy. Each input is written to a file and loaded: a kiln::Error is a
// correct answer to a bad file; a crash, a sanitizer report or any other exception is a finding.
// Built by `make fuzz` (clang-15, ASan + UBSan); seeds in tests/fuzz/npy_seeds.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "kiln.h"

namespace {

// One scratch file per fuzzing process, removed at exit.
struct ScratchFile {
  std::string path;
  ScratchFile() {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path = std::string(dir) + "/kiln-fuzz-npy-" + std::to_string(getpid()) + ".npy";
  }
  ~ScratchFile() { std::remove(path.c_str()); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ScratchFile file;
  {
    std::ofstream out(file.path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    kiln::Array a = kiln::load_npy(file.path);
    // Read every element back: the array must really hold what its shape and dtype claim.
    volatile double sink = 0;
    for (double v : a.to_vector<double>()) sink = sink + v;
  } catch (const kiln::Error&) {
  }
  return 0;
}
