#include "graph/array.h"

#include <atomic>
#include <cstring>

#include "graph/trace_state.h"

namespace kiln {

namespace {
std::atomic<uint64_t> g_next_id{1};
std::atomic<EvalHook> g_eval_hook{nullptr};

template <typename T, typename S>
void convert(const S* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
}

template <typename T>
void convert_from(Dtype d, const void* src, T* dst, int64_t n) {
  switch (d.kind) {
    case Dtype::Kind::Bool: convert(static_cast<const bool*>(src), dst, n); break;
    case Dtype::Kind::Int32: convert(static_cast<const int32_t*>(src), dst, n); break;
    case Dtype::Kind::Int64: convert(static_cast<const int64_t*>(src), dst, n); break;
    case Dtype::Kind::Float32: convert(static_cast<const float*>(src), dst, n); break;
    case Dtype::Kind::Float64: convert(static_cast<const double*>(src), dst, n); break;
  }
}
}  // namespace

ArrayNode::ArrayNode() : id(g_next_id.fetch_add(1, std::memory_order_relaxed)) {}

uint64_t next_node_id() { return g_next_id.load(std::memory_order_relaxed); }

ArrayNode::~ArrayNode() {
  // Take over the inputs that only this chain holds, so each is destroyed with empty inputs.
  std::vector<Array> pending = std::move(inputs);
  while (!pending.empty()) {
    Array a = std::move(pending.back());
    pending.pop_back();
    if (a.node().use_count() == 1) {
      auto& in = a.node()->inputs;
      for (auto& x : in) pending.push_back(std::move(x));
      in.clear();
    }
  }
}

Array::Array(Shape shape, Dtype dtype, Op op, Params params, std::vector<Array> inputs,
             ResolvedStream stream)
    : node_(std::make_shared<ArrayNode>()) {
  node_->shape = std::move(shape);
  node_->dtype = dtype;
  node_->op = op;
  node_->params = std::move(params);
  node_->inputs = std::move(inputs);
  node_->stream = std::move(stream);
}

Array::Array(Shape shape, Dtype dtype, std::shared_ptr<Buffer> data, ResolvedStream stream)
    : node_(std::make_shared<ArrayNode>()) {
  node_->shape = std::move(shape);
  node_->dtype = dtype;
  node_->op = Op::Constant;
  node_->data = std::move(data);
  node_->stream = std::move(stream);
  node_->ready.store(true, std::memory_order_release);
}

int64_t Array::shape(int axis) const {
  return node_->shape[normalize_axis(axis, ndim(), "Array::shape")];
}

void set_eval_hook(EvalHook hook) { g_eval_hook.store(hook); }

void eval_implicitly(const Array& a) {
  if (a.is_evaluated()) return;
  if (a.is_placeholder() || is_tracing())
    throw_error(
        "cannot read the values of an array while a compiled function is being traced: its "
        "inputs are placeholders with a shape and dtype but no data. Return the array from the "
        "function and read it after the call, or run the function eagerly (disable_compile()).");
  auto hook = g_eval_hook.load();
  if (!hook) throw_error("no evaluator is linked into this program (link kiln::kiln)");
  hook({a});
}

const std::shared_ptr<Buffer>& Array::buffer() const {
  eval_implicitly(*this);
  if (node_->error) std::rethrow_exception(node_->error);
  return node_->data;
}

void read_data(const Array& a, void* dst) {
  const auto& buf = a.buffer();
  if (a.nbytes() > 0) buf->read(dst, 0, a.nbytes());
}

template <typename T>
std::vector<T> Array::to_vector() const {
  std::vector<unsigned char> raw(nbytes());
  read_data(*this, raw.data());
  std::vector<T> out(static_cast<size_t>(size()));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<char> tmp(out.size());
    convert_from(dtype(), raw.data(), tmp.data(), size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = tmp[i] != 0;
  } else {
    convert_from(dtype(), raw.data(), out.data(), size());
  }
  return out;
}

template <typename T>
T Array::item() const {
  if (size() != 1)
    throw_error("item: array of shape ", shape(), " has ", size(),
                " elements; item() needs exactly one (use to_vector())");
  return to_vector<T>()[0];
}

template std::vector<bool> Array::to_vector<bool>() const;
template std::vector<int32_t> Array::to_vector<int32_t>() const;
template std::vector<int64_t> Array::to_vector<int64_t>() const;
template std::vector<float> Array::to_vector<float>() const;
template std::vector<double> Array::to_vector<double>() const;
template bool Array::item<bool>() const;
template int32_t Array::item<int32_t>() const;
template int64_t Array::item<int64_t>() const;
template float Array::item<float>() const;
template double Array::item<double>() const;

}  // namespace kiln
