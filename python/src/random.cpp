// The C++ side of kiln.random (python/kiln/random.py holds MLX's API and the global key state).
// Keys are 0-d uint64 arrays.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include "kiln_py.h"

namespace kiln::py {
namespace {

using namespace nb::literals;

std::optional<random::Key> key_of(nb::handle key) {
  if (key.is_none()) return std::nullopt;
  Array k = to_array(key);
  if (k.dtype() != uint64 || k.size() != 1)
    throw nb::value_error("random: a key is a uint64 array of one element (kiln.random.key(seed))");
  return k.item<uint64_t>();
}

Shape shape_of(nb::handle h) {
  Shape s;
  if (nb::isinstance<nb::int_>(h)) return {nb::cast<int64_t>(h)};
  for (nb::handle x : h) s.push_back(nb::cast<int64_t>(x));
  return s;
}

}  // namespace

void init_random(nb::module_& m) {
  nb::module_ r = m.def_submodule("_random", "Counter-based random draws (kiln.random)");
  r.def(
      "seed", [](uint64_t s) { random::seed(s); }, "seed"_a);
  r.def(
      "key", [](uint64_t s) { return array(random::key(s), {}); }, "seed"_a);
  r.def("next_key", [] { return array(random::next_key(), {}); });
  r.def(
      "split",
      [](nb::handle key, int num) {
        std::vector<random::Key> ks = random::split(*key_of(key), num);
        return array(ks, {static_cast<int64_t>(ks.size())}, uint64);
      },
      "key"_a, "num"_a = 2);
  r.def(
      "uniform",
      [](double low, double high, nb::handle shape, Dtype dtype, nb::handle key, nb::handle s) {
        return random::uniform(low, high, shape_of(shape), dtype, key_of(key),
                               to_stream_or_device(s));
      },
      "low"_a, "high"_a, "shape"_a, "dtype"_a, "key"_a.none(), "stream"_a.none());
  r.def(
      "normal",
      [](nb::handle shape, Dtype dtype, double loc, double scale, nb::handle key, nb::handle s) {
        return random::normal(shape_of(shape), loc, scale, dtype, key_of(key),
                              to_stream_or_device(s));
      },
      "shape"_a, "dtype"_a, "loc"_a, "scale"_a, "key"_a.none(), "stream"_a.none());
}

}  // namespace kiln::py
