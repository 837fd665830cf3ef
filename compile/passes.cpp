#include "compile/passes.h"

#include <numeric>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "compile/eval.h"
#include "compile/graph_walk.h"
#include "graph/array_node.h"

namespace kiln {

namespace {

// Folding materialises values; past this size a constant is better computed by the kernel.
constexpr int64_t kFoldLimit = 4096;

bool is_constant(const ArrayNode& n) { return n.op != Op::Placeholder && n.data != nullptr; }

// Whether every element of `n` equals `v` (checked for constants and fills; false if unknown).
bool all_equal(const Array& a, double v) {
  const ArrayNode& n = *a.node();
  if (n.op == Op::Full) return n.params.value.as_double() == v;
  if (!is_constant(n) || a.size() > 16 || a.size() == 0) return false;
  for (double x : a.to_vector<double>())
    if (x != v) return false;
  return true;
}

// A cast that a round trip through `wide` undoes exactly. Not from float16/bfloat16: inside a
// fused kernel their values are float32 values, which the cast back rounds (scalar_ops.h).
bool widens_exactly(Dtype from, Dtype wide) { return !from.is_half() && holds_exactly(wide, from); }

std::string cse_key(const ArrayNode& n) {
  std::ostringstream os;
  os << static_cast<int>(n.op) << '|' << n.dtype << '|' << to_string(n.shape) << '|'
     << static_cast<int>(n.stream.origin) << n.stream.stream << '|';
  for (const Array& in : n.inputs) os << in.id() << ',';
  const Params& p = n.params;
  os << '|' << int(p.unary) << ',' << int(p.binary) << ',' << int(p.reduce) << ',' << int(p.dist)
     << ',' << p.keepdims << ',' << p.key << ',' << p.value.str() << p.value.dtype << ','
     << p.step_value.str() << '|';
  for (int x : p.axes) os << x << ',';
  for (auto* v : {&p.start, &p.stop, &p.step}) {
    os << '|';
    for (int64_t x : *v) os << x << ',';
  }
  return os.str();
}

// Whether `x` is a transpose of its input's last two axes only.
bool swaps_last_two(const ArrayNode& x) {
  if (x.op != Op::Transpose) return false;
  const std::vector<int>& p = x.params.axes;
  int r = static_cast<int>(p.size());
  for (int i = 0; i < r - 2; ++i)
    if (p[i] != i) return false;
  return r >= 2 && p[r - 2] == r - 1 && p[r - 1] == r - 2;
}

// x with its last two axes swapped: the input of a transpose that swapped them, else a new one.
Array swap_last_two(const Array& x) {
  if (swaps_last_two(*x.node())) return x.node()->inputs[0];
  Params p;
  p.axes.resize(x.ndim());
  std::iota(p.axes.begin(), p.axes.end(), 0);
  std::swap(p.axes[x.ndim() - 1], p.axes[x.ndim() - 2]);
  Shape s = x.shape();
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  return make_array(s, x.dtype(), Op::Transpose, p, {x}, x.node()->stream);
}

// a @ b as (b^T @ a^T)^T when that stores fewer transposed bytes. Matmul takes its operands
// as stored, so a transposed operand is a copy; reverse mode makes many (the cotangent of
// x @ w needs w^T), and copying the small operands and the result is often cheaper than
// copying a large weight.
std::optional<Array> cheaper_transposed(const Array& m) {
  const ArrayNode& n = *m.node();
  const Array &a = n.inputs[0], &b = n.inputs[1];
  bool ta = swaps_last_two(*a.node()), tb = swaps_last_two(*b.node());
  size_t now = (ta ? a.nbytes() : 0) + (tb ? b.nbytes() : 0);
  size_t then = (ta ? 0 : a.nbytes()) + (tb ? 0 : b.nbytes()) + m.nbytes();
  if (then >= now) return std::nullopt;
  Array bt = swap_last_two(b), at = swap_last_two(a);
  Shape s = n.shape;
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  return swap_last_two(make_array(s, n.dtype, Op::Matmul, n.params, {bt, at}, n.stream));
}

class Simplifier {
 public:
  Simplifier(PassStats* stats, bool shapeless)
      : stats_(stats ? stats : &local_), shapeless_(shapeless) {}

  std::vector<Array> run(const std::vector<Array>& outputs, const std::vector<Array>& inputs) {
    std::unordered_set<const ArrayNode*> ins;
    for (const Array& a : inputs) ins.insert(a.node().get());
    auto leaf = [&](const ArrayNode& n) {
      return ins.count(&n) || n.op == Op::Placeholder || n.data || n.error;
    };
    for (const Array& a : topological_order(outputs, leaf)) {
      if (leaf(*a.node())) {
        map_.emplace(a.node().get(), canonical_constant(a));
        continue;
      }
      map_.emplace(a.node().get(), rewrite(a));
    }
    std::vector<Array> out;
    for (const Array& o : outputs) out.push_back(map_.at(o.node().get()));
    return out;
  }

 private:
  // Small constants with equal values become one node, so expressions using them CSE.
  Array canonical_constant(const Array& a) {
    const ArrayNode& n = *a.node();
    if (!is_constant(n) || a.size() > 16) return a;
    std::vector<unsigned char> bytes(a.nbytes());
    read_data(a, bytes.data());
    std::string key = "const|" + n.dtype.name() + to_string(n.shape) + "|" +
                      std::string(bytes.begin(), bytes.end()) + "|" + n.stream.stream.str();
    auto [it, fresh] = seen_.emplace(std::move(key), a);
    if (!fresh && !it->second.same(a)) stats_->cse++;
    return it->second;
  }

