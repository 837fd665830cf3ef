// Function transforms over Python functions and pytrees: grad, value_and_grad, vjp, jvp, vmap.
// Each flattens the differentiated (or mapped) arguments into the std::vector<Array> the C++
// transform takes, and rebuilds the Python arguments and results around it. The transforms run
// on the calling thread with the GIL held: they call the Python function synchronously.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "tree.h"

namespace kiln::py {
namespace {

using namespace nb::literals;

// MLX's rule: argnums None means argument 0 unless argnames names keyword arguments, then none.
std::vector<int> argnums_of(nb::handle argnums, bool any_names) {
  if (argnums.is_none()) return any_names ? std::vector<int>{} : std::vector<int>{0};
  if (nb::isinstance<nb::int_>(argnums)) return {nb::cast<int>(argnums)};
  std::vector<int> out;
  for (nb::handle h : argnums) out.push_back(nb::cast<int>(h));
  return out;
}

std::vector<std::string> argnames_of(nb::handle argnames) {
  if (argnames.is_none()) return {};
  if (nb::isinstance<nb::str>(argnames)) return {nb::cast<std::string>(argnames)};
  std::vector<std::string> out;
  for (nb::handle h : argnames) out.push_back(nb::cast<std::string>(h));
  return out;
}

// The differentiated arguments of one call (positional ones, then keyword ones), flattened,
// and how to put new arrays back.
struct DiffArgs {
  nb::list args;
  nb::dict kwargs;
  std::vector<int> nums;
  std::vector<std::string> names;
  std::vector<Flat> flats;  // one per differentiated argument: nums, then names
  std::vector<Array> all;   // every differentiated array, in order

