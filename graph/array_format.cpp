// Array::str() and operator<<: an array as NumPy and MLX print it, "array([[1, 2],\n       [3,
// 4]], dtype=int32)", evaluating it first. Past 1000 elements each axis shows its first and
// last three entries around "...", as NumPy's summarised form does.
#include <cstdio>
#include <ostream>
#include <sstream>

#include "graph/array.h"

namespace kiln {

namespace {

constexpr int64_t kSummaryThreshold = 1000, kEdge = 3;

struct Printer {
  const Shape& shape;
  Dtype dtype;
  bool summarise;
  std::vector<double> f;
  std::vector<int64_t> i;
  std::vector<uint64_t> u;

  std::string element(int64_t k) const {
    if (dtype == bool_) return i[k] ? "true" : "false";
    if (dtype.is_float()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", f[k]);
      return buf;
    }
    return !dtype.is_unsigned() ? std::to_string(i[k]) : std::to_string(u[k]);
  }

  // The entries of `axis` from flat offset `base` (row-major), indented to `indent` columns.
  void nested(std::ostream& o, size_t axis, int64_t base, int indent) const {
    if (axis == shape.size()) {
      o << element(base);
      return;
    }
    int64_t n = shape[axis], stride = 1;
    for (size_t a = axis + 1; a < shape.size(); ++a) stride *= shape[a];
    o << "[";
    bool elide = summarise && n > 2 * kEdge;
    // Between rows a newline per axis below, then the column of the row's "[" (appends, not
    // operator+: GCC 12 reports a false -Wstringop-overflow for the latter).
    std::string sep = ",";
    if (axis + 1 == shape.size()) {
      sep += ' ';
    } else {
      sep.append(shape.size() - axis - 1, '\n');
      sep.append(static_cast<size_t>(indent + 1), ' ');
    }
    for (int64_t k = 0; k < n; ++k) {
      if (elide && k == kEdge) {
        o << "..." << sep;
        k = n - kEdge;
      }
      nested(o, axis + 1, base + k * stride, indent + 1);
      if (k + 1 < n) o << sep;
    }
    o << "]";
  }
};

}  // namespace

std::string Array::str() const {
  if (is_placeholder())
    return "array(shape=" + to_string(shape()) + ", dtype=" + dtype().name() + ", traced)";
  Printer p{shape(), dtype(), size() > kSummaryThreshold, {}, {}, {}};
  if (dtype().is_float())
    p.f = to_vector<double>();
  else if (!dtype().is_unsigned())
    p.i = to_vector<int64_t>();
  else
    p.u = to_vector<uint64_t>();
  std::ostringstream o;
  o << "array(";
  p.nested(o, 0, 0, 6);  // under the "[" after "array("
  o << ", dtype=" << dtype().name() << ")";
  return o.str();
}

std::ostream& operator<<(std::ostream& os, const Array& a) { return os << a.str(); }

}  // namespace kiln
