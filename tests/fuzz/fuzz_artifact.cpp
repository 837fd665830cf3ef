// libFuzzer target for the AOT artifact reader. The checksum is skipped so mutations reach the
// parser behind it; a kiln::Error is a correct answer to a bad artifact, and an artifact the
// reader accepts must round-trip (its artifact text reads back to the same text form). A crash,
// a hang, a sanitizer report or another exception is a finding. Seeds: tests/fuzz/artifact_seeds
// (written by examples/aot.cpp's save step: `kiln_aot_example DIR`).
#include <cstdint>
#include <string>
#include <string_view>

#include "compile/aot_state.h"
#include "graph/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    std::shared_ptr<kiln::AotState> s = kiln::read_artifact(text, "fuzz", {}, false);
    std::string again = kiln::artifact_text(*s);
    std::shared_ptr<kiln::AotState> t = kiln::read_artifact(again, "fuzz again", {}, true);
    if (kiln::lowered_text(*t) != kiln::lowered_text(*s)) __builtin_trap();
  } catch (const kiln::Error&) {
  }
  return 0;
}
