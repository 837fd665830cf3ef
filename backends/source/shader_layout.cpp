#include "backends/source/shader_layout.h"

#include <sstream>

#include "backends/source/emitter.h"

namespace kiln::source {

namespace {

class Layout {
 public:
  Layout(const Kernel& k, ShaderDialect& d, const ShaderOptions& o)
      : k_(k), o_(o), d_(d), w_(d.words()), em_(k, d) {}

  ShaderBody run() {
    d_.prepare();
    if (k_.reduce)
      emit_reduction(em_.out());
    else
      emit_elementwise(em_.out());
    return {em_.out().str(), uses_subgroups, uses_subgroup_ids};
  }

 private:
  // The index type, and a value converted to it.
  const std::string& I() const { return w_.index; }
  std::string ix(const std::string& x) const { return w_.index + "(" + x + ")"; }
  std::string ix(int x) const { return ix(std::to_string(x)); }
  // This invocation's first point of a grid-stride loop.
  std::string first_invocation() const {
    return w_.group_id + " * " + ix(o_.local_size) + " + " + ix(w_.local_id);
  }

  // Sets the coordinates of axes [from, to) from the linear index `lin` (row-major).
  void decompose(std::ostream& os, int from, int to, const std::string& lin) {
    os << ("  { " + w_.index + " rem = ") << lin << ";\n";
    for (int a = to - 1; a > from; --a) {
      std::string e = d_.dim(k_.domain[a]);
      os << "    i" << a << " = rem % " << e << "; rem /= " << e << ";\n";
    }
    if (to > from) os << "    i" << from << " = rem;\n";  // below its extent: no division
    os << "  }\n";
  }

  std::string product(int from, int to) {
    std::string s = (w_.index + "(1)");
    for (int a = from; a < to; ++a) s += " * " + d_.dim(k_.domain[a]);
    return s;
  }

  void declare_coords(std::ostream& os) {
    os << ("  " + w_.index);
    for (int a = 0; a < k_.ndim(); ++a)
      os << (a ? ", " : " ") << "i" << a << (" = " + w_.index + "(0)");
    if (k_.ndim() == 0) os << (" i_none = " + w_.index + "(0)");
    os << ";\n";
  }

  void emit_elementwise(std::ostream& os) {
    if (d_.vector_step() > 0) return emit_elementwise_vector(os);
    // A grid-stride loop: the host may launch fewer groups than points (on a CPU device each
    // workgroup costs a task switch, so it launches a few per core).
    os << w_.main << "\n  " << I() << " npoints = " << product(0, k_.ndim()) << ";\n"
       << "  " << I() << " stride = " << ix(w_.num_groups) << " * " << ix(o_.local_size) << ";\n";
    declare_coords(os);
    em_.constants("  ");
    os << "  for (" << I() << " gid = " << first_invocation()
       << "; gid < npoints; gid += stride) {\n";
    decompose(os, 0, k_.ndim(), "gid");
    em_.values(0, static_cast<int>(k_.body.size()), "  ");
    em_.stores("  ");
    os << "  }\n}\n";
  }

  // The loop of whole vector steps (grid-stride, or subgroup runs): each invocation does
  // vector_step() points per step, one lane after another (the dialect reads and writes them as
  // vectors); then the first
  // invocation does the last npoints % step points one by one. The tail sits after the loop, not
  // in it as the other side of a branch: on lavapipe a loop body holding a branch and a nested
  // loop cost ~12% more CPU time for gelu (its SIMD lanes carry masks through both).
  void emit_elementwise_vector(std::ostream& os) {
    int step = d_.vector_step();
    os << w_.main << "\n  " << I() << " npoints = " << d_.dim(k_.domain[0]) << ";\n"
       << "  " << I() << " nsteps = npoints / " << ix(step) << ";\n";
    declare_coords(os);
    em_.constants("  ");
    if (o_.subgroup_runs) {
      // Steps per workgroup (a multiple of its size), one run of them per subgroup.
      uses_subgroup_ids = true;
      std::string L = ix(o_.local_size);
      os << "  " << I() << " per = ((nsteps + " << ix(w_.num_groups) << " - " << ix(1) << ") / "
         << ix(w_.num_groups) << " + " << ix(o_.local_size - 1) << ") / " << L << " * " << L
         << ";\n"
         << "  " << I() << " run = per / " << ix(w_.num_subgroups) << ";\n"
         << "  " << I() << " first = " << w_.group_id << " * per + " << ix(w_.subgroup_id)
         << " * run;\n"
         << "  " << I() << " last = min(first + run, nsteps);\n"
         << "  for (" << I() << " q = first + " << ix(w_.subgroup_invocation)
         << "; q < last; q += " << ix(w_.subgroup_size) << ") {\n";
    } else {
      os << "  for (" << I() << " q = " << first_invocation()
         << "; q < nsteps; q += " << ix(w_.num_groups) << " * " << ix(o_.local_size) << ") {\n";
    }
    os << "  " << I() << " base = q * " << ix(step) << ";\n";
    os << d_.vector_begin();
    for (int lane = 0; lane < step; ++lane) {
      d_.set_lane(lane);
      os << "  {\n  i0 = base + " << ix(lane) << ";\n";
      em_.values(0, static_cast<int>(k_.body.size()), "  ");
      em_.stores("  ");
      os << "  }\n";
    }
    d_.set_lane(-1);
    os << d_.vector_end();
    os << "  }\n"
       << "  if (" << first_invocation() << " == " << ix(0) << ") {\n"
       << "  for (i0 = nsteps * " << ix(step) << "; i0 < npoints; ++i0) {\n";
    em_.values(0, static_cast<int>(k_.body.size()), "  ");
    em_.stores("  ");
    os << "  }\n  }\n}\n";
  }

