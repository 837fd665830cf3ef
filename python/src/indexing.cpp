// NumPy indexing on kiln.array: ints, slices with steps, None, ..., integer arrays and (outside a
// trace) boolean masks; `a[idx] = v` and MLX's `a.at[idx].add(v)`. Basic indices become one
// slice (and reshapes); integer arrays become one gather over the indexed axes, placed where NumPy
// places them when they are adjacent (first otherwise).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

#include "kiln_py.h"

namespace kiln::py {
namespace {

bool is_array_index(nb::handle h) {
  return !nb::isinstance<nb::int_>(h) && !nb::isinstance<nb::slice>(h) && !h.is_none() &&
         !h.is(nb::handle(Py_Ellipsis)) && !nb::isinstance<nb::bool_>(h);
}

[[noreturn]] void bad_index(nb::handle h) {
  std::string type = nb::type_name(h.type()).c_str();
  throw nb::index_error(("cannot index a kiln array with a " + type +
                         "; valid: int, slice, None, ..., integer arrays, boolean masks")
                            .c_str());
}

// The non-zero positions of a concrete boolean mask, one int64 array per mask axis.
std::vector<Array> mask_indices(const Array& mask) {
  if (mask.is_placeholder())
    throw nb::index_error(
        "a boolean mask inside a compiled function would give a data-dependent shape; use "
        "kiln.where(mask, x, y) instead");
  std::vector<uint8_t> m;
  for (bool b : mask.to_vector<bool>()) m.push_back(b);
  std::vector<std::vector<int64_t>> pos(static_cast<size_t>(mask.ndim()));
  for (size_t flat = 0; flat < m.size(); ++flat) {
    if (!m[flat]) continue;
    size_t rest = flat;
    for (int ax = mask.ndim() - 1; ax >= 0; --ax) {
      pos[ax].push_back(static_cast<int64_t>(rest % mask.shape(ax)));
      rest /= mask.shape(ax);
    }
  }
  std::vector<Array> out;
  for (auto& p : pos) {
    int64_t n = static_cast<int64_t>(p.size());
    out.push_back(array(p, {n}, int64));
  }
  return out;
}

// One entry per axis of the (None-expanded) array being indexed.
struct AxisIndex {
  enum Kind { Full, Int, Slice, Gather } kind = Full;
  int64_t start = 0, stop = 0, step = 1;
  std::optional<Array> idx;
};

struct Plan {
  Array base;  // `a` with an axis inserted for every None
  std::vector<AxisIndex> axes;
};

Plan plan_index(const Array& a, nb::handle index) {
  nb::tuple items =
      nb::isinstance<nb::tuple>(index) ? nb::borrow<nb::tuple>(index) : nb::make_tuple(index);
  // Expand masks into their index arrays and lists / array-likes into arrays.
  std::vector<nb::object> flat;
  bool any_array = false;
  for (nb::handle h : items) {
    if (nb::isinstance<nb::bool_>(h)) bad_index(h);
    if (!is_array_index(h)) {
      flat.push_back(nb::borrow(h));
      continue;
    }
    Array arr = to_array(h);
    any_array = true;
    if (arr.dtype() == bool_) {
      for (Array& i : mask_indices(arr)) flat.push_back(nb::cast(i));
    } else if (!arr.dtype().is_int()) {
      throw nb::index_error(
          ("an index array must be of integer or bool dtype, not " + arr.dtype().name()).c_str());
    } else {
      flat.push_back(nb::cast(arr));
    }
  }
  int consumed = 0, ellipses = 0;
  for (auto& h : flat) {
    if (h.is(nb::handle(Py_Ellipsis)))
      ++ellipses;
    else if (!h.is_none())
      ++consumed;
  }
  if (ellipses > 1) throw nb::index_error("an index can only have a single ellipsis ('...')");
  if (consumed > a.ndim())
    throw nb::index_error(("too many indices for an array of " + std::to_string(a.ndim()) +
                           " dimensions (" + std::to_string(consumed) + " given)")
                              .c_str());
  std::vector<nb::object> full;
  for (auto& h : flat) {
    if (h.is(nb::handle(Py_Ellipsis))) {
      for (int i = 0; i < a.ndim() - consumed; ++i)
        full.push_back(nb::slice(nb::none(), nb::none(), nb::none()));
    } else {
      full.push_back(h);
    }
  }
  Plan p{a, {}};
  for (size_t i = 0; i < full.size(); ++i)
    if (full[i].is_none()) p.base = expand_dims(p.base, static_cast<int>(i));
  while (static_cast<int>(full.size()) < p.base.ndim())
    full.push_back(nb::slice(nb::none(), nb::none(), nb::none()));
  for (size_t i = 0; i < full.size(); ++i) {
    AxisIndex ax;
    int64_t n = p.base.shape(static_cast<int>(i));
    nb::handle h = full[i];
    if (h.is_none()) {
      ax.kind = AxisIndex::Full;
    } else if (nb::isinstance<nb::int_>(h)) {
      int64_t k = nb::cast<int64_t>(h);
      if (k < -n || k >= n)
        throw nb::index_error(("index " + std::to_string(k) + " is out of bounds for axis " +
                               std::to_string(i) + " with size " + std::to_string(n))
                                  .c_str());
      if (k < 0) k += n;
      if (any_array) {
        ax.kind = AxisIndex::Gather;  // NumPy treats ints beside arrays as 0-d index arrays
        ax.idx = array(k, {});
      } else {
        ax.kind = AxisIndex::Int, ax.start = k, ax.stop = k + 1;
      }
    } else if (nb::isinstance<nb::slice>(h)) {
      auto [start, stop, step, len] = nb::borrow<nb::slice>(h).compute(static_cast<size_t>(n));
      ax.kind = AxisIndex::Slice;
      ax.start = static_cast<int64_t>(start), ax.step = static_cast<int64_t>(step);
      ax.stop = ax.start + static_cast<int64_t>(len) * ax.step;
      if (ax.step < 0 && ax.stop < 0) ax.stop = -n - 1;  // runs past the front: NumPy's "to 0"
      if (len == 0) ax.start = 0, ax.stop = 0, ax.step = 1;
    } else {
      ax.kind = AxisIndex::Gather;
      ax.idx = nb::cast<Array>(h);
    }
    p.axes.push_back(ax);
  }
  return p;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t y = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (x != y && x != 1 && y != 1)
      throw nb::index_error("index arrays could not be broadcast together");
    out[out.size() - 1 - k] = x == 1 ? y : x;
  }
  return out;
}

Array gather(const Array& x, const std::vector<int>& axes, std::vector<Array> idx) {
  if (axes.size() == 1) return take(x, idx[0], axes[0]);
  // Broadcast the index arrays, move their axes to the front, flatten them into one and gather
  // by the linear index; then put the result axes where NumPy does.
  Shape common;
  for (const Array& i : idx) common = broadcast_shapes(common, i.shape());
  std::vector<int> perm = axes;
  for (int k = 0; k < x.ndim(); ++k)
    if (std::find(axes.begin(), axes.end(), k) == axes.end()) perm.push_back(k);
  Array t = transpose(x, perm);
  Shape rest(t.shape().begin() + static_cast<long>(axes.size()), t.shape().end());
  Shape merged{-1};
  merged.insert(merged.end(), rest.begin(), rest.end());
  Array linear = zeros(common, int64);
  int64_t stride = 1;
  for (size_t k = axes.size(); k-- > 0;) {
    int64_t n = x.shape(axes[k]);
    Array i = astype(idx[k], int64);
    i = where(less(i, weak_scalar(Scalar::of(int64_t{0}), i)),
              add(i, weak_scalar(Scalar::of(n), i)), i);
    i = clip(i, 0, static_cast<double>(n > 0 ? n - 1 : 0));
    linear = add(linear, multiply(astype(i, int64), weak_scalar(Scalar::of(stride), linear)));
    stride *= n;
  }
  Array out = take(reshape(t, merged), linear, 0);
  bool adjacent = true;
  for (size_t k = 1; k < axes.size(); ++k) adjacent = adjacent && axes[k] == axes[k - 1] + 1;
  if (adjacent && axes[0] > 0) {
    for (int k = 0; k < static_cast<int>(common.size()); ++k) out = moveaxis(out, k, axes[0] + k);
  }
  return out;
}

Array getitem(const Array& a, nb::handle index) {
  Plan p = plan_index(a, index);
  size_t n = p.axes.size();
  std::vector<int64_t> start(n), stop(n), step(n);
  bool sliced = false;
  std::vector<int> squeeze_axes, gather_axes;
  std::vector<Array> gather_idx;  // the arrays of the Gather axes, in axis order
  for (size_t i = 0; i < n; ++i) {
    const AxisIndex& ax = p.axes[i];
    int64_t len = p.base.shape(static_cast<int>(i));
    start[i] = 0, stop[i] = len, step[i] = 1;
    if (ax.kind == AxisIndex::Int || ax.kind == AxisIndex::Slice) {
      start[i] = ax.start, stop[i] = ax.stop, step[i] = ax.step;
      sliced = sliced || !(ax.start == 0 && ax.stop == len && ax.step == 1);
    }
    if (ax.kind == AxisIndex::Int) squeeze_axes.push_back(static_cast<int>(i));
    if (ax.kind == AxisIndex::Gather) {
      gather_axes.push_back(static_cast<int>(i));
      gather_idx.push_back(*ax.idx);
    }
  }
  Array x = sliced ? slice(p.base, start, stop, step) : p.base;
  if (!gather_axes.empty()) return gather(x, gather_axes, gather_idx);
  return squeeze_axes.empty() ? x : squeeze(x, squeeze_axes);
}

// `a` with `v` written (or combined by `op`) into the region a[index] selects. Basic indices
// with unit steps only: the region is a box, so `v` padded to a's shape and a box mask place it.
Array update_box(const Array& a, nb::handle index, nb::handle value,
                 Array (*op)(const Array&, const Array&, StreamOrDevice)) {
  Plan p = plan_index(a, index);
  if (!p.base.same(a) && p.base.ndim() != a.ndim())
    throw nb::index_error("assignment through None indices is not supported");
  Array region = getitem(a, index);
  Array v = operand(value, &region);
  // A value with the region's elements but extra 1-extents (x[2] = array([3.0])) fits as NumPy
  // and MLX let it; anything else broadcasts.
  v = astype(v, a.dtype());
  v = v.size() == region.size() && v.ndim() > region.ndim() ? reshape(v, region.shape())
                                                            : broadcast_to(v, region.shape());
  std::vector<std::pair<int64_t, int64_t>> widths;
  Shape boxed;
  for (size_t i = 0; i < p.axes.size(); ++i) {
    const AxisIndex& ax = p.axes[i];
    int64_t len = a.shape(static_cast<int>(i));
    if (ax.kind == AxisIndex::Gather || (ax.kind == AxisIndex::Slice && ax.step != 1))
      throw nb::index_error(
          "assignment and .at[] updates take ints and unit-step slices here; for an index array "
          "use kiln.scatter_add, or .at[idx].add(v) with one index array");
    int64_t lo = ax.kind == AxisIndex::Full ? 0 : ax.start;
    int64_t hi = ax.kind == AxisIndex::Full ? len : ax.stop;
    widths.push_back({lo, len - hi});
    boxed.push_back(hi - lo);
  }
  Array vb = reshape(v, boxed);
  Array placed = pad(vb, widths, 0);
  Array mask = pad(ones(boxed, bool_), widths, 0);
  Array combined = op ? op(a, placed, {}) : placed;
  return where(mask, astype(combined, a.dtype()), a);
}

// a.at[index]: MLX's functional updates.
struct AtIndexed {
  Array a;
  nb::object index;
};
struct At {
  Array a;
};

Array at_add(const AtIndexed& s, nb::handle v, bool negate) {
  nb::object index = s.index;
  bool single_array = !nb::isinstance<nb::tuple>(index) && is_array_index(index);
  if (single_array) {
    Array idx = reshape(to_array(index), {-1});
    Shape ushape{idx.shape(0)};
    for (int k = 1; k < s.a.ndim(); ++k) ushape.push_back(s.a.shape(k));
    Array u = operand(v, &s.a);
    if (negate) u = negative(u);
    return scatter_add(s.a, idx, broadcast_to(astype(u, s.a.dtype()), ushape), 0);
  }
  return update_box(s.a, index, v, negate ? subtract : add);
}

}  // namespace

