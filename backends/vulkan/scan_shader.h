// The GLSL of Kiln's Vulkan scans (Op::Scan: cumsum, cumprod, cummax, cummin, logcumsumexp;
// inclusive or exclusive, forward or reversed), the same algorithm as backends/opencl/scan.h: on
// a GPU a workgroup scans one tile of one row in shared memory (each invocation a run of
// kScanRun, the runs' totals scanned across the group), on a CPU device an invocation scans a
// chunk of a row sequentially; rows longer than a tile or chunk take three dispatches (the
// totals, their exclusive scan by the accumulator-stage shader, the tiles again from their
// carries). One shader per (dtype, op, stage, form). Elements are
// stored as the backend stores them: 8- and 16-bit types packed 4 or 2 to a uint word, which
// a scan writes byte by byte with atomicAnd/atomicOr (rows interleave within a word when
// inner > 1, so no invocation owns a whole word), 64-bit types as uvec2. Accumulators: int or
// uint for bool/int8/uint8 (bool sums "or", products "and": max and min of 0 and 1), float for
// float16/bfloat16 (rounded once, at the store), the dtype itself otherwise; float64 needs
// shaderFloat64 and int64/uint64 shaderInt64 (double exp/log: the prelude's).
#pragma once

#include <cstdint>
#include <string>

#include "backends/vulkan/float_controls.h"
#include "graph/dtype.h"

namespace kiln::vulkan {

// Push constants, in the shader's order. The chunked form reads tiles as chunks per row, groups as
// invocations (rows * chunks) and chunk as elements per chunk.
struct ScanPush {
  uint32_t n = 0, inner = 1, tiles = 1, groups = 0;  // groups: rows * tiles
  uint32_t pad = 0, flags = 0, gx = 1, chunk = 0;    // gx: workgroups along x (a 2-D grid)
  uint64_t address[3] = {0, 0, 0};                   // src, dst, aux: the by-address form only
};

// The combine, a constant of the shader (bool's Sum and Prod arrive as Max and Min): as a push
// constant lavapipe ran cumsum of 2^20 float32 in 8.1 ms, as a constant in 3.8 ms.
enum ScanCode : uint32_t { kScanSum, kScanProd, kScanMax, kScanMin, kScanLogAddExp };
// ScanPush::flags.
enum ScanFlag : uint32_t {
  kScanReverse = 1,
  kScanInclusive = 2,
  kScanTotals = 4,
  kScanCarried = 8
};

constexpr int kScanLanes = 128;     // invocations per workgroup
constexpr int kScanChunkLanes = 8;  // the chunked form's: lavapipe's SIMD width
constexpr int kScanRun = 4;         // elements per invocation: a tile is kScanLanes * kScanRun

// Bytes of one accumulator of dtype d (the totals and carries between dispatches).
inline size_t scan_accumulator_bytes(Dtype d) { return d.size() == 8 ? 8 : 4; }

// The float controls (SPV_KHR_float_controls) the device offers, which a float scan asks for as
// generated kernels do (PhysicalInfo::keep_nan32 ...): NaN in cummax/cummin, infinities, signed
// zeros and denormal sums hold on drivers that would otherwise assume them away.
using ScanFloatModes = FloatModes;

// `acc_stage`: src and dst hold accumulators (the totals' scan), else elements of d.
// `chunked`: the CPU device's form (each invocation a chunk of a row, sequentially; no shared
// memory or barriers, which cost lavapipe a loop over the workgroup each), else the tile form.
// `by_address`: buffers through their device addresses, else bindings 0, 1, 2 (src, dst, aux).
// has_float64, has_int64: the device's features (the prelude's parts). Raises kiln::Error for a
// dtype the device cannot scan.
std::string scan_glsl(Dtype d, uint32_t op, bool acc_stage, bool chunked, bool by_address,
                      bool has_float64, bool has_int64, const ScanFloatModes& modes);

}  // namespace kiln::vulkan
