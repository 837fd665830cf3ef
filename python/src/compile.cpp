// kiln.compile over Python functions. Arguments are pytrees: their arrays are the compiled
// function's inputs; everything else (ints, strings, the tree's shape) selects a C++
// CompiledFunction of its own, so non-array arguments are part of the cache key as in MLX. The
// C++ side keys each on dtypes and shapes and follows the caller's stream at every call.
// Captured `inputs` / `outputs` pytrees are flattened into the containers the C++ compile reads
// and writes at each call, and their leaves written back into the Python objects afterwards.
#include <nanobind/stl/string.h>

#include <mutex>
#include <optional>

#include "aot.h"
#include "graph/trace_state.h"
#include "tree.h"

namespace kiln::py {
namespace {

using namespace nb::literals;

// A Python exception raised inside a trace, carried through the C++ compile as this.
struct PythonErrorInTrace : std::exception {
  const char* what() const noexcept override { return "a Python exception in a traced function"; }
};

struct PyCompiled {
  nb::object fun = nb::none(), inputs = nb::none(), outputs = nb::none();
  bool shapeless = false;
  struct Entry {
    CompiledFunction cf;
    nb::object out_structure;    // the result's tree, recorded by the trace
    nb::object state_structure;  // the `outputs` tree the trace left
  };
  nb::dict index;  // argument structure -> position in entries
  std::vector<std::unique_ptr<Entry>> entries;
  std::vector<Array> in_state, out_state;  // the containers CompileOptions points at
  std::mutex state_mu;  // one set of containers: calls with captured state run one at a time
  std::unique_ptr<nb::python_error> trace_error;  // set (under the GIL) when a trace raised

  // Runs `fun` over traced arrays; C++ calls it only while tracing. The captured containers
  // hold placeholders meanwhile and get their contents back afterwards; what `fun` left in
  // `outputs` is recorded (its arrays for C++, its shape for the write-back after each call).
  std::vector<Array> trace(Entry& e, const nb::object& structure, const std::vector<Array>& ph) {
    nb::gil_scoped_acquire gil;
    nb::object saved_in = snapshot(inputs), saved_out = snapshot(outputs);
    auto restore = [&] {
      if (!outputs.is_none()) replace_contents(outputs, saved_out);
      if (!inputs.is_none()) replace_contents(inputs, saved_in);
    };
    try {
      if (!inputs.is_none()) assign_leaves(inputs, in_state);  // placeholders now
      nb::tuple call = nb::borrow<nb::tuple>(unflatten(structure, ph));
      nb::object result = fun(*call[0], **call[1]);
      Flat r = flatten(result, Leaves::Constants, "the compiled function's result");
      e.out_structure = r.structure;
      if (!outputs.is_none()) {
        Flat o = flatten(outputs, Leaves::Any, "outputs");
        e.state_structure = o.structure;
        output_container() = std::move(o.arrays);
      }
      restore();
      return r.arrays;
    } catch (nb::python_error& err) {
      restore();
      trace_error = std::make_unique<nb::python_error>(err);
      throw PythonErrorInTrace();
    } catch (...) {
      restore();
      throw;
    }
  }

  // A copy of the tree's containers (the arrays shared), to put back with replace_contents.
  static nb::object snapshot(const nb::object& tree) {
    if (tree.is_none()) return nb::none();
    Flat f = flatten(tree, Leaves::Any);
    return unflatten(f.structure, f.arrays);
  }

  // The common call, f(array, array, ...) without captured inputs, skips building the key: its
  // entry is remembered per argument count.
  std::vector<Entry*> fast;  // by number of positional array arguments
  Entry* fast_entry(const nb::args& args, const nb::kwargs& kwargs, Flat& flat) {
    if (!inputs.is_none() || kwargs.size() != 0 || args.size() >= fast.size() || !fast[args.size()])
      return nullptr;
    for (nb::handle h : args)
      if (!nb::isinstance<Array>(h)) return nullptr;
    for (nb::handle h : args) flat.arrays.push_back(nb::cast<Array>(h));
    return fast[args.size()];
  }
  void remember_fast(size_t n, Entry* e) {
    if (fast.size() <= n) fast.resize(n + 1, nullptr);
    fast[n] = e;
  }

  Entry& entry_for(const nb::object& key) {
    if (index.contains(key)) return *entries[nb::cast<size_t>(index[key])];
    auto e = std::make_unique<Entry>();
    CompileOptions opts;
    opts.shapeless = shapeless;
    if (!inputs.is_none()) opts.inputs.push_back(&in_state);
    if (!outputs.is_none()) opts.outputs.push_back(&output_container());
    Entry* raw = e.get();
    nb::object args_structure = key[0];
    e->cf = compile([this, raw, args_structure](
                        const std::vector<Array>& ph) { return trace(*raw, args_structure, ph); },
                    std::move(opts));
    index[key] = entries.size();
    entries.push_back(std::move(e));
    return *entries.back();
  }