void init_indexing(nb::class_<Array>& cls) {
  cls.def("__getitem__", [](const Array& a, nb::handle index) { return getitem(a, index); });
  cls.def("__setitem__", [](Array& a, nb::handle index, nb::handle value) {
    a = update_box(a, index, value, nullptr);
  });
  nb::class_<AtIndexed>(cls, "_AtIndexed")
      .def("add", [](const AtIndexed& s, nb::handle v) { return at_add(s, v, false); })
      .def("subtract", [](const AtIndexed& s, nb::handle v) { return at_add(s, v, true); })
      .def("multiply",
           [](const AtIndexed& s, nb::handle v) { return update_box(s.a, s.index, v, multiply); })
      .def("divide",
           [](const AtIndexed& s, nb::handle v) { return update_box(s.a, s.index, v, divide); })
      .def("maximum",
           [](const AtIndexed& s, nb::handle v) { return update_box(s.a, s.index, v, maximum); })
      .def("minimum",
           [](const AtIndexed& s, nb::handle v) { return update_box(s.a, s.index, v, minimum); });
  nb::class_<At>(cls, "_At").def("__getitem__", [](const At& at, nb::handle index) {
    return AtIndexed{at.a, nb::borrow(index)};
  });
  cls.def_prop_ro("at", [](const Array& a) { return At{a}; });
}

}  // namespace kiln::py
