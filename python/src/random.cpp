// The C++ side of kiln.random (python/kiln/random.py holds MLX's API and the global key state).
// Keys are key arrays (graph/random.h): 0-d uint64 arrays, possibly traced inside compile.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include "kiln_py.h"

namespace kiln::py {
namespace {

using namespace nb::literals;

random::KeyArg key_of(nb::handle key) {
  if (key.is_none()) return {};
  return random::KeyArg(to_array(key));
}

Shape shape_of(nb::handle h) {
  Shape s;
  if (nb::isinstance<nb::int_>(h)) return {nb::cast<int64_t>(h)};
  for (nb::handle x : h) s.push_back(nb::cast<int64_t>(x));
  return s;
}

std::optional<Shape> maybe_shape(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return shape_of(h);
}

Dtype dtype_or(nb::handle h, Dtype d) { return h.is_none() ? d : to_dtype(h); }

// (the next state, a key to draw with) from the state's key. An evaluated key is split on the
// host, so the state never becomes a chain of lazy splits; a traced one (inside compile) in the
// graph, so a captured state advances at every call.
nb::tuple next_key(const Array& state) {
  if (state.is_evaluated()) {
    std::vector<random::Key> ks = random::split(state.item<uint64_t>(), 2);
    return nb::make_tuple(array(ks[0]), array(ks[1]));
  }
  Array ks = random::split(state, 2);
  return nb::make_tuple(reshape(slice(ks, {0}, {1}), {}), reshape(slice(ks, {1}, {2}), {}));
}

}  // namespace

void init_random(nb::module_& m) {
  nb::module_ r = m.def_submodule("_random", "Counter-based random draws (kiln.random)");
  r.def(
      "seed", [](uint64_t s) { random::seed(s); }, "seed"_a);
  r.def(
      "key", [](uint64_t s) { return random::key_array(s); }, "seed"_a);
  r.def(
      "next", [](nb::handle state) { return next_key(to_array(state)); }, "state"_a);
  r.def(
      "split",
      [](nb::handle key, int num, nb::handle s) {
        return random::split(to_array(key), num, to_stream_or_device(s));
      },
      "key"_a, "num"_a = 2, "stream"_a = nb::none());
  r.def(
      "bits",
      [](nb::handle shape, int width, nb::handle key, nb::handle s) {
        return random::bits(shape_of(shape), width, key_of(key), to_stream_or_device(s));
      },
      "shape"_a, "width"_a, "key"_a.none(), "stream"_a.none());
  r.def(
      "uniform",
      [](double low, double high, nb::handle shape, nb::handle dtype, nb::handle key,
         nb::handle s) {
        return random::uniform(low, high, shape_of(shape), dtype_or(dtype, float32), key_of(key),
                               to_stream_or_device(s));
      },
      "low"_a, "high"_a, "shape"_a, "dtype"_a.none(), "key"_a.none(), "stream"_a.none());
  r.def(
      "normal",
      [](nb::handle shape, nb::handle dtype, double loc, double scale, nb::handle key,
         nb::handle s) {
        return random::normal(shape_of(shape), loc, scale, dtype_or(dtype, float32), key_of(key),
                              to_stream_or_device(s));
      },
      "shape"_a, "dtype"_a.none(), "loc"_a, "scale"_a, "key"_a.none(), "stream"_a.none());
  r.def(
      "randint",
      [](nb::handle low, nb::handle high, nb::handle shape, nb::handle dtype, nb::handle key,
         nb::handle s) {
        Dtype d = dtype_or(dtype, int32);
        return random::randint(to_array(low, int64), to_array(high, int64), shape_of(shape), d,
                               key_of(key), to_stream_or_device(s));
      },
      "low"_a, "high"_a, "shape"_a, "dtype"_a.none(), "key"_a.none(), "stream"_a.none());
  r.def(
      "bernoulli",
      [](nb::handle p, nb::handle shape, nb::handle key, nb::handle s) {
        return random::bernoulli(to_array(p, float32), maybe_shape(shape), key_of(key),
                                 to_stream_or_device(s));
      },
      "p"_a, "shape"_a.none(), "key"_a.none(), "stream"_a.none());
  r.def(
      "truncated_normal",
      [](nb::handle lower, nb::handle upper, nb::handle shape, nb::handle dtype, nb::handle key,
         nb::handle s) {
        Dtype d = dtype_or(dtype, float32);
        return random::truncated_normal(to_array(lower, d), to_array(upper, d), maybe_shape(shape),
                                        d, key_of(key), to_stream_or_device(s));
      },
      "lower"_a, "upper"_a, "shape"_a.none(), "dtype"_a.none(), "key"_a.none(), "stream"_a.none());
  r.def(
      "categorical",
      [](nb::handle logits, int axis, nb::handle shape, nb::handle num_samples, nb::handle key,
         nb::handle s) {
        Array l = to_array(logits);
        if (!shape.is_none() && !num_samples.is_none())
          throw nb::value_error("categorical: give shape or num_samples, not both");
        if (!num_samples.is_none())
          return random::categorical(l, axis, nb::cast<int>(num_samples), key_of(key),
                                     to_stream_or_device(s));
        if (!shape.is_none())
          return random::categorical(l, axis, shape_of(shape), key_of(key), to_stream_or_device(s));
        return random::categorical(l, axis, key_of(key), to_stream_or_device(s));
      },
      "logits"_a, "axis"_a, "shape"_a.none(), "num_samples"_a.none(), "key"_a.none(),
      "stream"_a.none());
}

}  // namespace kiln::py
