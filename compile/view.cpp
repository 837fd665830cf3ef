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

bool View::reshape_input(const Shape& in, const Shape& out, View& result) const {
  std::vector<size_t> in_axes, out_axes;
  for (size_t j = 0; j < in.size(); ++j)
    if (in[j] != 1) in_axes.push_back(j);
  for (size_t j = 0; j < out.size(); ++j)
    if (out[j] != 1) out_axes.push_back(j);
  if (in_axes.size() != out_axes.size()) return false;
  for (size_t i = 0; i < in_axes.size(); ++i)
    if (in[in_axes[i]] != out[out_axes[i]]) return false;
  result.domain = domain;
  result.coeff.assign(in.size(), std::vector<int64_t>(domain_size(), 0));
  result.offset.assign(in.size(), 0);
  for (size_t i = 0; i < in_axes.size(); ++i) {
    result.coeff[in_axes[i]] = coeff[out_axes[i]];
    result.offset[in_axes[i]] = offset[out_axes[i]];
  }
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
