#include "backends/source/workgroup_layout.h"

#include <sstream>

#include "backends/source/emitter.h"

namespace kiln::source {

namespace {

class Layout {
 public:
  Layout(const Kernel& k, WorkgroupDialect& d, const LayoutOptions& o)
      : k_(k), o_(o), d_(d), w_(d.words()), em_(k, d) {}

  Program run() {
    Program g;
    g.num_params = k_.num_params();
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i) {
      const Value& v = k_.body[i];
      if (v.kind == ValueKind::Constant && v.param >= 0 && v.dtype.is_float() && v.dtype != float64)
        g.scalar_values.push_back(i);
    }
    scalar_values_ = g.scalar_values;
    out() << d_.preamble();
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
      g.map_points = map_points_;
    }
    g.source = out().str();
    return g;
  }

 private:
  std::ostringstream& out() { return em_.out(); }

  // ---- signatures and shared pieces ---------------------------------------------------------
  void signature(const char* entry, bool locals, const std::string& extra) {
    out() << w_.entry << entry << "(";
    for (size_t b = 0; b < k_.buffers.size(); ++b)
      out() << (b ? ", " : "") << w_.global << (k_.buffers[b].output ? "" : "const ")
            << d_.storage_type(k_.buffers[b].dtype) << "* b" << b;
    bool first = k_.buffers.empty();
    auto sep = [&] {
      if (!first) out() << ", ";
      first = false;
    };
    for (int p = 0; p < k_.num_params(); ++p) sep(), out() << (w_.index + " p") << p;
    for (int i : scalar_values_) sep(), out() << "float c" << i;
    if (locals) {
      sep();
      out() << w_.local << acc_type()
            << ("* la, " + w_.local + w_.index + "* lp, " + w_.local + "int* lh");
    }
    if (!extra.empty()) sep(), out() << extra;
    out() << ") {\n";
    for (int a = 0; a < k_.ndim(); ++a)
      out() << ("  const " + w_.index + " e") << a << " = " << d_.dim(k_.domain[a]) << ";\n";
    em_.constants("  ");
  }

  // Declares i{from}..i{to-1} from the linear index `lin` (row-major over those axes).
  void coords(int from, int to, const std::string& lin, const std::string& ind) {
    if (from >= to) return;
    out() << ind << (w_.index + " r_ = ") << lin << ";\n";
    for (int a = to - 1; a > from; --a)
      out() << ind << ("const " + w_.index + " i") << a << " = r_ % e" << a << "; r_ /= e" << a
            << ";\n";
    out() << ind << ("const " + w_.index + " i") << from << " = r_;\n";
  }

  std::string product(int from, int to) const {
    std::string s = "1L";
    for (int a = from; a < to; ++a) s += " * e" + std::to_string(a);
    return s;
  }

  // ---- element-wise -------------------------------------------------------------------------
  void emit_map() {
    signature("kiln_map", false, "");
    out() << ("  const " + w_.index + " total = ") << product(0, k_.ndim()) << ";\n";
    if (o_.cpu) {
      emit_map_run();
      return;
    }
    if (int n = d_.map_lanes(); n > 0) {
      emit_map_lanes(n);
      return;
    }
    // One element per work-item (the launch covers the domain): neighbouring items touch
    // neighbouring elements, as GPUs want.
    out() << ("  const " + w_.index + " g = " + w_.global_id + ";\n");
    out() << "  if (g < total) {\n";
    coords(0, k_.ndim(), "g", "    ");
    em_.values(0, static_cast<int>(k_.body.size()), "    ");
    em_.stores("    ");
    out() << "  }\n}\n";
  }

  // n consecutive points per work-item through vector accesses (the launch covers the domain
  // in steps of n); the item holding the last, partial step takes its points one by one.
  void emit_map_lanes(int n) {
    map_points_ = n;
    const std::string I = w_.index;
    out() << ("  const " + I + " g = (" + I + ")" + w_.global_id + " * ") << n << ";\n";
    out() << "  if (g + " << n << " <= total) {\n";
    out() << ("    const " + I + " i0 = g;\n");
    d_.vector_map(em_, "    ");
    out() << ("  } else {\n    for (" + I + " t = g; t < total; ++t) {\n");
    out() << ("      const " + I + " i0 = t;\n");
    em_.values(0, static_cast<int>(k_.body.size()), "      ");
    em_.stores("      ");
    out() << "    }\n  }\n}\n";
  }

