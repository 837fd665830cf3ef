#include "backends/canonical.h"

namespace kiln {

namespace {

// Every index map of the kernel: buffer maps and Index values.
std::vector<IndexMap*> all_maps(Kernel& k) {
  std::vector<IndexMap*> maps;
  for (KernelBuffer& b : k.buffers) maps.push_back(&b.map);
  for (Value& v : k.body)
    if (v.kind == ValueKind::Index) maps.push_back(&v.map);
  return maps;
}

// The stride of axes (i, i+1) merged into one, or false when some map does not walk them as
// one run. Extent-1 axes merge with anything (their stride is never used).
bool merged_stride(const IndexMap& m, int i, int64_t e0, int64_t e1, Dim& out) {
  const Dim& s0 = m.strides[i];
  const Dim& s1 = m.strides[i + 1];
  if (e1 == 1) return out = s0, true;
  if (e0 == 1) return out = s1, true;
  if (s0.is_runtime() || s1.is_runtime()) return false;
  if (s0.value != s1.value * e1) return false;
  return out = s1, true;
}

// Tries to merge axes i and i+1 in place.
bool try_merge(Kernel& k, int i) {
  const Dim& d0 = k.domain[i];
  const Dim& d1 = k.domain[i + 1];
  if (d0.is_runtime() || d1.is_runtime()) return false;
  std::vector<IndexMap*> maps = all_maps(k);
  std::vector<Dim> strides(maps.size());
  for (size_t m = 0; m < maps.size(); ++m)
    if (!merged_stride(*maps[m], i, d0.value, d1.value, strides[m])) return false;
  for (size_t m = 0; m < maps.size(); ++m) {
    maps[m]->strides[i] = strides[m];
    maps[m]->strides.erase(maps[m]->strides.begin() + i + 1);
  }
  k.domain[i] = Dim::constant(d0.value * d1.value);
  k.domain.erase(k.domain.begin() + i + 1);
  return true;
}

}  // namespace

Kernel merge_axes(const Kernel& in) {
  Kernel k = in;
  // Kept axes merge among themselves, reduced axes among themselves: never across the boundary.
  for (int i = k.kept_axes() - 2; i >= 0; --i) try_merge(k, i);
  if (k.reduce) {
    int kept = k.kept_axes();
    for (int i = k.ndim() - 2; i >= kept; --i)
      if (try_merge(k, i)) --k.reduce->naxes;
  }
  return k;
}

}  // namespace kiln
