#include "backends/vulkan/sort_shader.h"

#include <sstream>

#include "graph/error.h"

namespace kiln::vulkan {

namespace {

// The element at position p as bits (a uint, or a uvec2 of (low, high) words), and its key:
// floats' NaN (any payload) the largest key; a set sign bit flips every bit, a clear one sets
// the sign bit (-inf < ... < -0 < +0 < ... < +inf); argsort first makes -0 into +0 (a tie);
// signed integers flip the sign bit; descending complements the key, NaN excepted. Padding
// slots take the largest key and an index >= n: they sort after every element.
const char* kNarrowKeys = R"(uint load_bits(uint p) {
#if PACK > 1
  return (src.d[p / E] >> ((p % E) * BITS)) & WMASK;
#else
  return src.d[p];
#endif
}
uint key_of(uint b) {
#if KIND == 2
  if ((b & MAG) > INF) return KMAX;
  if (pc.total_order == 0u && (b & MAG) == 0u) b = 0u;
  uint k = (b & SIGN) != 0u ? (~b & WMASK) : (b | SIGN);
#elif KIND == 1
  uint k = b ^ SIGN;
#else
  uint k = b;
#endif
  return pc.desc != 0u ? (~k & WMASK) : k;
}
bool after(uint ka, uint ia, uint kb, uint ib) { return ka > kb || (ka == kb && ia > ib); }
)";

const char* kWideKeys =
    R"(uvec2 load_bits(uint p) { return uvec2(src.d[2u * p], src.d[2u * p + 1u]); }
uvec2 key_of(uvec2 b) {
#if KIND == 2
  uint hm = b.y & 0x7fffffffu;
  if (hm > 0x7ff00000u || (hm == 0x7ff00000u && b.x != 0u)) return KMAX;
  if (pc.total_order == 0u && hm == 0u && b.x == 0u) b = uvec2(0u);
  uvec2 k = (b.y & 0x80000000u) != 0u ? ~b : uvec2(b.x, b.y | 0x80000000u);
#elif KIND == 1
  uvec2 k = uvec2(b.x, b.y ^ 0x80000000u);
#else
  uvec2 k = b;
#endif
  return pc.desc != 0u ? ~k : k;
}
bool after(uvec2 ka, uint ia, uvec2 kb, uint ib) {
  return ka.y > kb.y || (ka.y == kb.y && (ka.x > kb.x || (ka.x == kb.x && ia > ib)));
}
)";

const char* kCommon =
    R"(uint group_index() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
uint group_count() { return gl_NumWorkGroups.x * gl_NumWorkGroups.y; }
uint pmask() { return (1u << pc.plog) - 1u; }
// Whether slots x < y = x + j of stage k are in order: ascending where bit k of x's row
// position is clear.
bool out_of_order(uint x, uint k, KT kx, uint ix, KT ky, uint iy) {
  return after(kx, ix, ky, iy) == (((x & pmask()) & k) == 0u);
}
)";

// Slot t of row r = t >> plog holds element i = t & pmask of that row (padding past n).
const char* kKeysMain = R"(void main() {
  for (uint t = group_index() * LANES + gl_LocalInvocationID.x; t < pc.slots;
       t += group_count() * LANES) {
    uint i = t & pmask();
    KT k = KMAX;
    if (t < pc.used && i < pc.n) {
      uint r = t >> pc.plog, o = r / pc.inner, q = r - o * pc.inner;
      k = key_of(load_bits((o * pc.n + i) * pc.inner + q));
    }
    keys.d[t] = k;
    idx.d[t] = i;
  }
}
)";

