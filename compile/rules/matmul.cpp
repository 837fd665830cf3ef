// Compile rules of matmul. The primitive's operands are at least 2-D (ops.cpp promotes 1-D
// operands and squeezes the result), with NumPy batch broadcasting. The simplifier rewrites a @ b
// as (b^T @ a^T)^T where that stores fewer transposed bytes.
#include <numeric>

#include "compile/rules.h"
#include "graph/ops.h"

namespace kiln {

namespace {

Shape matmul_shape(const ArrayNode&, const std::vector<Array>& in) {
  const Shape &a = in[0].shape(), &b = in[1].shape();
  if (a.back() != b[b.size() - 2])
    throw_error("matmul: shapes ", a, " and ", b, " are not aligned");
  Shape out =
      broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), "matmul");
  out.push_back(a[a.size() - 2]);
  out.push_back(b.back());
  return out;
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
// copying a large weight. Not shapeless: which is cheaper depends on the shapes.
std::optional<Array> matmul_simplify(const Array& m, const SimplifyContext& cx) {
  if (cx.shapeless) return std::nullopt;
  const ArrayNode& n = cx.node;
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

}  // namespace

const PrimitiveRules kMatmulRules{
    .shape = matmul_shape, .input_view = rule::no_view, .simplify = matmul_simplify};

}  // namespace kiln
