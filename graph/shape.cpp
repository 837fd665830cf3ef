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

void check_shape(const Shape& s, const char* op) {
  for (int64_t d : s)
    if (d < 0) throw_error(op, ": shape ", s, " has a negative extent (extents must be >= 0)");
  // Sizes are int64 element counts; refuse shapes whose size would overflow them.
  int64_t n = 1;
  for (int64_t d : s) {
    if (d != 0 && n > (int64_t{1} << 62) / d)
      throw_error(op, ": shape ", s, " has more than 2^62 elements");
    n *= d;
  }
}

}  // namespace kiln
