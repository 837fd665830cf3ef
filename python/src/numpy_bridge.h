// Arrays to and from NumPy and anything with DLPack or the buffer protocol. Out: a read-only
// view of an evaluated host buffer (no copy; the view keeps the buffer alive), or a copy when the
// data lives on a device. In: one copy into a Kiln host buffer (Kiln arrays are immutable, so
// they cannot alias memory the caller may still write).
#pragma once

#include "kiln_py.h"

namespace kiln::py {

// An array made from a NumPy array, a DLPack producer or a buffer-protocol object; nullopt when
// `obj` is none of those.
std::optional<Array> from_array_like(nb::handle obj);
// `a` as a NumPy array (evaluating it first): a read-only view when its buffer is host memory.
nb::object to_numpy(const Array& a, bool copy);
// Waits for `a` to be evaluated with the GIL released, raising KeyboardInterrupt (after
// cancelling the work) when Ctrl-C arrives meanwhile. Rethrows evaluation errors.
void wait_for(const std::vector<Array>& arrays);
// The buffer protocol of kiln.array (memoryview(a), np.asarray(a)): a read-only view of an
// evaluated host buffer.
extern PyType_Slot array_buffer_slots[];

}  // namespace kiln::py
