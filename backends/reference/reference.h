// The reference backend: a plain C++ interpreter of Kernel IR and of the library ops, written to
// be obviously correct rather than fast. It is the oracle every other backend is tested against,
// so its scalar semantics (scalar_ops.h) are the definition of Kiln's semantics.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace kiln {

std::shared_ptr<Backend> make_reference_backend();
// Runs a native primitive on host buffers (native_reference.cpp); the reference queue's
// enqueue_native.
void reference_native(const NativeArgs& args);

}  // namespace kiln
