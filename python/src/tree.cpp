// Pytree flatten / unflatten (tree.h). Structures are nested tuples tagged by kind:
//   ("a",) an array leaf, ("c", value) a constant, ("l", children) a list, ("t", children, type)
//   a tuple (type: the tuple subclass to rebuild, or None), ("d", keys, children) a dict (keys in
//   insertion order).
#include "tree.h"

#include <nanobind/stl/string.h>

namespace kiln::py {
namespace {

nb::object tag(const char* t) { return nb::str(t); }

bool is_constant(nb::handle x) {
  return x.is_none() || nb::isinstance<nb::bool_>(x) || nb::isinstance<nb::int_>(x) ||
         nb::isinstance<nb::float_>(x) || nb::isinstance<nb::str>(x);
}

nb::object flatten_into(nb::handle x, Leaves leaves, const std::string& path,
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
      children.append(flatten_into(c, leaves, path + "[" + std::to_string(i++) + "]", arrays));
    if (is_list) return nb::make_tuple(tag("l"), nb::tuple(children));
    bool plain = x.type().is(nb::handle(reinterpret_cast<PyObject*>(&PyTuple_Type)));
    return nb::make_tuple(tag("t"), nb::tuple(children), plain ? nb::none() : nb::borrow(x.type()));
  }
  if (nb::isinstance<nb::dict>(x)) {
    nb::list keys, children;
    for (auto [k, v] : nb::borrow<nb::dict>(x)) {
      keys.append(k);
      children.append(flatten_into(v, leaves, path + "[" + nb::repr(k).c_str() + "]", arrays));
    }
    return nb::make_tuple(tag("d"), nb::tuple(keys), nb::tuple(children));
  }
  if (leaves == Leaves::Arrays || (leaves == Leaves::Constants && !is_constant(x))) {
    std::string type = nb::type_name(x.type()).c_str();
    std::string valid = leaves == Leaves::Arrays
                            ? "an array or a list, tuple or dict of arrays"
                            : "arrays, lists, tuples or dicts of them, or constants (None, bool, "
                              "int, float, str)";
    throw nb::value_error((path + " is a " + type + "; expected " + valid).c_str());
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
    nb::handle type = t[2];
    if (type.is_none()) return nb::tuple(out);
    if (nb::hasattr(type, "_fields")) return type(*out);  // a named tuple
    return type(out);
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

Flat flatten(nb::handle tree, Leaves leaves, const char* what) {
  Flat f;
  f.structure = flatten_into(tree, leaves, what, f.arrays);
  return f;
}

namespace {
bool same_kind(nb::handle a, nb::handle b) {
  return (nb::isinstance<nb::dict>(a) && nb::isinstance<nb::dict>(b)) ||
         (nb::isinstance<nb::list>(a) && nb::isinstance<nb::list>(b)) ||
         (nb::isinstance<nb::tuple>(a) && nb::isinstance<nb::tuple>(b) && nb::len(a) == nb::len(b));
}
}  // namespace

// Containers present in both keep their identity (the user's nested dicts and lists, and lists
// like kiln.random.state that other code holds): they are updated in place, recursively.
void replace_contents(nb::handle tree, nb::handle like) {
  if (nb::isinstance<nb::dict>(tree) && nb::isinstance<nb::dict>(like)) {
    nb::dict d = nb::borrow<nb::dict>(tree), l = nb::borrow<nb::dict>(like);
    for (nb::handle k : nb::list(d.keys()))
      if (!l.contains(k)) PyDict_DelItem(d.ptr(), k.ptr());
    for (auto [k, v] : l) {
      if (d.contains(k) && same_kind(d[k], v))
        replace_contents(d[k], v);
      else
        d[k] = v;
    }
  } else if (nb::isinstance<nb::list>(tree) && nb::isinstance<nb::list>(like)) {
    nb::list t = nb::borrow<nb::list>(tree), l = nb::borrow<nb::list>(like);
    if (t.size() != l.size()) {
      PyList_SetSlice(t.ptr(), 0, PY_SSIZE_T_MAX, l.ptr());
      return;
    }
    for (size_t i = 0; i < t.size(); ++i) {
      if (same_kind(t[i], l[i]))
        replace_contents(t[i], l[i]);
      else
        t[i] = l[i];
    }
  } else if (same_kind(tree, like)) {  // tuples: their mutable children
    for (size_t i = 0; i < nb::len(tree); ++i) replace_contents(tree[i], like[i]);
  }
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
