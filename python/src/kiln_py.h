// Shared by the binding files: how Python values become Kiln arrays, dtypes and streams, and the
// per-concept init functions module.cpp calls. The bindings sit on top of every C++ layer; they
// add no semantics of their own beyond MLX's Python conventions (weak scalars, pytrees).
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <vector>

#include "kiln.h"

namespace nb = nanobind;

namespace kiln::py {

// The dtype a Python scalar or nested list gets without an explicit dtype (MLX's rules: bool ->
// bool, int -> int32 (int64 when a value needs it), float -> float32).
Array to_array(nb::handle obj, std::optional<Dtype> dtype = std::nullopt);
// An operand of a binary op: arrays as they are, Python scalars weak against `like` (x * 2.0
// keeps x's float16), anything array-like converted by to_array.
Array operand(nb::handle obj, const Array* like);
std::pair<Array, Array> operands(nb::handle a, nb::handle b);
bool is_python_scalar(nb::handle obj);
// None, a kiln.Stream, a kiln.Device or a device name ("opencl:0").
StreamOrDevice to_stream_or_device(nb::handle obj);
Dtype to_dtype(nb::handle obj);                       // a kiln.Dtype, or its name ("float32")
std::optional<Dtype> optional_dtype(nb::handle obj);  // None, or what to_dtype takes
std::vector<int> to_axes(nb::handle obj);             // an int or a sequence of ints

void init_dtypes(nb::module_& m);
void init_array(nb::module_& m);
void init_array_methods(nb::module_& m);  // after init_ops
void init_numpy(nb::module_& m, nb::class_<Array>& cls);
void init_indexing(nb::class_<Array>& cls);
void init_ops(nb::module_& m);
void init_devices(nb::module_& m);
void init_eval(nb::module_& m);
void init_aot(nb::module_& m);  // before init_compile, whose lower() returns a kiln.Lowered
void init_compile(nb::module_& m);
void init_jobs(nb::module_& m);
void init_cli(nb::module_& m);
void init_transforms(nb::module_& m);
void init_random(nb::module_& m);
void init_io(nb::module_& m);
void init_memory(nb::module_& m);  // memory.cpp: the cpu buffer pool's counters
void init_distributed(nb::module_& m);
void init_pending_work(nb::module_& m);  // pending_work.cpp

}  // namespace kiln::py