  // A CPU device runs a work-group's items one after another on one thread: each item takes
  // one contiguous run of the domain, a loop the driver's compiler vectorises with contiguous
  // vector loads and stores (one element per item made PoCL's gelu ~4x slower: its work-item
  // loop vectorised, but with the per-item bounds check and index arithmetic in the way). The
  // host launches a few one-item groups per compute unit. The run goes in segments along the last
  // axis: the outer coordinates are computed once per segment and the last one counts up, where a
  // division and remainder per element per axis made a broadcast (x - max(x) of a row softmax)
  // 15x slower than gelu on PoCL.
  void emit_map_run() {
    const int last = k_.ndim() - 1;
    const std::string I = w_.index, il = "i" + std::to_string(last),
                      el = "e" + std::to_string(last);
    out() << ("  const " + I + " items = " + w_.global_size + ";\n");
    out() << ("  const " + I + " per = (total + items - 1) / items;\n");
    out() << ("  const " + I + " from = " + w_.global_id + " * per;\n");
    out() << ("  const " + I + " to = " + w_.min + "(from + per, total);\n");
    out() << ("  " + I + " g = from;\n");
    if (last < 0) {  // a 0-d domain: one point, no coordinates
      out() << "  for (; g < to; ++g) {\n";
      em_.values(0, static_cast<int>(k_.body.size()), "    ");
      em_.stores("    ");
      out() << "  }\n}\n";
      return;
    }
    out() << "  while (g < to) {\n";
    coords(0, last, "g / " + el, "    ");
    out() << ("    " + I + " " + il + " = g % " + el + ";\n");
    out() << ("    const " + I + " stop = " + w_.min + "(to, g + (" + el + " - " + il + "));\n");
    d_.vector_run(em_, "    ");
    out() << ("    for (; g < stop; ++g, ++" + il + ") {\n");
    em_.values(0, static_cast<int>(k_.body.size()), "      ");
    em_.stores("      ");
    out() << "    }\n  }\n}\n";
  }

  // ---- reductions ---------------------------------------------------------------------------
  Dtype in_dtype() const { return k_.body[k_.body[reduce_at_].a].dtype; }
  bool float_sum() const {
    ReduceOp op = k_.reduce->op;
    return in_dtype().is_float() && (op == ReduceOp::Sum || op == ReduceOp::Prod);
  }
  // Float sums and products accumulate in double where the device has it (the reference does);
  // 16-bit floats compute in float32.
  Dtype acc_dtype() const {
    if (float_sum()) return in_dtype() == float64 || o_.float64 ? float64 : float32;
    return in_dtype().is_half() ? float32 : in_dtype();
  }
  std::string acc_type() const { return d_.value_type(acc_dtype()); }
  size_t acc_size() const { return acc_dtype().size(); }
  std::string acc_init() const {
    return k_.reduce->op == ReduceOp::Prod ? "(" + acc_type() + ")1" : "(" + acc_type() + ")0";
  }

