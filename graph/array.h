// Array: a lazy handle to a node of the array graph. Ops build nodes; nothing runs until the
// array is evaluated (eval, item, to_vector). Copies of an Array share one node.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "graph/buffer.h"
#include "graph/device.h"
#include "graph/dtype.h"
#include "graph/error.h"
#include "graph/primitives.h"
#include "graph/shape.h"

namespace kiln {

class Array;

struct ArrayNode {
  Shape shape;
  Dtype dtype;
  ResolvedStream stream;  // where it runs, and whether that was chosen explicitly
  Op op = Op::Constant;
  Params params;
  std::vector<Array> inputs;  // dropped once evaluated, so the graph behind it can be freed

  // Set once evaluated: row-major contiguous data, or the error that stopped evaluation.
  std::shared_ptr<Buffer> data;
  std::exception_ptr error;
  bool in_flight = false;  // being computed by some eval (guarded by eval's lock)
  // Set (release) once data or error is final; readers that see it need no lock.
  std::atomic<bool> ready{false};
  uint64_t id;  // unique per node, for stable ordering and text names

  ArrayNode();
  ~ArrayNode();  // iterative: dropping a long chain must not recurse once per node
  ArrayNode(const ArrayNode&) = delete;
  ArrayNode& operator=(const ArrayNode&) = delete;
};

class Array {
 public:
  // A node built by an op. Most users create arrays with array(), zeros(), ... in ops.h.
  Array(Shape shape, Dtype dtype, Op op, Params params, std::vector<Array> inputs,
        ResolvedStream stream);
  // An evaluated array over existing data.
  Array(Shape shape, Dtype dtype, std::shared_ptr<Buffer> data, ResolvedStream stream);
  // A handle to an existing node.
  explicit Array(std::shared_ptr<ArrayNode> node) : node_(std::move(node)) {
    if (!node_) throw_error("Array: a null node handle (make arrays with the ops in ops.h)");
  }

  const Shape& shape() const { return node_->shape; }
  int64_t shape(int axis) const;
  Dtype dtype() const { return node_->dtype; }
  int ndim() const { return static_cast<int>(node_->shape.size()); }
  int64_t size() const { return shape_size(node_->shape); }
  size_t nbytes() const { return static_cast<size_t>(size()) * dtype().size(); }
  Stream stream() const { return node_->stream.stream; }
  Device device() const { return node_->stream.stream.device; }

  bool is_evaluated() const { return node_->ready.load(std::memory_order_acquire); }
  bool is_placeholder() const { return node_->op == Op::Placeholder; }

  // Evaluate if needed and read the single element / all elements converted to T.
  template <typename T>
  T item() const;
  template <typename T>
  std::vector<T> to_vector() const;

  // The evaluated buffer (evaluating first); rethrows the error evaluation stored.
  const std::shared_ptr<Buffer>& buffer() const;

  const std::shared_ptr<ArrayNode>& node() const { return node_; }
  uint64_t id() const { return node_->id; }
  bool same(const Array& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<ArrayNode> node_;
};

// The id the next node will get: nodes with smaller ids existed before this call.
uint64_t next_node_id();

// The evaluation entry point lives in compile/; it registers itself here so that item() and
// to_vector() can evaluate without graph/ including a higher layer.
using EvalHook = void (*)(const std::vector<Array>&);
void set_eval_hook(EvalHook hook);
void eval_implicitly(const Array& a);

// Reads the raw contiguous data of an evaluated array into `dst` (nbytes() bytes).
void read_data(const Array& a, void* dst);

}  // namespace kiln
