#include "graph/shape.h"

#include <algorithm>
#include <sstream>

#include "graph/error.h"

namespace kiln {

int64_t shape_size(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string to_string(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << to_string(s); }

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw_error(op, ": shapes ", a, " and ", b,
                  " cannot be broadcast together (each axis, aligned from the right, must be "
                  "equal or 1)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int normalize_axis(int axis, int ndim, const char* op) {
  if (axis < -ndim || axis >= ndim)
    throw_error(op, ": axis ", axis, " is out of range for an array of rank ", ndim,
                " (valid: ", -ndim, " to ", ndim - 1, ")");
  return axis < 0 ? axis + ndim : axis;
}

std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim, const char* op) {
  std::vector<int> out;
  if (axes.empty()) {
    for (int i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int a : axes) out.push_back(normalize_axis(a, ndim, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw_error(op, ": repeated axis in the axes list (each axis may appear once)");
  return out;
}

namespace {

// The product of the extents times `itemsize`, or -1 when it exceeds kMaxArrayBytes. A zero
// extent makes the product 0 whatever the others are (NumPy allows (0, 2^62)).
int64_t bounded_product(const Shape& s, int64_t itemsize) {
  for (int64_t d : s)
    if (d == 0) return 0;
  int64_t n = itemsize;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxArrayBytes) return -1;
  return n;
}

}  // namespace

void check_shape(const Shape& s, const char* op) {
  for (int64_t d : s)
    if (d < 0) throw_error(op, ": shape ", s, " has a negative extent (extents must be >= 0)");
  if (bounded_product(s, 1) < 0)
    throw_error(op, ": shape ", s, " has more than 2^62 elements (the most an array may hold)");
}

void check_dtype(Dtype d, const char* op) {
  if (d.size() == 0)  // a Dtype made from a number that is no kind: never reaches a kernel
    throw_error(op, ": unknown dtype (kind ", static_cast<int>(d.kind),
                "); use the constants in graph/dtype.h or dtype_from_name()");
}

size_t checked_nbytes(const Shape& s, Dtype d, const char* op) {
  check_dtype(d, op);
  check_shape(s, op);
  int64_t n = bounded_product(s, static_cast<int64_t>(d.size()));
  if (n < 0)
    throw_error(op, ": an array of shape ", s, " and dtype ", d,
                " would need more than 2^62 bytes (the most an array may hold)");
  return static_cast<size_t>(n);
}

}  // namespace kiln
