// NumPy / DLPack / buffer-protocol interop (numpy_bridge.h) and the array methods built on it.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "executor/cancel.h"
#include "executor/in_flight.h"
#include "graph/array_node.h"
#include "numpy_bridge.h"

namespace kiln::py {
namespace {

namespace dl = nb::dlpack;

std::optional<Dtype> dtype_of_dlpack(dl::dtype t) {
  using C = dl::dtype_code;
  if (t.lanes != 1) return std::nullopt;
  auto code = static_cast<C>(t.code);
  if (code == C::Bool && t.bits == 8) return bool_;
  if (code == C::Int) {
    if (t.bits == 8) return int8;
    if (t.bits == 32) return int32;
    if (t.bits == 64) return int64;
  }
  if (code == C::UInt) {
    if (t.bits == 8) return uint8;
    if (t.bits == 32) return uint32;
    if (t.bits == 64) return uint64;
  }
  if (code == C::Float) {
    if (t.bits == 16) return float16;
    if (t.bits == 32) return float32;
    if (t.bits == 64) return float64;
  }
  if (code == C::Bfloat && t.bits == 16) return bfloat16;
  return std::nullopt;
}

dl::dtype dlpack_of(Dtype d) {
  using C = dl::dtype_code;
  auto make = [](C c, int bits) {
    return dl::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1};
  };
  switch (d.kind) {
    case Dtype::Kind::Bool: return make(C::Bool, 8);
    case Dtype::Kind::Int8: return make(C::Int, 8);
    case Dtype::Kind::Int32: return make(C::Int, 32);
    case Dtype::Kind::Int64: return make(C::Int, 64);
    case Dtype::Kind::UInt8: return make(C::UInt, 8);
    case Dtype::Kind::UInt32: return make(C::UInt, 32);
    case Dtype::Kind::UInt64: return make(C::UInt, 64);
    case Dtype::Kind::Float16: return make(C::Float, 16);
    case Dtype::Kind::BFloat16: return make(C::Bfloat, 16);
    case Dtype::Kind::Float32: return make(C::Float, 32);
    case Dtype::Kind::Float64: return make(C::Float, 64);
  }
  return make(C::Float, 32);
}

// Copies a strided array (strides in elements) into contiguous row-major `dst`.
void copy_strided(const char* src, char* dst, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, size_t item, size_t axis, size_t& out) {
  if (axis == shape.size()) {
    std::memcpy(dst + out, src, item);
    out += item;
    return;
  }
  for (int64_t i = 0; i < shape[axis]; ++i)
    copy_strided(src + i * strides[axis] * static_cast<int64_t>(item), dst, shape, strides, item,
                 axis + 1, out);
}

Array from_ndarray(const nb::ndarray<nb::ro>& t, std::optional<Dtype> as) {
  if (t.device_type() != nb::device::cpu::value)
    throw nb::value_error(
        "kiln.array: the DLPack tensor is not in host memory; copy it to the host first");
  auto d = as ? as : dtype_of_dlpack(t.dtype());
  if (!d)
    throw nb::type_error(
        "kiln.array: unsupported element type (Kiln has bool, int8/32/64, uint8/32/64, float16, "
        "bfloat16, float32, float64; no int16, uint16 or complex: convert with astype first)");
  Shape shape;
  std::vector<int64_t> strides;
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t i = t.ndim(); i-- > 0;) {
    int64_t n = static_cast<int64_t>(t.shape(i));
    if (n != 1 && t.stride_ptr() && t.stride(i) != expect) contiguous = false;
    expect *= n;
  }
  for (size_t i = 0; i < t.ndim(); ++i) {
    shape.push_back(static_cast<int64_t>(t.shape(i)));
    strides.push_back(t.stride_ptr() ? t.stride(i) : 0);
  }
  size_t item = d->size();
  size_t nbytes = static_cast<size_t>(expect) * item;
  if (contiguous) return array_from_bytes(t.data(), nbytes, shape, *d);
  std::vector<char> buf(nbytes);
  size_t out = 0;
  if (nbytes)
    copy_strided(static_cast<const char*>(t.data()), buf.data(), shape, strides, item, 0, out);
  return array_from_bytes(buf.data(), nbytes, shape, *d);
}

bool is_numpy_bfloat16(nb::handle obj) {
  if (!nb::hasattr(obj, "dtype") || !nb::hasattr(obj, "view")) return false;
  nb::object dt = obj.attr("dtype");
  return nb::hasattr(dt, "name") && nb::str(dt.attr("name")).equal(nb::str("bfloat16"));
}