  // acc = acc (op) xv for sums and products (bool: or/and; 8-bit integers wrapped).
  void combine_into(std::ostream& o, ReduceOp op, Dtype acc_d, const std::string& acc,
                    const std::string& xv) {
    if (op == ReduceOp::Sum) {
      if (acc_d.is_bool())
        o << acc << " = " << acc << " || " << xv << ";\n";
      else
        o << acc << " = " << d_.wrap(acc_d, acc + " + " + xv) << ";\n";
    } else {
      if (acc_d.is_bool())
        o << acc << " = " << acc << " && " << xv << ";\n";
      else
        o << acc << " = " << d_.wrap(acc_d, acc + " * " + xv) << ";\n";
    }
  }

  // Combines acc/has/best across the subgroup (see emit_reduction).
  void subgroup_stage(std::ostream& os, ReduceOp op, Dtype acc_d) {
    if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
      bool sum = op == ReduceOp::Sum;
      if (acc_d.is_bool())
        os << "  acc = " << (sum ? w_.subgroup_or : w_.subgroup_and) << "(uint(acc)) != 0u;\n";
      else
        os << "  acc = "
           << d_.wrap(acc_d, std::string(sum ? w_.subgroup_add : w_.subgroup_mul) + "(acc)")
           << ";\n";
      return;  // `has` only matters to max/min/argmax
    }
    std::string shuffled = acc_d.is_bool() ? ("(" + w_.shuffle_xor + "(uint(acc), o) != 0u)")
                                           : (w_.shuffle_xor + "(acc, o)");
    os << ("  for (uint o = 1u; o < " + w_.subgroup_size + "; o <<= 1) {\n") << "    "
       << d_.value_type(acc_d) << " ov = " << shuffled << ";\n"
       << ("    bool oh = " + w_.shuffle_xor + "(uint(has), o) != 0u;\n")
       << ("    " + w_.index + " op = " + w_.shuffle_xor + "(best, o);\n")
       << "    if (oh && (!has || k_better(ov, op, acc, best))) { acc = ov; best = op; has = true; "
          "}\n"
       << "  }\n";
  }

