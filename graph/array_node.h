// The array graph's node: what an op recorded (primitive, parameters, inputs, shape, dtype,
// stream) and what evaluation made of it (data or error). Internal to Kiln: graph/array.h only
// declares ArrayNode, so users of kiln.h hold Arrays but cannot read or change node state, as
// MLX keeps its ArrayDesc private. Library code includes this header to build and evaluate nodes.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "graph/array.h"
#include "graph/buffer.h"
#include "graph/device_hooks.h"
#include "graph/pending.h"
#include "graph/primitives.h"

namespace kiln {

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
  // While in flight on asynchronous work (a compiled call, async_eval): that work, to wait for
  // (guarded by eval's lock; dropped once the results are published).
  std::shared_ptr<Pending> pending;
  // Which output of `pending`'s plan this node is (a compiled call's), so a later call on the
  // same device can bind the buffer before it is published; -1 when it is not one.
  int pending_output = -1;
  // Set (release) once data or error is final; readers that see it need no lock.
  std::atomic<bool> ready{false};
  uint64_t id;  // unique per node, for stable ordering and text names

  ArrayNode();
  ~ArrayNode();  // iterative: dropping a long chain must not recurse once per node
  ArrayNode(const ArrayNode&) = delete;
  ArrayNode& operator=(const ArrayNode&) = delete;
};

// A node built by an op (ops.cpp, random.cpp, passes, shape replay).
Array make_array(Shape shape, Dtype dtype, Op op, Params params, std::vector<Array> inputs,
                 ResolvedStream stream);
// An evaluated array over existing data.
Array make_array(Shape shape, Dtype dtype, std::shared_ptr<Buffer> data, ResolvedStream stream);

// The evaluated buffer of `a` (evaluating first); rethrows the error evaluation stored.
const std::shared_ptr<Buffer>& array_buffer(const Array& a);

// Reads the raw contiguous data of an evaluated array into `dst` (a.nbytes() bytes).
void read_data(const Array& a, void* dst);

// The id the next node will get: nodes with smaller ids existed before this call.
uint64_t next_node_id();

// The evaluation entry point lives in compile/; it registers itself here so that item() and
// to_vector() can evaluate without graph/ including a higher layer.
using EvalHook = void (*)(const std::vector<Array>&);
void set_eval_hook(EvalHook hook);
void eval_implicitly(const Array& a);

}  // namespace kiln
