#include "compile/eager_kernels.h"

#include <mutex>
#include <unordered_map>

#include "compile/rules.h"
#include "graph/array_node.h"
#include "graph/immortal.h"

namespace kiln {

namespace {

// How the emitter treats one input of a node emitted alone (fusion off): loaded from a buffer,
// read as a launch scalar, inlined as mean's element count, or power's specialised exponent.
// A count is a buffer when the plan stores it (something else asked for its value).
enum class InputKind : int64_t { Buffer, Scalar, Count, Two };

InputKind input_kind(const ArrayNode& n, size_t i, const NodeSet& stored) {
  const ArrayNode& in = *n.inputs[i].node();
  if (n.op == Op::Binary && n.params.binary == BinaryOp::Power && i == 1 && is_two(in))
    return InputKind::Two;
  if (in.data) return host_scalar(in) ? InputKind::Scalar : InputKind::Buffer;
  return in.op == Op::Count && !stored.count(&in) ? InputKind::Count : InputKind::Buffer;
}

// The first input that is the same node as input i (the emitter loads a node once).
size_t first_alias(const ArrayNode& n, size_t i) {
  for (size_t j = 0; j < i; ++j)
    if (n.inputs[j].node() == n.inputs[i].node()) return j;
  return i;
}

using Key = std::vector<int64_t>;

void put_shape(Key& k, const Shape& s) {
  k.push_back(static_cast<int64_t>(s.size()));
  k.insert(k.end(), s.begin(), s.end());
}

// Everything the kernel of `n` depends on; values that travel as launch params are left out.
Key key_of(const ArrayNode& n, const NodeSet& stored) {
  const Params& p = n.params;
  Key k;
  k.reserve(48);
  k = {static_cast<int64_t>(n.op),       static_cast<int64_t>(n.dtype.kind),
       static_cast<int64_t>(p.unary),    static_cast<int64_t>(p.binary),
       static_cast<int64_t>(p.reduce),   static_cast<int64_t>(p.dist),
       static_cast<int64_t>(p.keepdims), static_cast<int64_t>(p.reshape)};
  put_shape(k, n.shape);
  k.push_back(static_cast<int64_t>(p.axes.size()));
  k.insert(k.end(), p.axes.begin(), p.axes.end());
  for (const auto* v : {&p.start, &p.stop, &p.step, &p.shape}) put_shape(k, *v);
  k.push_back(static_cast<int64_t>(n.inputs.size()));
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ArrayNode& in = *n.inputs[i].node();
    InputKind kind = input_kind(n, i, stored);
    k.push_back(static_cast<int64_t>(kind));
    k.push_back(static_cast<int64_t>(first_alias(n, i)));
    k.push_back(static_cast<int64_t>(in.dtype.kind));
    put_shape(k, in.shape);
    if (kind == InputKind::Count) {  // inlined as an immediate of the kernel
      k.push_back(static_cast<int64_t>(in.params.axes.size()));
      for (int ax : in.params.axes) k.push_back(in.inputs[0].shape()[ax]);
    }
  }
  return k;
}

// The launch values the emitter gives `n` emitted alone, in its order: its rules' own
// (fills, aranges, draws), else its 0-d constant inputs', each node once (kernel_emit.cpp).
std::vector<int64_t> params_of(const ArrayNode& n, const NodeSet& stored) {
  if (auto own = rules(n.op).launch_values) return own(n);
  std::vector<int64_t> params;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (input_kind(n, i, stored) == InputKind::Scalar && first_alias(n, i) == i)
      params.push_back(launch_word(*host_scalar(*n.inputs[i].node())));
  return params;
}

struct Recipe {
  std::shared_ptr<const Kernel> kernel;
  std::shared_ptr<KernelBinaries> binaries;
  std::vector<int> buffer_inputs;  // per kernel buffer: the input it is, or -1 for the node
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t w : k) h = (h ^ static_cast<uint64_t>(w)) * 0x100000001b3ULL;
    return h;
  }
};

// Bounded: an eager program has few distinct structures; one that keeps making new shapes starts
// over rather than growing without limit.
constexpr size_t kMaxEntries = 4096;
std::mutex g_mu;
std::unordered_map<Key, Recipe, KeyHash>& cache() {
  static Immortal<std::unordered_map<Key, Recipe, KeyHash>> c;
  return c.get();
}

FusedStep step_from(const ArrayNode& n, const Recipe& r, const NodeSet& stored) {
  FusedStep s;
  s.kernel = r.kernel;
  s.binaries = r.binaries;
  s.lane_node = &n;
  s.params = params_of(n, stored);  // the values: all that differs between calls of one structure
  s.buffers.reserve(r.buffer_inputs.size());
  for (int i : r.buffer_inputs) s.buffers.push_back(i < 0 ? &n : n.inputs[i].node().get());
  return s;
}

}  // namespace

std::optional<FusedStep> cached_eager_step(const ArrayNode& n, const NodeSet& stored) {
  Key k = key_of(n, stored);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = cache().find(k);
  if (it == cache().end()) return std::nullopt;
  return step_from(n, it->second, stored);
}

void remember_eager_step(const ArrayNode& n, const FusedStep& step, const NodeSet& stored) {
  if (!step.kernel) return;
  Recipe r;
  r.kernel = step.kernel;
  r.binaries = std::make_shared<KernelBinaries>();
  for (const ArrayNode* b : step.buffers) {
    int found = b == &n ? -1 : -2;
    for (size_t i = 0; found == -2 && i < n.inputs.size(); ++i)
      if (n.inputs[i].node().get() == b) found = static_cast<int>(i);
    if (found == -2) return;  // a buffer the recipe cannot name: not cacheable
    r.buffer_inputs.push_back(found);
  }
  FusedStep again = step_from(n, r, stored);
  if (again.params != step.params || again.buffers != step.buffers) return;
  Key k = key_of(n, stored);
  std::lock_guard<std::mutex> lock(g_mu);
  if (cache().size() >= kMaxEntries) cache().clear();
  cache().emplace(std::move(k), std::move(r));
}

}  // namespace kiln
