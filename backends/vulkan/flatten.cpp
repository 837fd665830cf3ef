#include "backends/vulkan/flatten.h"

namespace kiln::vulkan {

namespace {

// Can every map walk axes (a, a+1) of extents (e0, e1) as one axis? Sets `merged` per map.
bool mergeable(const std::vector<IndexMap*>& maps, int a, int64_t e0, int64_t e1,
               std::vector<Dim>& merged) {
  merged.clear();
  for (const IndexMap* m : maps) {
    const Dim& outer = m->strides[a];
    const Dim& inner = m->strides[a + 1];
    if (e1 == 1) {  // the inner axis never moves: the outer stride stands
      merged.push_back(outer);
    } else if (e0 == 1) {
      merged.push_back(inner);
    } else if (!outer.is_runtime() && !inner.is_runtime() && outer.value == inner.value * e1) {
      merged.push_back(inner);
    } else {
      return false;
    }
  }
  return true;
}

bool merge(Kernel& k, int a) {
  if (k.domain[a].is_runtime() || k.domain[a + 1].is_runtime()) return false;
  std::vector<IndexMap*> maps;
  for (KernelBuffer& b : k.buffers) maps.push_back(&b.map);
  for (Value& v : k.body)
    if (v.kind == ValueKind::Index) maps.push_back(&v.map);
  int64_t e0 = k.domain[a].value, e1 = k.domain[a + 1].value;
  std::vector<Dim> merged;
  if (!mergeable(maps, a, e0, e1, merged)) return false;
  for (size_t i = 0; i < maps.size(); ++i) {
    maps[i]->strides[a] = merged[i];
    maps[i]->strides.erase(maps[i]->strides.begin() + a + 1);
  }
  k.domain[a] = Dim::constant(e0 * e1);
  k.domain.erase(k.domain.begin() + a + 1);
  return true;
}

}  // namespace

Kernel flatten_domain(const Kernel& in) {
  Kernel k = in;
  for (int a = k.kept_axes() - 2; a >= 0; --a) merge(k, a);
  if (k.reduce) {
    int kept = k.kept_axes();
    for (int a = k.ndim() - 2; a >= kept; --a)
      if (merge(k, a)) --k.reduce->naxes;
  }
  return k;
}

}  // namespace kiln::vulkan
