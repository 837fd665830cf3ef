#include "compile/shapes.h"

#include <algorithm>
#include <unordered_map>

#include "compile/graph_walk.h"
#include "graph/array_node.h"
#include "graph/ops.h"

namespace kiln {

namespace {

[[noreturn]] void baked(const ArrayNode& n, const std::string& what) {
  throw_error("compile(shapeless=true): ", primitive_name(n.op, n.params), " ", what,
              " (its shape was fixed when the function was traced with output shape ", n.shape,
              "; make it relative to the input, e.g. flatten or reshape with -1, or compile "
              "without shapeless)");
}

Shape infer(const ArrayNode& n, const std::vector<Array>& in) {
  const Params& p = n.params;
  auto shape = [&](int i) -> const Shape& { return in[i].shape(); };
  switch (n.op) {
    case Op::Unary:
    case Op::Cast: return shape(0);
    case Op::Binary: return broadcast_shapes(shape(0), shape(1), op_name(p.binary));
    case Op::Select:
      return broadcast_shapes(broadcast_shapes(shape(0), shape(1), "where"), shape(2), "where");
    case Op::Reduce: {
      Shape out;
      for (int j = 0; j < static_cast<int>(shape(0).size()); ++j) {
        bool r = std::find(p.axes.begin(), p.axes.end(), j) != p.axes.end();
        if (r && shape(0)[j] == 0 && p.reduce != ReduceOp::Sum && p.reduce != ReduceOp::Prod)
          baked(n, "cannot reduce an axis of extent 0");
        if (!r)
          out.push_back(shape(0)[j]);
        else if (p.keepdims)
          out.push_back(1);
      }
      return out;
    }
    case Op::Reshape: {
      const Shape& s = shape(0);
      switch (p.reshape) {
        case ReshapeKind::Explicit: try { return resolve_reshape(s, p.shape);
          } catch (const Error&) {
            baked(n, "to " + to_string(p.shape) + " cannot take an input of shape " + to_string(s));
          }
        case ReshapeKind::Flatten: {
          Shape out(s.begin(), s.begin() + p.axes[0]);
          int64_t m = 1;
          for (int i = p.axes[0]; i <= p.axes[1]; ++i) m *= s[i];
          out.push_back(m);
          out.insert(out.end(), s.begin() + p.axes[1] + 1, s.end());
          return out;
        }
        case ReshapeKind::Squeeze: {
          Shape out;
          for (int i = 0; i < static_cast<int>(s.size()); ++i) {
            bool drop = std::find(p.axes.begin(), p.axes.end(), i) != p.axes.end();
            if (drop && s[i] != 1)
              baked(n, "of axis " + std::to_string(i) + " needs extent 1, the input has shape " +
                           to_string(s));
            if (!drop) out.push_back(s[i]);
          }
          return out;
        }
        case ReshapeKind::ExpandDims: {
          Shape out;
          size_t k = 0;
          for (size_t i = 0; i < s.size() + p.axes.size(); ++i)
            out.push_back(std::find(p.axes.begin(), p.axes.end(), static_cast<int>(i)) !=
                                  p.axes.end()
                              ? 1
                              : s[k++]);
          return out;
        }
      }
      break;
    }
    case Op::Transpose: {
      Shape out;
      for (int a : p.axes) out.push_back(shape(0)[a]);
      return out;
    }
    case Op::Broadcast: {
      Shape b = broadcast_shapes(shape(0), p.shape, "broadcast_to");
      if (b != p.shape)
        baked(n, "to " + to_string(p.shape) + " got an input of shape " + to_string(shape(0)));
      return b;
    }
    case Op::Slice: {
      Shape out;
      for (size_t i = 0; i < shape(0).size(); ++i) {
        int64_t d = shape(0)[i], st = p.step[i];
        int64_t a = st > 0 ? std::clamp<int64_t>(p.start[i], 0, d)
                           : std::clamp<int64_t>(p.start[i], -1, d - 1);
        int64_t b = st > 0 ? std::clamp<int64_t>(p.stop[i], 0, d)
                           : std::clamp<int64_t>(p.stop[i], -1, d - 1);
        if (a != p.start[i] || b != p.stop[i])
          baked(n, "bounds were resolved for the traced shape and do not fit an input of shape " +
                       to_string(shape(0)));
        int64_t len = st > 0 ? (b - a + st - 1) / st : (a - b - st - 1) / (-st);
        out.push_back(std::max<int64_t>(0, len));
      }
      return out;
    }
    case Op::Concatenate: {
      int axis = p.axes[0];
      Shape out = shape(0);
      out[axis] = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        for (size_t j = 0; j < out.size(); ++j)
          if (static_cast<int>(j) != axis && shape(i)[j] != out[j])
            throw_error("concatenate: shapes ", shape(0), " and ", shape(i), " differ on axis ", j);
        out[axis] += shape(i)[axis];
      }
      return out;
    }
    case Op::Matmul: {
      const Shape &a = shape(0), &b = shape(1);
      if (a.back() != b[b.size() - 2])
        throw_error("matmul: shapes ", a, " and ", b, " are not aligned");
      Shape out =
          broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), "matmul");
      out.push_back(a[a.size() - 2]);
      out.push_back(b.back());
      return out;
    }
    case Op::Count: return {};
    case Op::Full:
    case Op::Arange:
    case Op::Random:
    case Op::Constant:
    case Op::Placeholder: return n.shape;
  }
  return n.shape;
}

}  // namespace

std::vector<Array> replay_shapes(const std::vector<Array>& outputs,
                                 const std::vector<Array>& inputs, const std::vector<Shape>& shapes,
                                 std::vector<Array>& new_inputs) {
  std::unordered_map<const ArrayNode*, Array> map;
  new_inputs.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Array& a = inputs[i];
    Array ph = make_array(shapes[i], a.dtype(), Op::Placeholder, {}, {}, a.node()->stream);
    map.emplace(a.node().get(), ph);
    new_inputs.push_back(ph);
  }
  auto leaf = [&](const ArrayNode& n) { return n.data || map.count(&n); };
  for (const Array& a : topological_order(outputs, leaf)) {
    const ArrayNode& n = *a.node();
    if (map.count(&n)) continue;
    if (n.data) {
      map.emplace(&n, a);
      continue;
    }
    std::vector<Array> in;
    for (const Array& x : n.inputs) in.push_back(map.at(x.node().get()));
    map.emplace(&n, make_array(infer(n, in), n.dtype, n.op, n.params, in, n.stream));
  }
  std::vector<Array> out;
  for (const Array& o : outputs) out.push_back(map.at(o.node().get()));
  return out;
}

}  // namespace kiln
