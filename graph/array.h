// Array: a lazy handle to a node of the array graph. Ops build nodes; nothing runs until the
// array is evaluated (eval, item, to_vector). Copies of an Array share one node.
// The node itself (graph/array_node.h: its primitive, inputs, data, error, evaluation state) is
// Kiln's own: here it is only declared, so code that includes kiln.h cannot reach it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graph/device.h"
#include "graph/dtype.h"
#include "graph/error.h"
#include "graph/shape.h"

namespace kiln {

struct ArrayNode;  // defined in graph/array_node.h, internal to the library

class Array {
 public:
  // A handle to an existing node; raises kiln::Error for a null one. Arrays are made by the ops
  // in ops.h (array(), zeros(), ...); only the library has nodes to pass here.
  explicit Array(std::shared_ptr<ArrayNode> node);

  const Shape& shape() const;
  int64_t shape(int axis) const;
  Dtype dtype() const;
  int ndim() const;
  int64_t size() const;
  size_t nbytes() const;
  Stream stream() const;
  Device device() const;

  bool is_evaluated() const;
  bool is_placeholder() const;  // a traced input of a compiled function (no values)

  // Evaluate if needed and read the single element / all elements converted to T.
  template <typename T>
  T item() const;
  template <typename T>
  std::vector<T> to_vector() const;

  // As NumPy and MLX print it: "array([[1, 2],\n       [3, 4]], dtype=int32)" (evaluates it;
  // past 1000 elements each axis shows its first and last three entries).
  std::string str() const;

  // Identity: a number unique to the node (stable ordering and names), and node equality.
  uint64_t id() const;
  bool same(const Array& o) const { return node_ == o.node_; }

  // The node, opaque outside the library (graph/array_node.h defines it).
  const std::shared_ptr<ArrayNode>& node() const { return node_; }

 private:
  std::shared_ptr<ArrayNode> node_;
};

std::ostream& operator<<(std::ostream& os, const Array& a);  // a.str()

}  // namespace kiln
