// Choices the cpu backend makes per kernel beyond its Kernel IR, passed through the JIT to the
// code generator (codegen.h). They change the generated code, so the JIT folds them into a
// kernel's cache key and its disk-cache text.
#pragma once

#include <string>

namespace kiln::cpu {

struct CodegenOptions {
  // A row kernel's walk stores its streamable buffers (streaming_stores.h) with non-temporal
  // stores when the launch binds them 64-byte aligned (checked per call; x86 only).
  bool streaming_stores = false;

  // Appended to the kernel's canonical text in the JIT's caches: empty for the defaults, so
  // their entries keep the keys they had.
  std::string tag() const { return streaming_stores ? "\noptions streaming_stores\n" : ""; }
};

}  // namespace kiln::cpu