// PEP 3118 format codes; bfloat16 has none (NumPy then falls back to __array__).
const char* buffer_format(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool: return "?";
    case Dtype::Kind::Int8: return "b";
    case Dtype::Kind::Int32: return "i";
    case Dtype::Kind::Int64: return "q";
    case Dtype::Kind::UInt8: return "B";
    case Dtype::Kind::UInt32: return "I";
    case Dtype::Kind::UInt64: return "Q";
    case Dtype::Kind::Float16: return "e";
    case Dtype::Kind::Float32: return "f";
    case Dtype::Kind::Float64: return "d";
    case Dtype::Kind::BFloat16: return nullptr;
  }
  return nullptr;
}

// What a buffer view needs to outlive the call: its shape and strides.
struct BufferInfo {
  std::vector<Py_ssize_t> shape, strides;
};

int get_buffer(PyObject* self, Py_buffer* view, int flags) {
  view->obj = nullptr;
  try {
    if (flags & PyBUF_WRITABLE)
      throw std::runtime_error("kiln arrays are immutable: their buffers are read-only");
    const Array& a = *nb::inst_ptr<Array>(self);
    const char* format = buffer_format(a.dtype());
    if (!format)
      throw std::runtime_error("bfloat16 has no buffer format (np.asarray uses __array__)");
    wait_for({a});
    std::shared_ptr<Buffer> buf = array_buffer(a);
    if (!buf->host_ptr() && a.nbytes())
      throw std::runtime_error("the array lives on " + a.device().str() +
                               ", not in host memory; np.array(a) copies it out");
    auto info = std::make_unique<BufferInfo>();
    Py_ssize_t stride = static_cast<Py_ssize_t>(a.dtype().size());
    info->shape.assign(a.shape().begin(), a.shape().end());
    info->strides.resize(info->shape.size());
    for (size_t i = info->shape.size(); i-- > 0;) {
      info->strides[i] = stride;
      stride *= info->shape[i];
    }
    // The view holds a reference to the array (view->obj), whose evaluated buffer never changes.
    view->buf = buf->host_ptr();
    Py_INCREF(self);
    view->obj = self;
    view->len = static_cast<Py_ssize_t>(a.nbytes());
    view->readonly = 1;
    view->itemsize = static_cast<Py_ssize_t>(a.dtype().size());
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(format) : nullptr;
    view->ndim = a.ndim();
    view->shape = (flags & PyBUF_ND) ? info->shape.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) ? info->strides.data() : nullptr;
    view->suboffsets = nullptr;
    view->internal = info.release();
    return 0;
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  }
  return -1;
}

void release_buffer(PyObject*, Py_buffer* view) {
  std::unique_ptr<BufferInfo>(static_cast<BufferInfo*>(view->internal));
}

}  // namespace

PyType_Slot array_buffer_slots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(get_buffer)},
                                    {Py_bf_releasebuffer, reinterpret_cast<void*>(release_buffer)},
                                    {0, nullptr}};

std::optional<Array> from_array_like(nb::handle obj) {
  if (is_numpy_bfloat16(obj)) {  // ml_dtypes' bfloat16: its bits as uint16, read as bfloat16
    nb::object u16 = nb::module_::import_("numpy").attr("uint16");
    nb::ndarray<nb::ro> t = nb::cast<nb::ndarray<nb::ro>>(obj.attr("view")(u16));
    return from_ndarray(t, bfloat16);
  }
  nb::ndarray<nb::ro> t;
  if (!nb::try_cast(obj, t)) return std::nullopt;
  return from_ndarray(t, std::nullopt);
}