// Blocks of 2 * LANES slots in shared memory, stages k0..k1 (backends/sort_passes.h); the loop
// over blocks is uniform in a workgroup, so its barriers are too.
const char* kLocalMain = R"(shared KT sk[2u * LANES];
shared uint si[2u * LANES];
void main() {
  uint l = gl_LocalInvocationID.x;
  for (uint b = group_index(); b < pc.count; b += group_count()) {
    uint base = b * 2u * LANES;
    sk[l] = keys.d[base + l], si[l] = idx.d[base + l];
    sk[l + LANES] = keys.d[base + l + LANES], si[l + LANES] = idx.d[base + l + LANES];
    for (uint k = pc.k0;; k <<= 1) {
      for (uint j = k == pc.k0 ? pc.j0 : k >> 1; j > 0u; j >>= 1) {
        memoryBarrierShared();
        barrier();
        uint x = ((l & ~(j - 1u)) << 1) | (l & (j - 1u)), y = x + j;
        KT kx = sk[x], ky = sk[y];
        uint ix = si[x], iy = si[y];
        if (out_of_order(base + x, k, kx, ix, ky, iy)) {
          sk[x] = ky, sk[y] = kx, si[x] = iy, si[y] = ix;
        }
      }
      if (k >= pc.k1) break;
    }
    memoryBarrierShared();
    barrier();
    keys.d[base + l] = sk[l], idx.d[base + l] = si[l];
    keys.d[base + l + LANES] = sk[l + LANES], idx.d[base + l + LANES] = si[l + LANES];
    barrier();
  }
}
)";

// The step (k0, j0) across the array, an invocation exchanging pair p; or with steps = 2 the
// steps j0 and j0 / 2, invocation p holding the four slots x, x + j0 / 2, x + j0, x + 3 j0 / 2
// (one direction: k0 > j0).
const char* kGlobalMain =
    R"(void order(inout KT ka, inout uint ia, inout KT kb, inout uint ib, bool up) {
  if (after(ka, ia, kb, ib) == up) {
    KT kt = ka;
    uint it = ia;
    ka = kb, kb = kt, ia = ib, ib = it;
  }
}
void main() {
  uint j = pc.j0, h = j >> 1;
  for (uint p = group_index() * LANES + gl_LocalInvocationID.x; p < pc.count;
       p += group_count() * LANES) {
    if (pc.steps == 1u) {
      uint x = ((p & ~(j - 1u)) << 1) | (p & (j - 1u)), y = x + j;
      KT kx = keys.d[x], ky = keys.d[y];
      uint ix = idx.d[x], iy = idx.d[y];
      if (out_of_order(x, pc.k0, kx, ix, ky, iy)) {
        keys.d[x] = ky, keys.d[y] = kx, idx.d[x] = iy, idx.d[y] = ix;
      }
      continue;
    }
    uint t = ((p & ~(h - 1u)) << 1) | (p & (h - 1u));
    uint x = ((t & ~(j - 1u)) << 1) | (t & (j - 1u));
    bool up = ((x & pmask()) & pc.k0) == 0u;
    KT k0 = keys.d[x], k1 = keys.d[x + h], k2 = keys.d[x + j], k3 = keys.d[x + j + h];
    uint i0 = idx.d[x], i1 = idx.d[x + h], i2 = idx.d[x + j], i3 = idx.d[x + j + h];
    order(k0, i0, k2, i2, up);
    order(k1, i1, k3, i3, up);
    order(k0, i0, k1, i1, up);
    order(k2, i2, k3, i3, up);
    keys.d[x] = k0, keys.d[x + h] = k1, keys.d[x + j] = k2, keys.d[x + j + h] = k3;
    idx.d[x] = i0, idx.d[x + h] = i1, idx.d[x + j] = i2, idx.d[x + j + h] = i3;
  }
}
)";

// Output element g = (o, i, q) takes the element ranked i in row (o, q), or its index; packed
// types write whole words, the output's last keeping its bytes past the output.
const char* kOutMain = R"(uint ranked(uint g) {
  uint row = g / pc.inner, q = g - row * pc.inner, o = row / pc.n, i = row - o * pc.n;
  return idx.d[((o * pc.inner + q) << pc.plog) + i];
}
uint source_of(uint g, uint j) {
  uint row = g / pc.inner, q = g - row * pc.inner, o = row / pc.n;
  return (o * pc.n + j) * pc.inner + q;
}
void main() {
  for (uint w = group_index() * LANES + gl_LocalInvocationID.x; w < pc.count;
       w += group_count() * LANES) {
    if (pc.argsort != 0u) {
      dst.d[2u * w] = ranked(w), dst.d[2u * w + 1u] = 0u;
      continue;
    }
#if WIDE
    uint p = source_of(w, ranked(w));
    dst.d[2u * w] = src.d[2u * p], dst.d[2u * w + 1u] = src.d[2u * p + 1u];
#elif PACK == 1
    dst.d[w] = src.d[source_of(w, ranked(w))];
#else
    uint word = 0u, mine = 0u;
    for (uint e = 0u; e < E; ++e) {
      uint g = w * E + e;
      if (g < pc.total) {
        word |= load_bits(source_of(g, ranked(g))) << (e * BITS);
        mine |= WMASK << (e * BITS);
      }
    }
    if (mine != 0xffffffffu) word |= dst.d[w] & ~mine;
    dst.d[w] = word;
#endif
  }
}
)";

}  // namespace