  // kiln_comb(a, b): folds state b into state a (sum, product, or the better of the two).
  void emit_combine() {
    std::string A = acc_type();
    out() << (w_.helper + "void kiln_comb(") << A << ("* a, " + w_.index + "* pa, int* ha, ") << A
          << (" b, " + w_.index + " pb, int hb) {\n");
    ReduceOp op = k_.reduce->op;
    bool fl = in_dtype().is_float();
    if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
      const char* o = op == ReduceOp::Sum ? "+" : "*";
      if (fl) {
        out() << "  *a = *a " << o << " b;\n";
      } else {
        std::string U = d_.unsigned_type(in_dtype());
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
    out() << ind << acc_type() << " acc = " << acc_init()
          << ("; " + w_.index + " pos = 0; int has = 0;\n");
  }

  // Folds this work-item's share of positions [lo, hi): interleaved on GPUs, one contiguous run
  // each on CPU devices (DeviceCaps::cpu).
  void items(const std::string& lo, const std::string& hi, const std::string& ind) {
    if (!o_.cpu) {
      out() << ind << ("for (" + w_.index + " q = ") << lo << (" + " + w_.local_id + "; q < ") << hi
            << ("; q += " + w_.local_size + ") {\n");
      fold_element(ind + "  ");
      out() << ind << "}\n";
      return;
    }
    out() << ind << ("const " + w_.index + " run = (") << hi << " - " << lo
          << (" + " + w_.local_size + " - 1) / " + w_.local_size + ";\n");
    out() << ind << ("const " + w_.index + " qa = ") << lo << (" + " + w_.local_id + " * run;\n");
    out() << ind << ("const " + w_.index + " qb = " + w_.min + "(qa + run, (" + w_.index + ")(")
          << hi << "));\n";
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
    out() << ind << ("const int lid = (int)" + w_.local_id + ";\n");
    out() << ind << "la[lid] = acc; lp[lid] = pos; lh[lid] = has;\n";
    out() << ind << (w_.barrier + ";\n");
    out() << ind << ("for (int s = (int)" + w_.local_size + " / 2; s > 0; s >>= 1) {\n");
    out() << ind << "  if (lid < s) {\n";
    out() << ind << "    " << acc_type()
          << (" ta = la[lid]; " + w_.index + " tp = lp[lid]; int th = lh[lid];\n");
    out() << ind << "    kiln_comb(&ta, &tp, &th, la[lid + s], lp[lid + s], lh[lid + s]);\n";
    out() << ind << "    la[lid] = ta; lp[lid] = tp; lh[lid] = th;\n";
    out() << ind << "  }\n";
    out() << ind << ("  " + w_.barrier + ";\n");
    out() << ind << "}\n";
  }

  // The reduced value (from local memory after a tree, or from this item's own state), the
  // epilogue at reduced coordinates 0, the stores.
  void finish_body(const std::string& in, bool from_locals) {
    for (int a = k_.kept_axes(); a < k_.ndim(); ++a)
      out() << in << ("const " + w_.index + " i") << a << " = 0;\n";
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
    out() << ind << (w_.index + " q0 = ") << lo << ";\n";
    if (o_.cpu) d_.vector_fold(em_, acc_dtype(), "q0", hi, ind);
    if (o_.cpu && k_.reduce->op != ReduceOp::Argmax) {
      out() << ind << acc_type() << (" pa[8]; " + w_.index + " pp[8]; int ph[8];\n");
      out() << ind << "for (int u = 0; u < 8; ++u) { pa[u] = " << acc_init()
            << "; pp[u] = 0; ph[u] = 0; }\n";
      out() << ind << "for (; q0 + 8 <= " << hi << "; q0 += 8) {\n";
      out() << ind << "  for (int u = 0; u < 8; ++u) {\n";
      out() << ind << ("    const " + w_.index + " q = q0 + u;\n");
      fold_element(ind + "    ", "pa[u]", "pp[u]", "ph[u]");
      out() << ind << "  }\n" << ind << "}\n";
      out() << ind
            << "for (int u = 0; u < 8; ++u) kiln_comb(&acc, &pos, &has, pa[u], pp[u], ph[u]);\n";
    }
    out() << ind << ("for (" + w_.index + " q = q0; q < ") << hi << "; ++q) {\n";
    fold_element(ind + "  ");
    out() << ind << "}\n";
  }

  // One work-item per output element, no local memory or barriers: for many outputs (rows of a
  // softmax), where a work-group per output would spend its time in barriers.
  void emit_rows() {
    signature("kiln_rows", false, "");
    int kept = k_.kept_axes();
    out() << ("  const " + w_.index + " nout = ") << product(0, kept) << ";\n";
    out() << ("  const " + w_.index + " nred = ") << product(kept, k_.ndim()) << ";\n";
    out() << ("  const " + w_.index + " o = " + w_.global_id + ";\n");
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
    out() << ("  const " + w_.index + " nout = ") << product(0, kept) << ";\n";
    out() << ("  const " + w_.index + " nred = ") << product(kept, k_.ndim()) << ";\n";
    out() << ("  for (" + w_.index + " o = " + w_.group_id + "; o < nout; o += " + w_.num_groups +
              ") {\n");
    coords(0, kept, "o", "    ");
    state_init("    ");
    items("0", "nred", "    ");
    tree("    ");
    finish("    ");
    out() << ("    " + w_.barrier + ";\n  }\n}\n");
  }

  std::string scratch_args(bool read_only) const {
    std::string c = read_only ? "const " : "";
    return std::string(w_.global) + c + acc_type() + ("* sa, " + w_.global) + c +
           (w_.index + "* sp, " + w_.global) + c + "int* sh";
  }

  void emit_part() {
    signature("kiln_part", true, scratch_args(false));
    out() << ("  const " + w_.index + " nred = ") << product(0, k_.ndim()) << ";\n";
    out() << ("  const " + w_.index + " ng = " + w_.num_groups + ", g = " + w_.group_id + ";\n");
    out() << ("  const " + w_.index + " chunk = (nred + ng - 1) / ng;\n");
    out() << ("  const " + w_.index + " lo = g * chunk, hi = " + w_.min + "(lo + chunk, nred);\n");
    state_init("  ");
    items("lo", "hi", "  ");
    tree("  ");
    out() << "  if (lid == 0) { sa[g] = la[0]; sp[g] = lp[0]; sh[g] = lh[0]; }\n}\n";
  }

  void emit_final() {
    signature("kiln_final", true, scratch_args(true) + (", " + w_.index + " nparts"));
    state_init("  ");
    out() << ("  for (" + w_.index + " q = " + w_.local_id + "; q < nparts; q += " + w_.local_size +
              ")\n");
    out() << "    kiln_comb(&acc, &pos, &has, sa[q], sp[q], sh[q]);\n";
    tree("  ");
    finish("  ");
    out() << "}\n";
  }

  const Kernel& k_;
  LayoutOptions o_;
  WorkgroupDialect& d_;
  const Builtins& w_;
  Emitter em_;
  std::vector<int> scalar_values_;
  int map_points_ = 1;
  int reduce_at_ = 0;
};

}  // namespace

Program workgroup_program(const Kernel& k, WorkgroupDialect& d, const LayoutOptions& o) {
  return Layout(k, d, o).run();
}

}  // namespace kiln::source