  DiffArgs(const nb::args& a, const nb::kwargs& kw, std::vector<int> argnums,
           std::vector<std::string> argnames)
      : args(a), kwargs(nb::dict(kw)), nums(std::move(argnums)), names(std::move(argnames)) {
    if (nums.empty() && names.empty())
      throw Error("grad: argnums and argnames are both empty; name at least one argument");
    for (size_t k = 0; k < nums.size(); ++k) {
      int n = nums[k];
      if (n < 0 || n >= static_cast<int>(args.size()))
        throw Error("grad: argnums has " + std::to_string(n) + " but the function got " +
                    std::to_string(args.size()) + " positional arguments");
      for (size_t m = 0; m < k; ++m)
        if (nums[m] == n) throw Error("grad: argument " + std::to_string(n) + " is named twice");
      add(args[n], "argument " + std::to_string(n));
    }
    for (const std::string& name : names) {
      if (!kwargs.contains(name.c_str()))
        throw Error("grad: argnames has '" + name + "' but the function got no keyword argument " +
                    "of that name (it got " + nb::cast<std::string>(nb::repr(kwargs.keys())) + ")");
      add(kwargs[name.c_str()], "keyword argument '" + name + "'");
    }
  }
  void add(nb::handle tree, const std::string& what) {
    Flat f = flatten(tree, Leaves::Arrays, what.c_str());
    all.insert(all.end(), f.arrays.begin(), f.arrays.end());
    flats.push_back(std::move(f));
  }
  // The differentiated arguments, part k of `flat`, rebuilt in the shape they came in.
  std::vector<nb::object> parts(const std::vector<Array>& flat) const {
    std::vector<nb::object> out;
    size_t at = 0;
    for (const Flat& f : flats) {
      auto from = flat.begin() + static_cast<long>(at);
      out.push_back(unflatten(f.structure,
                              std::vector<Array>(from, from + static_cast<long>(f.arrays.size()))));
      at += f.arrays.size();
    }
    return out;
  }
  // Calls fun with the differentiated arguments replaced by `flat`.
  nb::object call(nb::handle fun, const std::vector<Array>& flat) const {
    std::vector<nb::object> p = parts(flat);
    nb::list a = nb::list(args);
    nb::dict kw = nb::dict(kwargs);
    for (size_t k = 0; k < nums.size(); ++k) a[nums[k]] = p[k];
    for (size_t k = 0; k < names.size(); ++k) kw[names[k].c_str()] = p[nums.size() + k];
    return fun(*nb::tuple(a), **kw);
  }
  // MLX's result: the positional gradients (one tree for one argument, a tuple for several,
  // None for none), paired with a dict of the keyword ones when argnames was given.
  nb::object grads(const std::vector<Array>& g) const {
    std::vector<nb::object> p = parts(g);
    nb::object positional = nb::none();
    if (nums.size() == 1) {
      positional = p[0];
    } else if (nums.size() > 1) {
      nb::list l;
      for (size_t k = 0; k < nums.size(); ++k) l.append(p[k]);
      positional = nb::tuple(l);
    }
    if (names.empty()) return positional;
    nb::dict named;
    for (size_t k = 0; k < names.size(); ++k) named[names[k].c_str()] = p[nums.size() + k];
    return nb::make_tuple(positional, named);
  }
};

nb::object value_and_grad_call(nb::object fun, nb::handle argnums, nb::handle argnames,
                               nb::args args, nb::kwargs kwargs, bool want_value) {
  std::vector<std::string> names = argnames_of(argnames);
  std::vector<int> nums = argnums_of(argnums, !names.empty());
  DiffArgs d(args, kwargs, std::move(nums), std::move(names));
  nb::object out_structure;
  Fn f = [&](const std::vector<Array>& flat) {
    nb::object r = d.call(fun, flat);
    if (!nb::isinstance<Array>(r) && !nb::isinstance<nb::tuple>(r) && !nb::isinstance<nb::list>(r))
      // A ValueError (kiln.Error), as MLX raises: the value returned is wrong, not its caller.
      throw Error(std::string("grad: the function returned a ") + nb::type_name(r.type()).c_str() +
                  "; it must return an array, or a tuple whose first element is the (scalar) "
                  "array to differentiate");
    Flat o = flatten(r, Leaves::Arrays, "the function's result");
    out_structure = o.structure;
    return o.arrays;
  };
  std::vector<int> all(d.all.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  auto [values, grads] = value_and_grad(f, all)(d.all);
  nb::object g = d.grads(grads);
  if (!want_value) return g;
  return nb::make_tuple(unflatten(out_structure, values), g);
}

std::vector<Array> array_list(nb::handle seq, const char* what) {
  std::vector<Array> out;
  if (nb::isinstance<Array>(seq)) return {nb::cast<Array>(seq)};
  for (nb::handle h : seq) out.push_back(to_array(h));
  (void)what;
  return out;
}

Fn list_fn(nb::object fun) {
  return [fun](const std::vector<Array>& xs) {
    nb::list args;
    for (const Array& x : xs) args.append(x);
    nb::object r = fun(*args);
    return flatten(r, Leaves::Arrays, "the function's result").arrays;
  };
}

nb::list to_list(const std::vector<Array>& v) {
  nb::list l;
  for (const Array& a : v) l.append(a);
  return l;
}

// An in_axes / out_axes entry: an int, or None (not mapped).
int axis_of(nb::handle h, const char* what) {
  if (h.is_none()) return -1;
  if (!nb::isinstance<nb::int_>(h) || nb::isinstance<nb::bool_>(h))
    throw Error(std::string("vmap: ") + what + " holds a " + nb::type_name(h.type()).c_str() +
                "; each entry must be an int axis or None");
  return nb::cast<int>(h);
}

bool is_sequence(nb::handle h) {
  return nb::isinstance<nb::tuple>(h) || nb::isinstance<nb::list>(h);
}

// in_axes for argument i: one entry for all arguments, or one per argument.
nb::handle in_axis_for(nb::handle in_axes, size_t i, size_t n) {
  if (!is_sequence(in_axes)) return in_axes;
  if (nb::len(in_axes) != n)
    throw Error("vmap: in_axes has " + std::to_string(nb::len(in_axes)) +
                " entries but the function got " + std::to_string(n) +
                " arguments; give one per argument, or one int (or None) for all");
  return in_axes[i];
}

nb::object vmap_call(nb::object fun, nb::object in_axes, nb::object out_axes, nb::args args) {
  // One axis per flattened input leaf: an int or None for all, or one per argument.
  std::vector<Array> flat;
  std::vector<int> in;
  std::vector<nb::object> structures;
  std::vector<size_t> counts;  // arrays per argument
  for (size_t i = 0; i < args.size(); ++i) {
    Flat f = flatten(args[i]);
    int ax = axis_of(in_axis_for(in_axes, i, args.size()), "in_axes");
    for (const Array& a : f.arrays) flat.push_back(a), in.push_back(ax);
    structures.push_back(f.structure);
    counts.push_back(f.arrays.size());
  }
  nb::object out_structure;
  Fn f = [&](const std::vector<Array>& xs) {
    nb::list call;
    size_t at = 0;
    for (size_t i = 0; i < structures.size(); ++i) {
      auto from = xs.begin() + static_cast<long>(at);
      call.append(
          unflatten(structures[i], std::vector<Array>(from, from + static_cast<long>(counts[i]))));
      at += counts[i];
    }
    Flat o = flatten(fun(*call), Leaves::Arrays, "the function's result");
    out_structure = o.structure;
    return o.arrays;
  };
  std::vector<int> out;
  bool per_output = is_sequence(out_axes);
  if (per_output)
    for (nb::handle h : out_axes) out.push_back(axis_of(h, "out_axes"));
  int out_axis = per_output ? 0 : axis_of(out_axes, "out_axes");
  std::vector<Array> r = vmap(f, in, out)(flat);
  if (!per_output && out_axis != 0)
    for (Array& a : r) a = moveaxis(a, 0, out_axis);
  return unflatten(out_structure, r);
}

}  // namespace

void init_transforms(nb::module_& m) {
  // grad, value_and_grad and vmap return Python closures over these (python/kiln/__init__.py):
  // a closure is visible to Python's garbage collector, so a function that refers to its own
  // transform (a global `grad_fn = kiln.grad(loss)` used inside `loss`'s module) is freed; a C++
  // function holding `fun` would keep such a cycle alive forever.
  m.def(
      "_value_and_grad_call",
      [](nb::object fun, nb::object argnums, nb::object argnames, bool want_value, nb::tuple args,
         nb::dict kwargs) {
        return value_and_grad_call(fun, argnums, argnames, nb::borrow<nb::args>(args),
                                   nb::borrow<nb::kwargs>(kwargs), want_value);
      },
      "fun"_a, "argnums"_a.none(), "argnames"_a.none(), "want_value"_a, "args"_a, "kwargs"_a);
  m.def(
      "vjp",
      [](nb::object fun, nb::handle primals, nb::handle cotangents) {
        auto [outs, vjps] =
            vjp(list_fn(fun), array_list(primals, "primals"), array_list(cotangents, "cotangents"));
        return nb::make_tuple(to_list(outs), to_list(vjps));
      },
      "fun"_a, "primals"_a, "cotangents"_a);
  m.def(
      "jvp",
      [](nb::object fun, nb::handle primals, nb::handle tangents) {
        auto [outs, jvps] =
            jvp(list_fn(fun), array_list(primals, "primals"), array_list(tangents, "tangents"));
        return nb::make_tuple(to_list(outs), to_list(jvps));
      },
      "fun"_a, "primals"_a, "tangents"_a);
  m.def(
      "_vmap_call",
      [](nb::object fun, nb::object in_axes, nb::object out_axes, nb::tuple args) {
        return vmap_call(fun, in_axes, out_axes, nb::borrow<nb::args>(args));
      },
      "fun"_a, "in_axes"_a.none(), "out_axes"_a.none(), "args"_a);
}

}  // namespace kiln::py