void wait_for(const std::vector<Array>& arrays) {
  bool all = true;
  for (const Array& a : arrays) all = all && a.is_evaluated();
  if (!all) {
    auto token = std::make_shared<CancelToken>();
    // Ctrl-C while Kiln waits inside async_eval (for work in flight an input needs): the wait
    // polls this on this thread, which gives up and raises (the pending KeyboardInterrupt).
    token->set_poll([](std::string* why) {
      nb::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() == 0) return false;
      *why = "interrupted (KeyboardInterrupt)";
      return true;
    });
    try {
      nb::gil_scoped_release release;
      CancelScope scope(token);
      async_eval(arrays);
    } catch (const Error&) {
      if (token->cancelled() && PyErr_Occurred()) throw nb::python_error();
      throw;
    }
    // Poll so that Ctrl-C (delivered to the main thread as a pending signal) is seen while the
    // work runs: first by yielding for up to 200 µs (small work finishes within that, and a
    // sleep would cost more than the work), then sleeping from 50 µs up to 20 ms.
    auto ready = [&] {
      for (const Array& a : arrays)
        if (!a.is_evaluated()) return false;
      return true;
    };
    {
      nb::gil_scoped_release release;
      auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      while (!ready() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    }
    auto pause = std::chrono::microseconds(50);
    BlockedScope blocked("arrays evaluated for Python");
    for (;;) {
      if (ready()) break;
      if (PyErr_CheckSignals() != 0) {
        // Tasks not started stop at their boundary; the caller gets KeyboardInterrupt at once,
        // without waiting for work already on a device (it may be what is stuck). The arrays
        // stay in flight and hold their buffers until that work ends.
        token->cancel("interrupted (KeyboardInterrupt)");
        throw nb::python_error();
      }
      {
        nb::gil_scoped_release release;
        std::this_thread::sleep_for(pause);
      }
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
  }
  nb::gil_scoped_release release;
  eval(arrays);  // raises the first error among them
}

nb::object to_numpy(const Array& a, bool copy) {
  wait_for({a});
  std::shared_ptr<Buffer> buf = array_buffer(a);
  std::vector<size_t> shape(a.shape().begin(), a.shape().end());
  bool bf16 = a.dtype() == bfloat16;
  // bfloat16 leaves as its bits (uint16) and is viewed as ml_dtypes' bfloat16 below.
  dl::dtype dt = bf16 ? dlpack_of(uint8) : dlpack_of(a.dtype());
  if (bf16) dt.bits = 16;
  nb::object out;
  if (!copy && buf->host_ptr()) {
    // The capsule owns a reference to the buffer: the view keeps it alive after `a` is gone.
    auto keep = std::make_unique<std::shared_ptr<Buffer>>(buf);
    nb::capsule owner(keep.release(), [](void* p) noexcept {
      std::unique_ptr<std::shared_ptr<Buffer>>(static_cast<std::shared_ptr<Buffer>*>(p));
    });
    nb::ndarray<nb::numpy, nb::ro> view(buf->host_ptr(), shape.size(), shape.data(), owner, nullptr,
                                        dt);
    out = nb::cast(view, nb::rv_policy::reference);
  } else {
    auto bytes = std::make_unique<std::vector<char>>(a.nbytes());
    if (a.nbytes()) buf->read(bytes->data(), 0, a.nbytes());
    char* data = bytes->data();
    nb::capsule owner(bytes.release(), [](void* p) noexcept {
      std::unique_ptr<std::vector<char>>(static_cast<std::vector<char>*>(p));
    });
    nb::ndarray<nb::numpy> arr(data, shape.size(), shape.data(), owner, nullptr, dt);
    out = nb::cast(arr, nb::rv_policy::reference);
  }
  if (bf16) {
    nb::object ml;
    try {
      ml = nb::module_::import_("ml_dtypes");
    } catch (nb::python_error&) {
      throw nb::type_error(
          "a bfloat16 array needs ml_dtypes to become a NumPy array (pip install ml_dtypes), or "
          "convert it first: a.astype(kiln.float32)");
    }
    out = out.attr("view")(ml.attr("bfloat16"));
  }
  return out;
}

void init_numpy(nb::module_& m, nb::class_<Array>& cls) {
  cls.def(
      "__array__",
      [](const Array& a, nb::handle dtype, std::optional<bool> copy) {
        nb::object out = to_numpy(a, copy.value_or(false));
        if (!dtype.is_none()) out = out.attr("astype")(dtype);
        return out;
      },
      nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none());
  cls.def("__dlpack__", [](const Array& a, nb::kwargs kwargs) {
    // nanobind's own tensor object exports DLPack (NumPy refuses read-only exports).
    wait_for({a});
    nb::object np = to_numpy(a, false);
    nb::ndarray<nb::ro> t = nb::cast<nb::ndarray<nb::ro>>(
        a.dtype() == bfloat16 ? np.attr("view")(nb::module_::import_("numpy").attr("uint16")) : np);
    return nb::cast(t).attr("__dlpack__")(**kwargs);
  });
  cls.def("__dlpack_device__", [](const Array&) { return nb::make_tuple(1, 0); });
  m.def(
      "from_dlpack", [](nb::handle x) { return to_array(x); }, nb::arg("x"),
      "An array from any object with __dlpack__ (one copy into Kiln's memory).");
}

}  // namespace kiln::py
