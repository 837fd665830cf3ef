#include "backends/opencl/codegen.h"

#include <string>
#include <vector>

#include "backends/opencl/dialect_opencl.h"
#include "backends/opencl/prelude_opencl.h"
#include "backends/source/emitter.h"
#include "graph/error.h"

namespace kiln::opencl {

namespace {

using source::Emitter;

// The layout of OpenCL programs (entry points, loops over the domain, the reduction scheme),
// written on the shared emitter with the OpenCL C dialect.
class Layout {
 public:
  Layout(const Kernel& k, const DeviceCaps& caps) : k_(k), caps_(caps), d_(caps), em_(k, d_) {}

  Generated run() {
    Generated g;
    g.num_params = k_.num_params();
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i) {
      const Value& v = k_.body[i];
      if (v.kind == ValueKind::Constant && v.param >= 0 && v.dtype.is_float() && v.dtype != float64)
        g.scalars.push_back({v.param, v.dtype}), scalar_values_.push_back(i);
    }
    out() << "#pragma OPENCL FP_CONTRACT OFF\n";
    if (caps_.fp64) out() << "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    out() << opencl_prelude();
    reduce_at_ = k_.reduce ? k_.reduce->value : static_cast<int>(k_.body.size());
    if (k_.reduce) {
      g.reduction = true;
      emit_combine();
      emit_reduce();
      if (k_.kept_axes() > 0) emit_rows();
      if (k_.kept_axes() == 0) {
        g.split = true;
        emit_part();
        emit_final();
      }
      g.acc_size = acc_size();
    } else {
      emit_map();
    }
    g.source = out().str();
    return g;
  }

 private:
  std::ostringstream& out() { return em_.out(); }

  // ---- signatures and shared pieces ---------------------------------------------------------
  void signature(const char* entry, bool locals, const std::string& extra) {
    out() << "__kernel void " << entry << "(";
    for (size_t b = 0; b < k_.buffers.size(); ++b)
      out() << (b ? ", " : "") << "__global " << (k_.buffers[b].output ? "" : "const ")
            << OpenclDialect::storage_type(k_.buffers[b].dtype) << "* b" << b;
    bool first = k_.buffers.empty();
    auto sep = [&] {
      if (!first) out() << ", ";
      first = false;
    };
    for (int p = 0; p < k_.num_params(); ++p) sep(), out() << "long p" << p;
    for (int i : scalar_values_) sep(), out() << "float c" << i;
    if (locals) {
      sep();
      out() << "__local " << acc_type() << "* la, __local long* lp, __local int* lh";
    }
    if (!extra.empty()) sep(), out() << extra;
    out() << ") {\n";
    for (int a = 0; a < k_.ndim(); ++a)
      out() << "  const long e" << a << " = " << d_.dim(k_.domain[a]) << ";\n";
    em_.constants("  ");
  }

  // Declares i{from}..i{to-1} from the linear index `lin` (row-major over those axes).
  void coords(int from, int to, const std::string& lin, const std::string& ind) {
    if (from >= to) return;
    out() << ind << "long r_ = " << lin << ";\n";
    for (int a = to - 1; a > from; --a)
      out() << ind << "const long i" << a << " = r_ % e" << a << "; r_ /= e" << a << ";\n";
    out() << ind << "const long i" << from << " = r_;\n";
  }

  std::string product(int from, int to) const {
    std::string s = "1L";
    for (int a = from; a < to; ++a) s += " * e" + std::to_string(a);
    return s;
  }

  // ---- element-wise -------------------------------------------------------------------------
  void emit_map() {
    signature("kiln_map", false, "");
    out() << "  const long total = " << product(0, k_.ndim()) << ";\n";
    if (caps_.cpu) {
      // A CPU device runs a work-group's items one after another on one thread: each item
      // takes one contiguous run of the domain, a loop the driver's compiler vectorises with
      // contiguous vector loads and stores (one element per item made PoCL's gelu ~4x slower:
      // its work-item loop vectorised, but with the per-item bounds check and index
      // arithmetic in the way). The host launches a few groups per compute unit.
      out() << "  const long items = get_global_size(0);\n";
      out() << "  const long per = (total + items - 1) / items;\n";
      out() << "  const long from = get_global_id(0) * per;\n";
      out() << "  const long to = min(from + per, total);\n";
      out() << "  long g0 = from;\n";
      if (vector_form()) emit_vector_run();
      out() << "  for (long g = g0; g < to; ++g) {\n";
    } else {
      // One element per work-item (the launch covers the domain): neighbouring items touch
      // neighbouring elements, as GPUs want.
      out() << "  const long g = get_global_id(0);\n";
      out() << "  if (g < total) {\n";
    }
    coords(0, k_.ndim(), "g", "    ");
    em_.values(0, static_cast<int>(k_.body.size()), "    ");
    em_.stores("    ");
    out() << "  }\n}\n";
  }

