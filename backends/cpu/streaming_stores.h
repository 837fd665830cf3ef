// Non-temporal ("streaming") stores for the output of the cpu backend's row walk. An ordinary
// store first reads the line it writes (read-for-ownership), so a walk whose output does not
// stay in cache moves ~3x its output's bytes where a streaming copy moves 2x. Streaming pays
// only past the last-level cache (below it the next op reads the output from cache), and only
// as whole aligned vectors: LLVM splits a non-temporal vector store it cannot prove aligned
// into scalar `movnti`, which measured ~2x slower than ordinary stores (docs/performance.md).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/kernel_ir.h"

namespace llvm {
class Module;
}  // namespace llvm

namespace kiln::cpu {

// The alignment, in bytes, every streamed row starts at: a cache line, and the widest vector
// (AVX-512) the cpu backend's loops use.
constexpr int64_t kStreamAlign = 64;

// The output bytes a kernel must exceed for its stores to stream: KILN_NONTEMPORAL_BYTES when
// set (read at each compile; tests and measurements use it), else last_level_cache_bytes();
// -1 (never) when the cache size is unknown.
int64_t streaming_min_bytes();

// The buffers of row kernel `k` whose stores in its element-wise (last) pass may stream: the
// map's offset and strides are constants, the innermost axis contiguous, and the offset and
// every other stride whole multiples of kStreamAlign bytes, so every run the vectorised loop
// writes starts kStreamAlign-aligned when the buffer does (the kernel checks that per call).
std::vector<int> streamable_buffers(const Kernel& k);

// Whether streaming stores pay for row kernel `k` on this host (streamable_buffers(k) non-empty),
// measured once per kernel and host (tune.h, family "row_stores", key "rows/<k's hash>";
// KILN_ROW_STORES=ordinary|streaming forces the answer): k's walk over its first rows, about
// twice the last-level cache of output, on one thread with ordinary and with streaming stores.
// Which wins depends on the kernel, not only the host: streaming skips reading each output line
// first, but where a row's work comes between its read and its stores, ordinary stores' write-
// backs overlap the next row's work while streaming stores leave the core as they are issued.
bool streaming_pays(const Kernel& k);

// Whether the cpu backend compiles its walk of `k` with streaming stores: an x86 host, some
// buffer streamable, the streamable buffers' bytes above streaming_min_bytes(), and
// streaming_pays(k).
bool streams_output(const Kernel& k);

// After LLVM's optimiser: marks non-temporal the stores of whole vectors (16 bytes or more, a
// power of two) whose alignment the optimiser proved to be at least their size, through a
// pointer the function assumes kStreamAlign-aligned (the streaming walk's assume, codegen.cpp)
// where that assume dominates them. Scalar tails of rows and unproven vectors stay ordinary.
// (Marked before vectorising, the loop would not vectorise on hosts where LLVM has no
// non-temporal store of a 4-byte-aligned pair, or be split into `movnti` where it has.)
void mark_streaming_stores(llvm::Module& m);

}  // namespace kiln::cpu