std::string sort_glsl(Dtype d, SortStage stage, bool by_address) {
  const size_t bytes = d.size();
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8)
    throw_error("vulkan: sort of ", d.name(), " is not supported");
  const bool wide = bytes == 8;
  const int kind = d.is_float() ? 2 : (d.is_int() && !d.is_unsigned()) ? 1 : 0;
  const uint32_t bits = wide ? 32 : static_cast<uint32_t>(bytes * 8);
  const uint32_t sign = wide ? 0 : 1u << (bits - 1);
  uint32_t inf = 0;  // the bits of +inf (narrow floats): exponent all ones, mantissa zero
  if (d == float16) inf = 0x7c00;
  if (d == bfloat16) inf = 0x7f80;
  if (d == float32) inf = 0x7f800000;
  std::ostringstream os;
  os << "#version 450\n";
  if (by_address)
    os << "#extension GL_EXT_buffer_reference : require\n"
       << "#extension GL_EXT_buffer_reference_uvec2 : require\n";
  os << "#define WIDE " << wide << "\n#define KIND " << kind << "\n#define PACK "
     << (wide ? 1 : 4 / bytes) << "\n#define E " << (wide ? 1 : 4 / bytes) << "u\n#define BITS "
     << bits << "u\n#define WMASK 0x" << std::hex << (bits == 32 ? 0xffffffffu : (1u << bits) - 1u)
     << "u\n#define SIGN 0x" << sign << "u\n#define MAG 0x" << (sign - 1) << "u\n#define INF 0x"
     << inf << "u\n"
     << std::dec << "#define LANES " << kSortLanes << "u\n#define KT " << (wide ? "uvec2" : "uint")
     << "\n#define KMAX " << (wide ? "uvec2(0xffffffffu)" : "0xffffffffu") << "\n"
     << "layout(local_size_x = " << kSortLanes << ") in;\n"
     << "layout(push_constant) uniform Push { uint n, inner, plog, used, slots, count, total, "
        "total_order, desc, argsort, k0, k1, j0, steps; uvec2 a0, a1, a2, a3; } pc;\n";
  if (by_address) {
    const char* head = "layout(buffer_reference, std430, buffer_reference_align = 16) buffer ";
    os << head << "RA { uint d[]; };\n"
       << head << "RK { KT d[]; };\n"
       << head << "RI { uint d[]; };\n"
       << head << "RO { uint d[]; };\n"
       << "#define src RA(pc.a0)\n#define keys RK(pc.a1)\n#define idx RI(pc.a2)\n"
       << "#define dst RO(pc.a3)\n";
  } else {
    os << "layout(std430, set = 0, binding = 0) readonly buffer A { uint d[]; } src;\n"
       << "layout(std430, set = 0, binding = 1) buffer K { KT d[]; } keys;\n"
       << "layout(std430, set = 0, binding = 2) buffer I { uint d[]; } idx;\n"
       << "layout(std430, set = 0, binding = 3) buffer O { uint d[]; } dst;\n";
  }
  os << (wide ? kWideKeys : kNarrowKeys) << kCommon;
  switch (stage) {
    case SortStage::Keys: os << kKeysMain; break;
    case SortStage::Local: os << kLocalMain; break;
    case SortStage::Global: os << kGlobalMain; break;
    case SortStage::Out: os << kOutMain; break;
  }
  return os.str();
}

}  // namespace kiln::vulkan
