#include "compile/view.h"

namespace kiln {

View View::identity(int ndim) {
  View v;
  v.domain = ndim;
  v.coeff.assign(ndim, std::vector<int64_t>(ndim, 0));
  for (int i = 0; i < ndim; ++i) v.coeff[i][i] = 1;
  v.offset.assign(ndim, 0);
  return v;
}

View View::broadcast_input(const Shape& in, const Shape& out) const {
  View r;
  r.domain = domain;
  size_t lead = out.size() - in.size();
  for (size_t j = 0; j < in.size(); ++j) {
    bool broadcast = in[j] == 1 && out[lead + j] != 1;
    if (broadcast) {
      r.coeff.push_back(std::vector<int64_t>(domain_size(), 0));
      r.offset.push_back(0);
    } else {
      r.coeff.push_back(coeff[lead + j]);
      r.offset.push_back(offset[lead + j]);
    }
  }
  return r;
}

View View::transpose_input(const std::vector<int>& perm) const {
  View r;
  r.domain = domain;
  r.coeff.resize(perm.size());
  r.offset.resize(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    r.coeff[perm[i]] = coeff[i];
    r.offset[perm[i]] = offset[i];
  }
  return r;
}

View View::slice_input(const std::vector<int64_t>& start, const std::vector<int64_t>& step) const {
  View r = *this;
  for (size_t j = 0; j < start.size(); ++j) {
    for (int64_t& c : r.coeff[j]) c *= step[j];
    r.offset[j] = start[j] + step[j] * offset[j];
  }
  return r;
}

// Each input axis of extent other than 1 takes the next output axes (unit axes aside) whose
// extents multiply to its own: one axis of the same extent, or several it was split into, whose
// row-major combination is its coordinate. An output axis holding parts of two input axes (a
// merge) has no such combination.
bool View::reshape_is_view(const Shape& in, const Shape& out) {
  View probe = identity(static_cast<int>(out.size())), unused;
  return probe.reshape_input(in, out, unused);
}

bool View::reshape_input(const Shape& in, const Shape& out, View& result) const {
  result.domain = domain;
  result.coeff.assign(in.size(), std::vector<int64_t>(domain_size(), 0));
  result.offset.assign(in.size(), 0);
  size_t o = 0;
  for (size_t j = 0; j < in.size(); ++j) {
    if (in[j] == 1) continue;  // coordinate 0
    std::vector<size_t> parts;
    int64_t extent = 1;
    for (; o < out.size() && (parts.empty() || extent < in[j]); ++o)
      if (out[o] != 1) parts.push_back(o), extent *= out[o];
    if (extent != in[j]) return false;
    int64_t stride = 1;  // of each part in the input axis, the last part's first
    for (size_t p = parts.size(); p-- > 0;) {
      for (size_t k = 0; k < domain_size(); ++k) result.coeff[j][k] += stride * coeff[parts[p]][k];
      result.offset[j] += stride * offset[parts[p]];
      stride *= out[parts[p]];
    }
  }
  for (; o < out.size(); ++o)
    if (out[o] != 1) return false;
  return true;
}

IndexMap View::buffer_map(const std::vector<int64_t>& strides) const {
  IndexMap m;
  size_t n = domain_size();
  int64_t off = 0;
  for (size_t j = 0; j < strides.size(); ++j) off += strides[j] * offset[j];
  for (size_t k = 0; k < n; ++k) {
    int64_t s = 0;
    for (size_t j = 0; j < strides.size(); ++j) s += strides[j] * coeff[j][k];
    m.strides.push_back(Dim::constant(s));
  }
  m.offset = Dim::constant(off);
  return m;
}

bool View::is_identity() const { return *this == identity(static_cast<int>(offset.size())); }

}  // namespace kiln
