#include "graph/array.h"

#include <atomic>
#include <cstring>

#include "graph/array_node.h"
#include "graph/element.h"
#include "graph/trace_state.h"

namespace kiln {

namespace {
std::atomic<uint64_t> g_next_id{1};
std::atomic<EvalHook> g_eval_hook{nullptr};

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

Array::Array(std::shared_ptr<ArrayNode> node) : node_(std::move(node)) {
  if (!node_) throw_error("Array: a null node handle (make arrays with the ops in ops.h)");
}

Array make_array(Shape shape, Dtype dtype, Op op, Params params, std::vector<Array> inputs,
                 ResolvedStream stream) {
  auto n = std::make_shared<ArrayNode>();
  n->shape = std::move(shape);
  n->dtype = dtype;
  n->op = op;
  n->params = std::move(params);
  n->inputs = std::move(inputs);
  n->stream = std::move(stream);
  return Array(std::move(n));
}

Array make_array(Shape shape, Dtype dtype, std::shared_ptr<Buffer> data, ResolvedStream stream) {
  auto n = std::make_shared<ArrayNode>();
  n->shape = std::move(shape);
  n->dtype = dtype;
  n->op = Op::Constant;
  n->data = std::move(data);
  n->stream = std::move(stream);
  n->ready.store(true, std::memory_order_release);
  return Array(std::move(n));
}

const Shape& Array::shape() const { return node_->shape; }
int64_t Array::shape(int axis) const {
  return node_->shape[normalize_axis(axis, ndim(), "Array::shape")];
}
Dtype Array::dtype() const { return node_->dtype; }
int Array::ndim() const { return static_cast<int>(node_->shape.size()); }
int64_t Array::size() const { return shape_size(node_->shape); }
size_t Array::nbytes() const { return static_cast<size_t>(size()) * node_->dtype.size(); }
Stream Array::stream() const { return node_->stream.stream; }
Device Array::device() const { return node_->stream.stream.device; }
bool Array::is_evaluated() const { return node_->ready.load(std::memory_order_acquire); }
bool Array::is_placeholder() const { return node_->op == Op::Placeholder; }
uint64_t Array::id() const { return node_->id; }

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

const std::shared_ptr<Buffer>& array_buffer(const Array& a) {
  eval_implicitly(a);
  if (a.node()->error) std::rethrow_exception(a.node()->error);
  return a.node()->data;
}

void read_data(const Array& a, void* dst) {
  const auto& buf = array_buffer(a);
  if (a.nbytes() > 0) buf->read(dst, 0, a.nbytes());
}

// Elements converted to T by Kiln's cast rules (graph/element.h): to_vector<T>() reads what
// astype(dtype_of<T>()) would compute.
template <typename T>
std::vector<T> Array::to_vector() const {
  std::vector<unsigned char> raw(nbytes());
  read_data(*this, raw.data());
  Dtype from = dtype(), to = dtype_of<T>();
  std::vector<T> out;
  out.reserve(static_cast<size_t>(size()));
  for (int64_t i = 0; i < size(); ++i) {
    scalar::Val v = scalar::cast(scalar::load(raw.data(), from, i), from, to);
    if constexpr (std::is_floating_point_v<T>)
      out.push_back(static_cast<T>(v.f));
    else
      out.push_back(static_cast<T>(v.i));
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

#define KILN_INSTANTIATE_READ(T)                       \
  template std::vector<T> Array::to_vector<T>() const; \
  template T Array::item<T>() const;
KILN_INSTANTIATE_READ(bool)
KILN_INSTANTIATE_READ(int8_t)
KILN_INSTANTIATE_READ(int32_t)
KILN_INSTANTIATE_READ(int64_t)
KILN_INSTANTIATE_READ(uint8_t)
KILN_INSTANTIATE_READ(uint32_t)
KILN_INSTANTIATE_READ(uint64_t)
KILN_INSTANTIATE_READ(float)
KILN_INSTANTIATE_READ(double)
#undef KILN_INSTANTIATE_READ

}  // namespace kiln