  // The entry for these arguments (tracing nothing yet), their arrays in `flat`.
  Entry& entry_for_args(const nb::args& args, const nb::kwargs& kwargs, Flat& flat,
                        bool full_structure) {
    if (!full_structure)
      if (Entry* found = fast_entry(args, kwargs, flat)) return *found;
    flat = flatten(nb::make_tuple(args, kwargs), Leaves::Constants, "compile: an argument");
    // The captured inputs' shape is part of the key: a trace serves one shape of the state.
    // Leaves that are not arrays (a module's stride tuple, a list of ints) are kept as they are
    // and not captured, as MLX skips them; their values are part of the key.
    Flat state_in{{}, nb::none()};
    if (!inputs.is_none()) state_in = flatten(inputs, Leaves::Any, "inputs");
    Entry& e = entry_for(nb::make_tuple(flat.structure, state_in.structure));
    bool all_arrays = true;
    for (nb::handle h : args) all_arrays = all_arrays && nb::isinstance<Array>(h);
    if (inputs.is_none() && kwargs.size() == 0 && all_arrays) remember_fast(args.size(), &e);
    return e;
  }

  bool stateful() const { return !inputs.is_none() || !outputs.is_none(); }
  // inputs and outputs are one tree (MLX's `state = [model.state, optimizer.state]` passed as
  // both): C++ gets one container, as a C++ training step passes one vector for both, so the
  // step's write-back lets go of the old state and the plan may write the new state into its
  // memory (buffer donation).
  bool shared() const { return !inputs.is_none() && inputs.is(outputs); }
  std::vector<Array>& output_container() { return shared() ? in_state : out_state; }

  // The state arrays the Python tree holds are swapped for one placeholder while a step runs,
  // so that only the C++ container holds them and the plan can donate their memory (an array
  // the user still holds elsewhere is kept, and not donated). After the step the tree gets the
  // new state, or the old one back if the step failed.
  void detach_state() {
    Array stand_in = zeros({}, float32);  // a graph node, never evaluated: no memory
    assign_leaves(inputs, std::vector<Array>(in_state.size(), stand_in));
  }

  // Runs `fn` (the C++ function, its lowering, or an executable of it) with the GIL released,
  // the captured inputs loaded into the containers C++ reads; afterwards writes `outputs` back
  // in the tree `write_back` (the one the trace left), unless it is null. A Python exception
  // raised by a trace inside `fn` propagates unchanged.
  std::vector<Array> run(const std::vector<Array>& args, const ArrayFn& fn,
                         const nb::object* write_back) {
    std::unique_lock<std::mutex> lock(state_mu, std::defer_lock);
    if (stateful()) {
      nb::gil_scoped_release release;
      lock.lock();
    }
    nb::object in_structure = nb::none();
    if (!inputs.is_none()) {
      Flat f = flatten(inputs, Leaves::Any, "inputs");
      in_structure = f.structure;
      in_state = std::move(f.arrays);
    }
    if (!outputs.is_none() && !shared())
      out_state = flatten(outputs, Leaves::Any, "outputs").arrays;
    bool detached = shared() && write_back;
    if (detached) detach_state();
    // A failed step: the tree gets back what C++ left in the container (the old state, or the
    // failed outputs that raise when read, as in C++).
    auto reattach = [&] {
      if (detached) replace_contents(inputs, unflatten(in_structure, in_state));
    };
    std::vector<Array> result;
    bool failed_in_python = false;
    try {
      nb::gil_scoped_release release;
      try {
        result = fn(args);
      } catch (const PythonErrorInTrace&) {
        failed_in_python = true;
      }
    } catch (...) {
      reattach();
      in_state.clear();
      out_state.clear();
      throw;
    }
    if (failed_in_python) {
      reattach();
      in_state.clear();
      out_state.clear();
      std::unique_ptr<nb::python_error> err = std::move(trace_error);
      err->restore();
      throw nb::python_error();
    }
    if (!outputs.is_none() && write_back)
      replace_contents(outputs, unflatten(*write_back, output_container()));
    in_state.clear();
    out_state.clear();
    return result;
  }