  // A float32 kernel over one contiguous axis whose every load and store is at the point
  // itself, with operations OpenCL C defines on vectors: its CPU-device run goes 16 lanes at a
  // time in explicit float16 (PoCL's vectoriser stops at 256-bit vectors on AVX-512 hosts, where
  // explicit 512-bit types are used as such), the scalar loop takes the rest.
  bool vector_form() const {
    if (k_.ndim() != 1 || k_.reduce) return false;
    auto at_point = [](const IndexMap& m) {
      return m.offset == Dim::constant(0) && m.strides.size() == 1 &&
             m.strides[0] == Dim::constant(1);
    };
    for (const KernelBuffer& b : k_.buffers)
      if (b.dtype != float32 || !at_point(b.map)) return false;
    for (const Value& val : k_.body) {
      if (val.dtype != float32) return false;
      switch (val.kind) {
        case ValueKind::Load:
        case ValueKind::Constant: break;
        case ValueKind::Unary:
          // Not sin/cos: PoCL's 16-lane versions lose accuracy on large arguments (sin(x) off
          // by 7e-3 where the scalar one is exact to an ulp); not rsqrt (computed in double).
          if (val.unary == UnaryOp::Rsqrt || val.unary == UnaryOp::LogicalNot ||
              val.unary == UnaryOp::Sin || val.unary == UnaryOp::Cos)
            return false;
          break;
        case ValueKind::Binary:
          if (val.binary != BinaryOp::Add && val.binary != BinaryOp::Subtract &&
              val.binary != BinaryOp::Multiply && val.binary != BinaryOp::Divide &&
              val.binary != BinaryOp::Maximum && val.binary != BinaryOp::Minimum)
            return false;
          break;
        default: return false;
      }
    }
    return true;
  }

