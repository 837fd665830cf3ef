#include "backends/vulkan/scatter_shader.h"

#include <sstream>

#include "backends/vulkan/float_controls.h"
#include "backends/vulkan/gather_shader.h"
#include "backends/vulkan/glsl_prelude.h"
#include "graph/error.h"

namespace kiln::vulkan {

namespace {

// Element e of a packed array of words: E elements of BITS bits to a word.
const char* kPacked =
    R"(uint k_elem(uint word, uint e) { return (word >> ((e % E) * BITS)) & MASK; }
)";

// Float adds as compare-and-swap loops on the bits (a NaN compares equal to itself there).
const char* kAddFloat = R"(void k_addf(uint s, float v) {
  uint seen = b2.d[s];
  for (;;) {
    uint old = atomicCompSwap(b2.d[s], seen, floatBitsToUint(uintBitsToFloat(seen) + v));
    if (old == seen) break;
    seen = old;
  }
}
)";
const char* kAddDouble = R"(void k_addd(uint s, double v) {
  uint64_t seen = b2.d[s];
  for (;;) {
    uint64_t old = atomicCompSwap(b2.d[s], seen, doubleBitsToUint64(uint64BitsToDouble(seen) + v));
    if (old == seen) break;
    seen = old;
  }
}
)";

// The pass's step at position w (an update, a temporary element or an output word).
const char* kAddStep = R"(void step(uint g) {
  uint s = slot_of(g);
  ADD(s, UPDATE(g));
}
)";
const char* kWidenStep = R"(void step(uint e) { b1.d[e] = WIDEN(k_elem(b0.d[e / E], e)); }
)";
// With packed elements, `mine` marks the bytes this word's elements fill (all of them but in
// the output's last word, whose other bytes stay as they are).
const char* kNarrowStep = R"(void step(uint w) {
  uint word = 0u, mine = 0u;
  for (uint e = 0u; e < E; ++e) {
    uint g = w * E + e;
    if (g < pc.count) {
      word |= (NARROW(b0.d[g]) & MASK) << (e * BITS);
      mine |= MASK << (e * BITS);
    }
  }
  if (mine != 0xffffffffu) word |= b1.d[w] & ~mine;
  b1.d[w] = word;
}
)";

const char* kMain = R"(void main() {
  uint lanes = gl_NumWorkGroups.x * gl_NumWorkGroups.y * LANES;
  uint w = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * LANES +
           gl_LocalInvocationID.x;
  for (; w < pc.words; w += lanes) step(w);
}
)";

// ADD(s, x) for dtype d: x as UPDATE(g) gives it (a masked uint for packed types).
std::string add_of(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool: return "if ((x) != 0u) atomicOr(b2.d[s], 1u)";
    case Dtype::Kind::Float16: return "k_addf(s, k_h2f(x))";
    case Dtype::Kind::BFloat16: return "k_addf(s, k_bf2f(x))";
    case Dtype::Kind::Float32: return "k_addf(s, uintBitsToFloat(x))";
    case Dtype::Kind::Float64: return "k_addd(s, uint64BitsToDouble(x))";
    default: return "atomicAdd(b2.d[s], x)";  // wrapping: 8-bit sums wrap again when packed
  }
}

// WIDEN(x) (a masked stored element to the temporary's bits) and NARROW(x) (back).
std::pair<std::string, std::string> widen_narrow(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool: return {"((x) != 0u ? 1u : 0u)", "(x)"};
    case Dtype::Kind::Float16: return {"floatBitsToUint(k_h2f(x))", "k_f2h(uintBitsToFloat(x))"};
    case Dtype::Kind::BFloat16: return {"floatBitsToUint(k_bf2f(x))", "k_f2bf(uintBitsToFloat(x))"};
    default: return {"(x)", "(x)"};  // int8, uint8: sums wrap to 8 bits when packed
  }
}

}  // namespace

std::string scatter_glsl(Dtype d, ScatterPass pass, bool by_address,
                         const ScatterFloatModes& modes) {
  const bool wide = scatter_add_is_wide(d), wide64 = d.size() == 8;
  if (pass != ScatterPass::Add && !wide)
    throw_error("internal: scatter_add of ", d.name(), " has no widening or rounding pass");
  int64_t e = wide ? gather_elements_per_word(d.size()) : 1;
  // Each binding's element type, in binding order.
  std::vector<std::string> types;
  if (pass == ScatterPass::Add) {
    std::string t = wide64 ? "uint64_t" : "uint";
    types = {"uvec2", t, t};
  } else {
    types = {"uint", "uint"};
  }
  std::ostringstream os;
  os << "#version 450\n";
  if (wide64)
    os << "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
       << "#extension GL_EXT_shader_atomic_int64 : require\n";
  if (by_address)
    os << "#extension GL_EXT_buffer_reference : require\n"
       << "#extension GL_EXT_buffer_reference_uvec2 : require\n";
  if (pass == ScatterPass::Add && d.is_float())  // the modes of the width the pass adds in
    emit_float_controls(os, {modes.keep_nan32 && !wide64, modes.keep_denorm32 && !wide64,
                             modes.keep_nan64 && wide64, modes.keep_denorm64 && wide64});
  os << "#define E " << e << "u\n#define BITS " << 32 / e << "u\n#define MASK "
     << (e == 4   ? "0xffu"
         : e == 2 ? "0xffffu"
                  : "0xffffffffu")
     << "\n#define LANES " << kGatherLanes << "u\n"
     << "layout(local_size_x = " << kGatherLanes << ") in;\n"
     << "layout(push_constant) uniform Push { uint outer, n, inner, m, count, words, "
        "shared_index, pad; uvec2 a0, a1, a2; } pc;\n";
  for (size_t b = 0; b < types.size(); ++b) {
    // Only the pass's last binding is written.
    const char* access = b + 1 < types.size() ? "readonly " : "";
    if (by_address)
      os << "layout(buffer_reference, std430, buffer_reference_align = 16) " << access << "buffer R"
         << b << " { " << types[b] << " d[]; };\n#define b" << b << " R" << b << "(pc.a" << b
         << ")\n";
    else
      os << "layout(std430, set = 0, binding = " << b << ") " << access << "buffer B" << b << " { "
         << types[b] << " d[]; } b" << b << ";\n";
  }
  if (d.is_half()) os << glsl_prelude(false, false);
  os << kPacked;
  auto [widen, narrow] = widen_narrow(d);
  switch (pass) {
    case ScatterPass::Widen: os << "#define WIDEN(x) " << widen << "\n" << kWidenStep; break;
    case ScatterPass::Narrow: os << "#define NARROW(x) " << narrow << "\n" << kNarrowStep; break;
    case ScatterPass::Add:
      os << "#define UPDATE(g) " << (wide ? "k_elem(b1.d[(g) / E], g)" : "b1.d[g]") << "\n"
         << "#define ADD(s, x) " << add_of(d) << "\n"
         << (d.is_float() ? (d == float64 ? kAddDouble : kAddFloat) : "")
         << indexed_position_glsl("slot_of", "b0") << kAddStep;
      break;
  }
  os << kMain;
  return os.str();
}

}  // namespace kiln::vulkan