  Array rewrite(const Array& a) {
    const ArrayNode& n = *a.node();
    std::vector<Array> in;
    bool changed = false;
    for (const Array& x : n.inputs) {
      in.push_back(map_.at(x.node().get()));
      changed = changed || !in.back().same(x);
    }
    Array cur = changed ? make_array(n.shape, n.dtype, n.op, n.params, in, n.stream) : a;
    if (auto s = algebra(cur)) {
      stats_->simplified++;
      return *s;
    }
    if (auto f = fold(cur)) {
      stats_->folded++;
      return *f;
    }
    std::string key = cse_key(*cur.node());
    auto it = seen_.find(key);
    if (it != seen_.end()) {
      stats_->cse++;
      return it->second;
    }
    seen_.emplace(std::move(key), cur);
    return cur;
  }

  // Returns the simpler equivalent of `a`, if one of the rules applies.
  std::optional<Array> algebra(const Array& a) {
    const ArrayNode& n = *a.node();
    // Under shapeless the identity must hold for every shape: only 0-d constants qualify.
    auto same_type = [&](const Array& x) { return x.shape() == n.shape && x.dtype() == n.dtype; };
    auto all_equal = [&](const Array& c, double v) {
      return (!shapeless_ || c.ndim() == 0) && kiln::all_equal(c, v);
    };
    if (n.op == Op::Binary) {
      const Array &x = n.inputs[0], &y = n.inputs[1];
      switch (n.params.binary) {
        case BinaryOp::Multiply:
          if (all_equal(y, 1) && same_type(x)) return x;
          if (all_equal(x, 1) && same_type(y)) return y;
          break;
        case BinaryOp::Add:
          if (all_equal(y, 0) && same_type(x)) return x;
          if (all_equal(x, 0) && same_type(y)) return y;
          break;
        case BinaryOp::Subtract:
          if (all_equal(y, 0) && same_type(x)) return x;
          break;
        case BinaryOp::Divide:
          if (all_equal(y, 1) && same_type(x)) return x;
          break;
        default: break;
      }
    }
    if (n.op == Op::Unary && n.params.unary == UnaryOp::Negative) {
      const ArrayNode& x = *n.inputs[0].node();
      if (x.op == Op::Unary && x.params.unary == UnaryOp::Negative && same_type(x.inputs[0]))
        return x.inputs[0];
    }
    // transpose(transpose(x, p), q) reads x through the composed permutation: one transpose,
    // or none (reverse mode makes such pairs: the cotangent of x @ w.T through matmul and back).
    if (n.op == Op::Transpose && n.inputs[0].node()->op == Op::Transpose) {
      const ArrayNode& x = *n.inputs[0].node();
      std::vector<int> perm;
      bool identity = true;
      for (size_t i = 0; i < n.params.axes.size(); ++i) {
        perm.push_back(x.params.axes[n.params.axes[i]]);
        identity = identity && perm.back() == static_cast<int>(i);
      }
      if (identity) return x.inputs[0];
      Params p = n.params;
      p.axes = perm;
      return make_array(n.shape, n.dtype, n.op, p, {x.inputs[0]}, n.stream);
    }
    if (n.op == Op::Matmul && !shapeless_)
      if (auto r = cheaper_transposed(a)) return r;
    if (n.op == Op::Cast) {
      const ArrayNode& x = *n.inputs[0].node();
      if (x.op == Op::Cast && x.inputs[0].dtype() == n.dtype && widens_exactly(n.dtype, x.dtype))
        return x.inputs[0];
    }
    if (shapeless_ && (n.op == Op::Broadcast || n.op == Op::Reshape || n.op == Op::Slice))
      return std::nullopt;
    if ((n.op == Op::Broadcast || n.op == Op::Reshape) && same_type(n.inputs[0]))
      return n.inputs[0];
    if (n.op == Op::Slice && same_type(n.inputs[0])) {
      bool whole = true;
      for (size_t i = 0; i < n.shape.size(); ++i)
        whole = whole && n.params.start[i] == 0 && n.params.step[i] == 1;
      if (whole) return n.inputs[0];
    }
    if (n.op == Op::Broadcast || n.op == Op::Reshape) {
      const ArrayNode& x = *n.inputs[0].node();
      if (x.op == n.op)
        return make_array(n.shape, n.dtype, n.op, n.params, {x.inputs[0]}, n.stream);
    }
    return std::nullopt;
  }

  // Evaluates a small node whose inputs are all constants, on the reference interpreter (whose
  // results define Kiln's semantics, so folding never changes an answer).
  std::optional<Array> fold(const Array& a) {
    const ArrayNode& n = *a.node();
    if (n.op == Op::Random || shape_size(n.shape) > kFoldLimit) return std::nullopt;
    for (const Array& x : n.inputs)
      if (!is_constant(*x.node())) return std::nullopt;
    if (n.inputs.empty() && n.op != Op::Full && n.op != Op::Arange) return std::nullopt;
    if (n.op == Op::Full && shape_size(n.shape) > 1) return std::nullopt;  // kernels fill fast
    ResolvedStream ref{Stream{0, Device{"reference", 0}}, StreamOrigin::Explicit};
    Array probe = make_array(n.shape, n.dtype, n.op, n.params, n.inputs, ref);
    try {
      eval(probe);
    } catch (const Error&) {
      return std::nullopt;  // leave it to run (and fail) where the user asked
    }
    return make_array(n.shape, n.dtype, array_buffer(probe), n.stream);
  }

  PassStats local_;
  PassStats* stats_;
  bool shapeless_;
  std::unordered_map<const ArrayNode*, Array> map_;
  std::unordered_map<std::string, Array> seen_;
};

}  // namespace

std::vector<Array> simplify(const std::vector<Array>& outputs, const std::vector<Array>& inputs,
                            PassStats* stats, bool shapeless) {
  return Simplifier(stats, shapeless).run(outputs, inputs);
}

}  // namespace kiln