  void emit_reduction(std::ostream& os) {
    const Reduction& red = *k_.reduce;
    const Value& rv = k_.body[red.value];
    Dtype in = k_.body[rv.a].dtype;
    ReduceOp op = red.op;
    bool minmax = op == ReduceOp::Max || op == ReduceOp::Min || op == ReduceOp::Argmax;
    // Sums and products accumulate in the result's compute type (float ones in double where the
    // device has it, as the reference does: a float32 product of 1000 values overflows where
    // the double one does not); max/min/argmax in the input's type.
    Dtype acc_d = minmax ? in : rv.dtype;
    if (!minmax && acc_d.is_float() && o_.float64) acc_d = float64;
    std::string A = d_.value_type(acc_d);
    int kept = k_.kept_axes(), n = k_.ndim();
    os << w_.shared << A << " s_v[" << o_.local_size << "];\n"
       << (w_.shared + "bool s_h[") << o_.local_size << "];\n"
       << (w_.shared + w_.index + " s_p[") << o_.local_size << "];\n";
    // better(x, px, acc, pacc): x replaces the accumulator (the reference's rule: the first
    // maximum wins, NaN counts as the maximum).
    std::string cmp = op == ReduceOp::Min ? "<" : ">";
    os << "bool k_better(" << A << (" x, " + w_.index + " px, ") << A
       << (" a, " + w_.index + " pa) {\n");
    if (acc_d.is_float())
      os << "  if (isnan(a)) return isnan(x) && px < pa;\n"
         << "  if (isnan(x)) return true;\n";
    if (acc_d.is_bool())
      os << "  int xi = int(x), ai = int(a);\n  return xi " << cmp
         << " ai || (xi == ai && px < pa);\n";
    else
      os << "  return x " << cmp << " a || (x == a && px < pa);\n";
    os << "}\n";
    // Each workgroup reduces kept points gid, gid + groups, ... (a uniform loop: every
    // invocation of the group reaches the same barriers).
    os << (w_.main + "\n") << ("  uint lid = " + w_.local_id + ";\n")
       << ("  " + w_.index + " nkept = ") << product(0, kept) << ";\n"
       << "  " << I() << " groups = " << ix(w_.num_groups) << ";\n";
    declare_coords(os);
    em_.constants("  ");
    os << ("  for (" + w_.index + " gid = " + w_.group_id + "; gid < nkept; gid += groups) {\n");
    decompose(os, 0, kept, "gid");
    std::string init = op == ReduceOp::Prod ? A + "(1)" : A + "(0)";
    if (acc_d.is_bool()) init = op == ReduceOp::Prod ? "true" : "false";
    os << "  " << A << " acc = " << init
       << (";\n  bool has = false;\n  " + w_.index + " best = " + w_.index + "(0);\n")
       << ("  " + w_.index + " nred = ") << product(kept, n) << ";\n"
       << "  for (" << I() << " r = " << ix("lid") << "; r < nred; r += " << ix(o_.local_size)
       << ") {\n";
    decompose(os, kept, n, "r");
    em_.values(0, red.value, "  ");
    std::string x = Emitter::v(rv.a);
    if (!minmax) x = std::string(A) + "(" + x + ")";
    os << "  " << A << " x = " << x << ";\n";
    auto combine = [&](std::ostream& o, const std::string& acc, const std::string& xv) {
      combine_into(o, op, acc_d, acc, xv);
    };
    if (minmax) {
      os << "  if (!has || k_better(x, r, acc, best)) { acc = x; best = r; }\n  has = true;\n";
    } else {
      os << "  ";
      combine(os, "acc", "x");
    }
    os << "  }\n";
    // Subgroup operations where the device has them (not for 64-bit integers, whose subgroup
    // forms need shaderSubgroupExtendedTypes): sums and products through subgroupAdd/Mul (bool
    // ones through Or/And), max/min/argmax through a butterfly of subgroupShuffleXor choosing
    // with k_better (a total order, so every lane ends with the same, unique best); then one
    // partial per subgroup in shared memory, combined in order by invocation 0. Otherwise a
    // shared-memory tree over all 64 invocations.
    if (o_.subgroups && acc_d != int64 && acc_d != uint64) {
      uses_subgroups = true;
      subgroup_stage(os, op, acc_d);
      os << ("  if (" + w_.subgroup_invocation + " == 0u) {\n")
         << ("    s_v[" + w_.subgroup_id + "] = acc; s_h[" + w_.subgroup_id + "] = has; s_p[" +
             w_.subgroup_id + "] = best;\n")
         << ("  }\n  " + w_.barrier + ";\n  if (lid == 0u) {\n")
         << ("  for (uint s = 1u; s < " + w_.num_subgroups + "; ++s) {\n");
      if (minmax) {
        os << "    if (s_h[s] && (!s_h[0] || k_better(s_v[s], s_p[s], s_v[0], s_p[0]))) {\n"
           << "      s_v[0] = s_v[s]; s_p[0] = s_p[s]; s_h[0] = true;\n    }\n";
      } else {
        os << "    ";
        combine(os, "s_v[0]", "s_v[s]");
      }
      os << "  }\n";
    } else {
      os << ("  s_v[lid] = acc; s_h[lid] = has; s_p[lid] = best;\n  " + w_.barrier + ";\n")
         << "  for (uint s = " << o_.local_size / 2 << "u; s > 0u; s >>= 1) {\n"
         << "    if (lid < s) {\n";
      if (minmax) {
        os << "      if (s_h[lid + s] && (!s_h[lid] || k_better(s_v[lid + s], s_p[lid + s], "
              "s_v[lid], s_p[lid]))) {\n"
           << "        s_v[lid] = s_v[lid + s]; s_p[lid] = s_p[lid + s]; s_h[lid] = true;\n"
           << "      }\n";
      } else {
        os << "      ";
        combine(os, "s_v[lid]", "s_v[lid + s]");
      }
      os << ("    }\n    " + w_.barrier + ";\n  }\n") << "  if (lid == 0u) {\n";
    }
    for (int a = kept; a < n; ++a) os << "  i" << a << (" = " + w_.index + "(0);\n");
    std::string result;
    if (op == ReduceOp::Argmax)
      result = std::string(d_.value_type(rv.dtype)) + "(s_p[0])";
    else if (minmax)
      result = "(s_h[0] ? s_v[0] : " + init + ")";
    else
      result = "s_v[0]";
    os << "  " << d_.value_type(rv.dtype) << " " << Emitter::v(red.value) << " = "
       << d_.value_type(rv.dtype) << "(" << result << ");\n";
    em_.values(red.value + 1, static_cast<int>(k_.body.size()), "  ");
    em_.stores("  ");
    // The next point's partials reuse the shared arrays once every invocation is past here.
    os << ("  }\n  " + w_.barrier + ";\n  }\n}\n");
  }

  const Kernel& k_;
  ShaderOptions o_;
  ShaderDialect& d_;
  const ShaderWords& w_;
  Emitter em_;
  bool uses_subgroups = false;
  bool uses_subgroup_ids = false;
};

}  // namespace

ShaderBody shader_body(const Kernel& k, ShaderDialect& d, const ShaderOptions& o) {
  return Layout(k, d, o).run();
}

}  // namespace kiln::source