  // The 16-lane loop: constants become vectors (shadowing the scalars inside the loop), then
  // loads, values and stores in float16.
  void emit_vector_run() {
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i)
      if (k_.body[i].kind == ValueKind::Constant)
        out() << "  const float16 w" << i << " = (float16)(" << Emitter::v(i) << ");\n";
    out() << "  for (; g0 + 16 <= to; g0 += 16) {\n";
    out() << "    const long g = g0;\n";
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i)
      if (k_.body[i].kind == ValueKind::Constant)
        out() << "    const float16 " << Emitter::v(i) << " = w" << i << ";\n";
    d_.vec16 = true;
    em_.values(0, static_cast<int>(k_.body.size()), "    ");
    for (const Store& st : k_.stores)
      out() << "    vstore16(" << Emitter::v(st.value) << ", 0, b" << st.buffer << " + g);\n";
    d_.vec16 = false;
    out() << "  }\n";
  }

  // ---- reductions ---------------------------------------------------------------------------
  Dtype in_dtype() const { return k_.body[k_.body[reduce_at_].a].dtype; }
  bool float_sum() const {
    ReduceOp op = k_.reduce->op;
    return in_dtype().is_float() && (op == ReduceOp::Sum || op == ReduceOp::Prod);
  }
  std::string acc_type() const {
    if (float_sum()) return in_dtype() == float64 || caps_.fp64 ? "double" : "float";
    return d_.value_type(in_dtype());
  }
  size_t acc_size() const {
    std::string t = acc_type();
    return t == "double" || t == "long" || t == "ulong" ? 8
           : t == "float" || t == "int" || t == "uint"  ? 4
                                                        : 1;
  }
  std::string acc_init() const {
    return k_.reduce->op == ReduceOp::Prod ? "(" + acc_type() + ")1" : "(" + acc_type() + ")0";
  }

  // kiln_comb(a, b): folds state b into state a (sum, product, or the better of the two).
  void emit_combine() {
    std::string A = acc_type();
    out() << "inline void kiln_comb(" << A << "* a, long* pa, int* ha, " << A
          << " b, long pb, int hb) {\n";
    ReduceOp op = k_.reduce->op;
    bool fl = in_dtype().is_float();
    if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
      const char* o = op == ReduceOp::Sum ? "+" : "*";
      if (fl) {
        out() << "  *a = *a " << o << " b;\n";
      } else {
        std::string U = OpenclDialect::unsigned_type(in_dtype());
        out() << "  *a = (" << A << ")((" << U << ")*a " << o << " (" << U << ")b);\n";
      }
    } else {
      std::string better;
      const char* gt = op == ReduceOp::Min ? "<" : ">";
      if (fl) {
        better = std::string("(!isnan(*a) && (isnan(b) || b ") + gt + " *a))";
        if (op == ReduceOp::Argmax)
          better = "(" + better + " || ((b == *a || (isnan(b) && isnan(*a))) && pb < *pa))";
      } else {
        better = std::string("(b ") + gt + " *a)";
        if (op == ReduceOp::Argmax) better = "(" + better + " || (b == *a && pb < *pa))";
      }
      out() << "  if (hb && (!*ha || " << better << ")) { *a = b; *pa = pb; }\n";
    }
    out() << "  *ha = *ha | hb;\n}\n";
  }

  void state_init(const std::string& ind) {
    out() << ind << acc_type() << " acc = " << acc_init() << "; long pos = 0; int has = 0;\n";
  }

  // Folds this work-item's share of positions [lo, hi): interleaved on GPUs, one contiguous run
  // each on CPU devices (DeviceCaps::cpu).
  void items(const std::string& lo, const std::string& hi, const std::string& ind) {
    if (!caps_.cpu) {
      out() << ind << "for (long q = " << lo << " + get_local_id(0); q < " << hi
            << "; q += get_local_size(0)) {\n";
      fold_element(ind + "  ");
      out() << ind << "}\n";
      return;
    }
    out() << ind << "const long run = (" << hi << " - " << lo
          << " + get_local_size(0) - 1) / get_local_size(0);\n";
    out() << ind << "const long qa = " << lo << " + get_local_id(0) * run;\n";
    out() << ind << "const long qb = min(qa + run, (long)(" << hi << "));\n";
    fold_range("qa", "qb", ind);
  }

  // One raw element at reduced position `q`: the prologue, then fold it into the state named
  // by `acc`, `pos` and `has` (this item's own, or one of its unrolled partials).
  void fold_element(const std::string& ind, const std::string& acc = "acc",
                    const std::string& pos = "pos", const std::string& has = "has") {
    coords(k_.kept_axes(), k_.ndim(), "q", ind);
    em_.values(0, reduce_at_, ind);
    int x = k_.body[reduce_at_].a;
    out() << ind << "kiln_comb(&" << acc << ", &" << pos << ", &" << has << ", (" << acc_type()
          << ")" << Emitter::v(x) << ", q, 1);\n";
  }

  void tree(const std::string& ind) {
    out() << ind << "const int lid = (int)get_local_id(0);\n";
    out() << ind << "la[lid] = acc; lp[lid] = pos; lh[lid] = has;\n";
    out() << ind << "barrier(CLK_LOCAL_MEM_FENCE);\n";
    out() << ind << "for (int s = (int)get_local_size(0) / 2; s > 0; s >>= 1) {\n";
    out() << ind << "  if (lid < s) {\n";
    out() << ind << "    " << acc_type() << " ta = la[lid]; long tp = lp[lid]; int th = lh[lid];\n";
    out() << ind << "    kiln_comb(&ta, &tp, &th, la[lid + s], lp[lid + s], lh[lid + s]);\n";
    out() << ind << "    la[lid] = ta; lp[lid] = tp; lh[lid] = th;\n";
    out() << ind << "  }\n";
    out() << ind << "  barrier(CLK_LOCAL_MEM_FENCE);\n";
    out() << ind << "}\n";
  }

  // The reduced value (from local memory after a tree, or from this item's own state), the
  // epilogue at reduced coordinates 0, the stores.
  void finish_body(const std::string& in, bool from_locals) {
    for (int a = k_.kept_axes(); a < k_.ndim(); ++a)
      out() << in << "const long i" << a << " = 0;\n";
    const Value& rv = k_.body[reduce_at_];
    std::string r = k_.reduce->op == ReduceOp::Argmax ? (from_locals ? "lp[0]" : "pos")
                                                      : (from_locals ? "la[0]" : "acc");
    out() << in << "const " << d_.value_type(rv.dtype) << " " << Emitter::v(reduce_at_) << " = ("
          << d_.value_type(rv.dtype) << ")" << r << ";\n";
    em_.values(reduce_at_ + 1, static_cast<int>(k_.body.size()), in);
    em_.stores(in);
  }

  // Work-item 0 finishes after the tree.
  void finish(const std::string& ind) {
    out() << ind << "if (lid == 0) {\n";
    finish_body(ind + "  ", true);
    out() << ind << "}\n";
  }

  // Folds positions [lo, hi) into this item's state. On CPU devices (not argmax) eight partial
  // states take every eighth position and are folded in order at the end: eight independent
  // chains the compiler can interleave and vectorise, where one state is a serial chain of adds
  // or compares (row softmax on PoCL: 750 -> 490 ms). Argmax keeps one state (positions).
  void fold_range(const std::string& lo, const std::string& hi, const std::string& ind) {
    out() << ind << "long q0 = " << lo << ";\n";
    if (caps_.cpu && k_.reduce->op != ReduceOp::Argmax) {
      out() << ind << acc_type() << " pa[8]; long pp[8]; int ph[8];\n";
      out() << ind << "for (int u = 0; u < 8; ++u) { pa[u] = " << acc_init()
            << "; pp[u] = 0; ph[u] = 0; }\n";
      out() << ind << "for (; q0 + 8 <= " << hi << "; q0 += 8) {\n";
      out() << ind << "  for (int u = 0; u < 8; ++u) {\n";
      out() << ind << "    const long q = q0 + u;\n";
      fold_element(ind + "    ", "pa[u]", "pp[u]", "ph[u]");
      out() << ind << "  }\n" << ind << "}\n";
      out() << ind
            << "for (int u = 0; u < 8; ++u) kiln_comb(&acc, &pos, &has, pa[u], pp[u], ph[u]);\n";
    }
    out() << ind << "for (long q = q0; q < " << hi << "; ++q) {\n";
    fold_element(ind + "  ");
    out() << ind << "}\n";
  }

  // One work-item per output element, no local memory or barriers: for many outputs (rows of a
  // softmax), where a work-group per output would spend its time in barriers.
  void emit_rows() {
    signature("kiln_rows", false, "");
    int kept = k_.kept_axes();
    out() << "  const long nout = " << product(0, kept) << ";\n";
    out() << "  const long nred = " << product(kept, k_.ndim()) << ";\n";
    out() << "  const long o = get_global_id(0);\n";
    out() << "  if (o < nout) {\n";
    coords(0, kept, "o", "    ");
    state_init("    ");
    fold_range("0", "nred", "    ");
    finish_body("    ", false);
    out() << "  }\n}\n";
  }

  void emit_reduce() {
    signature("kiln_reduce", true, "");
    int kept = k_.kept_axes();
    out() << "  const long nout = " << product(0, kept) << ";\n";
    out() << "  const long nred = " << product(kept, k_.ndim()) << ";\n";
    out() << "  for (long o = get_group_id(0); o < nout; o += get_num_groups(0)) {\n";
    coords(0, kept, "o", "    ");
    state_init("    ");
    items("0", "nred", "    ");
    tree("    ");
    finish("    ");
    out() << "    barrier(CLK_LOCAL_MEM_FENCE);\n  }\n}\n";
  }

  std::string scratch_args(bool read_only) const {
    std::string c = read_only ? "const " : "";
    return "__global " + c + acc_type() + "* sa, __global " + c + "long* sp, __global " + c +
           "int* sh";
  }

  void emit_part() {
    signature("kiln_part", true, scratch_args(false));
    out() << "  const long nred = " << product(0, k_.ndim()) << ";\n";
    out() << "  const long ng = get_num_groups(0), g = get_group_id(0);\n";
    out() << "  const long chunk = (nred + ng - 1) / ng;\n";
    out() << "  const long lo = g * chunk, hi = min(lo + chunk, nred);\n";
    state_init("  ");
    items("lo", "hi", "  ");
    tree("  ");
    out() << "  if (lid == 0) { sa[g] = la[0]; sp[g] = lp[0]; sh[g] = lh[0]; }\n}\n";
  }

  void emit_final() {
    signature("kiln_final", true, scratch_args(true) + ", long nparts");
    state_init("  ");
    out() << "  for (long q = get_local_id(0); q < nparts; q += get_local_size(0))\n";
    out() << "    kiln_comb(&acc, &pos, &has, sa[q], sp[q], sh[q]);\n";
    tree("  ");
    finish("  ");
    out() << "}\n";
  }

  const Kernel& k_;
  DeviceCaps caps_;
  OpenclDialect d_;
  Emitter em_;
  std::vector<int> scalar_values_;
  int reduce_at_ = 0;
};

bool uses(const Kernel& k, bool (*pred)(Dtype)) {
  for (const KernelBuffer& b : k.buffers)
    if (pred(b.dtype)) return true;
  for (const Value& v : k.body)
    if (pred(v.dtype)) return true;
  return false;
}

}  // namespace

Generated generate(const Kernel& k, const DeviceCaps& caps, const std::string& device_name) {
  if (!caps.fp64 && uses(k, [](Dtype d) { return d == float64; }))
    throw_error("opencl: kernel ", k.name, " needs float64, but device ", device_name,
                " lacks the cl_khr_fp64 extension (valid: float32/float16/bfloat16 on this "
                "device, or a device whose `kiln devices` line says fp64 yes)");
  if (!caps.int64 && (uses(k, [](Dtype d) { return d == int64 || d == uint64; }) || k.reduce))
    throw_error("opencl: kernel ", k.name, " needs 64-bit integers, but device ", device_name,
                " lacks them (OpenCL embedded profile without cles_khr_int64)");
  source::record_for_corpus(k);
  return Layout(k, caps).run();
}

}  // namespace kiln::opencl