  nb::object call(nb::args args, nb::kwargs kwargs) {
    // Inside a trace, a transform or with compile disabled the function runs as Python.
    if (!compile_enabled() || is_tracing() || in_transform()) return fun(*args, **kwargs);
    Flat flat;
    Entry& e = entry_for_args(args, kwargs, flat, false);
    std::vector<Array> result = run(
        flat.arrays, [&](const std::vector<Array>& a) { return e.cf(a); }, &e.state_structure);
    return unflatten(e.out_structure, result);
  }

  // f.lower(*args): traces (or takes the cached trace) and lowers; runs nothing.
  nb::object lower(nb::handle self, nb::args args, nb::kwargs kwargs) {
    if (is_tracing() || in_transform())
      throw Error("lower: called inside a trace or a transform; lower outside them");
    Flat flat;
    Entry& e = entry_for_args(args, kwargs, flat, true);
    std::optional<Lowered> lowered;
    run(
        flat.arrays,
        [&](const std::vector<Array>& a) {
          lowered.emplace(e.cf.lower(a));
          return std::vector<Array>{};
        },
        nullptr);
    Stage stage;
    stage.args_structure = flat.structure;
    stage.out_structure = e.out_structure;
    bool all_arrays = kwargs.size() == 0;
    for (nb::handle h : args) all_arrays = all_arrays && nb::isinstance<Array>(h);
    if (all_arrays) stage.positional_arrays = static_cast<int>(args.size());
    if (stateful()) {
      stage.owner = nb::borrow(self);
      stage.state_structure = e.state_structure;
    }
    return make_lowered(std::move(*lowered), std::move(stage));
  }
};

int traverse(PyObject* self, visitproc visit, void* arg) {
  if (!nb::inst_ready(self)) return 0;
  PyCompiled* c = nb::inst_ptr<PyCompiled>(self);
  Py_VISIT(c->fun.ptr());
  Py_VISIT(c->inputs.ptr());
  Py_VISIT(c->outputs.ptr());
  Py_VISIT(c->index.ptr());
  for (auto& e : c->entries) {
    Py_VISIT(e->out_structure.ptr());
    Py_VISIT(e->state_structure.ptr());
  }
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int clear(PyObject* self) {
  PyCompiled* c = nb::inst_ptr<PyCompiled>(self);
  c->fun = nb::none();
  c->inputs = nb::none();
  c->outputs = nb::none();
  c->index.clear();
  c->fast.clear();
  c->entries.clear();
  return 0;
}

PyType_Slot slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(traverse)},
                       {Py_tp_clear, reinterpret_cast<void*>(clear)},
                       {0, nullptr}};

}  // namespace

std::vector<Array> run_with_state(const Stage& stage, const std::vector<Array>& args,
                                  const ArrayFn& run) {
  PyCompiled& c = nb::cast<PyCompiled&>(stage.owner);
  if (c.fun.is_none())
    throw Error("this executable's compiled function was cleared by the garbage collector");
  return c.run(args, run, &stage.state_structure);
}

void init_compile(nb::module_& m) {
  // Subclassed in python/kiln/__init__.py, whose instances carry the wrapped function's
  // __name__, __doc__ and signature (functools.update_wrapper).
  auto cls = nb::class_<PyCompiled>(m, "CompiledFunction", nb::type_slots(slots));
  cls.def(
         "__init__",
         [](PyCompiled* self, nb::object fun, nb::object inputs, nb::object outputs,
            bool shapeless) {
           if (!PyCallable_Check(fun.ptr())) throw nb::type_error("compile: fun is not callable");
           new (self) PyCompiled();
           self->fun = fun;
           self->inputs = inputs;
           self->outputs = outputs;
           self->shapeless = shapeless;
         },
         "fun"_a, "inputs"_a = nb::none(), "outputs"_a = nb::none(), "shapeless"_a = false)
      .def("__call__", &PyCompiled::call)
      .def_prop_ro(
          "cache_size",
          [](const PyCompiled& c) {
            size_t n = 0;
            for (auto& e : c.entries) n += e->cf.cache_size();
            return n;
          },
          "How many times the function has been traced.");
  cls.def(
      "lower",
      [](nb::handle self, nb::args args, nb::kwargs kwargs) {
        return nb::cast<PyCompiled&>(self).lower(self, args, kwargs);
      },
      "Traces for these arguments (or takes the cached trace) and lowers, running nothing: a "
      "kiln.Lowered (as_text, cost_analysis, compile). Only the arrays' dtypes and shapes and "
      "the non-array arguments matter.");
  m.def("disable_compile", [] { disable_compile(); });
  m.def("enable_compile", [] { enable_compile(); });
  m.def("compile_enabled", [] { return compile_enabled(); });
}

}  // namespace kiln::py
