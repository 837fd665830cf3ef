// Pytree flatten / unflatten (tree.h). Structures are nested tuples tagged by kind:
//   ("a",) an array leaf, ("c", value) a constant, ("l", children) a list, ("t", children) a
//   tuple, ("d", keys, children) a dict (keys in insertion order).
#include "tree.h"

#include <nanobind/stl/string.h>

namespace kiln::py {
namespace {

nb::object tag(const char* t) { return nb::str(t); }

nb::object flatten_into(nb::handle x, bool strict, const std::string& path,
                        std::vector<Array>& arrays) {
  if (nb::isinstance<Array>(x)) {
    arrays.push_back(nb::cast<Array>(x));
    return nb::make_tuple(tag("a"));
  }
  if (nb::isinstance<nb::list>(x) || nb::isinstance<nb::tuple>(x)) {
    bool is_list = nb::isinstance<nb::list>(x);
    nb::list children;
    size_t i = 0;
    for (nb::handle c : x)
      children.append(flatten_into(c, strict, path + "[" + std::to_string(i++) + "]", arrays));
    return nb::make_tuple(tag(is_list ? "l" : "t"), nb::tuple(children));
  }
  if (nb::isinstance<nb::dict>(x)) {
    nb::list keys, children;
    for (auto [k, v] : nb::borrow<nb::dict>(x)) {
      keys.append(k);
      children.append(flatten_into(v, strict, path + "[" + nb::repr(k).c_str() + "]", arrays));
    }
    return nb::make_tuple(tag("d"), nb::tuple(keys), nb::tuple(children));
  }
  if (strict) {
    std::string type = nb::type_name(x.type()).c_str();
    throw nb::value_error(
        (path + " is a " + type + "; expected an array or a list, tuple or dict of arrays")
            .c_str());
  }
  return nb::make_tuple(tag("c"), nb::borrow(x));
}

nb::object rebuild(nb::handle s, const std::vector<Array>& arrays, size_t& next) {
  nb::tuple t = nb::borrow<nb::tuple>(s);
  std::string kind = nb::cast<std::string>(t[0]);
  if (kind == "a") {
    if (next >= arrays.size()) throw nb::value_error("unflatten: fewer arrays than leaves");
    return nb::cast(arrays[next++]);
  }
  if (kind == "c") return nb::borrow(t[1]);
  if (kind == "l" || kind == "t") {
    nb::list out;
    for (nb::handle c : nb::borrow<nb::tuple>(t[1])) out.append(rebuild(c, arrays, next));
    if (kind == "l") return out;
    return nb::tuple(out);
  }
  nb::dict out;
  nb::tuple keys = nb::borrow<nb::tuple>(t[1]);
  nb::tuple children = nb::borrow<nb::tuple>(t[2]);
  for (size_t i = 0; i < keys.size(); ++i) out[keys[i]] = rebuild(children[i], arrays, next);
  return out;
}

// Replaces the array leaves under `x`; returns the new value for x itself (a rebuilt tuple, a
// new array, or x unchanged when mutated in place).
nb::object assign_into(nb::handle x, const std::vector<Array>& arrays, size_t& next) {
  if (nb::isinstance<Array>(x)) {
    if (next >= arrays.size()) throw nb::value_error("compile: captured state changed size");
    return nb::cast(arrays[next++]);
  }
  if (nb::isinstance<nb::list>(x)) {
    nb::list l = nb::borrow<nb::list>(x);
    for (size_t i = 0; i < l.size(); ++i) l[i] = assign_into(l[i], arrays, next);
    return nb::borrow(x);
  }
  if (nb::isinstance<nb::tuple>(x)) {
    nb::list out;
    for (nb::handle c : x) out.append(assign_into(c, arrays, next));
    return nb::tuple(out);
  }
  if (nb::isinstance<nb::dict>(x)) {
    nb::dict d = nb::borrow<nb::dict>(x);
    for (nb::handle k : nb::list(d.keys())) d[k] = assign_into(d[k], arrays, next);
    return nb::borrow(x);
  }
  return nb::borrow(x);
}

}  // namespace

Flat flatten(nb::handle tree, bool strict, const char* what) {
  Flat f;
  f.structure = flatten_into(tree, strict, what, f.arrays);
  return f;
}

nb::object unflatten(nb::handle structure, const std::vector<Array>& arrays) {
  size_t next = 0;
  return rebuild(structure, arrays, next);
}

void assign_leaves(nb::handle tree, const std::vector<Array>& arrays) {
  size_t next = 0;
  assign_into(tree, arrays, next);
  if (next != arrays.size()) throw nb::value_error("compile: captured state changed size");
}

}  // namespace kiln::py
