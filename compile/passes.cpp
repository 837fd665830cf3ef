#include "compile/passes.h"

#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "compile/eval.h"
#include "compile/graph_walk.h"
#include "compile/rules.h"
#include "graph/array_node.h"

namespace kiln {

namespace {

// Folding materialises values; past this size a constant is better computed by the kernel.
constexpr int64_t kFoldLimit = 4096;

bool is_constant(const ArrayNode& n) { return n.op != Op::Placeholder && n.data != nullptr; }

// Whether every element of `a` equals `v` (checked for constants and fills; false if unknown).
bool all_equal(const Array& a, double v) {
  const ArrayNode& n = *a.node();
  if (n.op == Op::Full) return n.params.value.as_double() == v;
  if (!is_constant(n) || a.size() > 16 || a.size() == 0) return false;
  for (double x : a.to_vector<double>())
    if (x != v) return false;
  return true;
}

std::string cse_key(const ArrayNode& n) {
  std::ostringstream os;
  os << static_cast<int>(n.op) << '|' << n.dtype << '|' << to_string(n.shape) << '|'
     << static_cast<int>(n.stream.origin) << n.stream.stream << '|';
  for (const Array& in : n.inputs) os << in.id() << ',';
  const Params& p = n.params;
  os << '|' << int(p.unary) << ',' << int(p.binary) << ',' << int(p.reduce) << ',' << int(p.dist)
     << ',' << p.keepdims << ',' << p.key << ',' << p.value.str() << p.value.dtype << ','
     << p.step_value.str() << '|' << int(p.scan) << ',' << p.descending << ',' << p.reverse << ','
     << p.inclusive << ',' << p.group << ',' << p.peer << ',' << int(p.reshape) << '|';
  for (int x : p.axes) os << x << ',';
  for (auto* v : {&p.start, &p.stop, &p.step, &p.shape}) {
    os << '|';
    for (int64_t x : *v) os << x << ',';
  }
  return os.str();
}

class Simplifier {
 public:
  Simplifier(PassStats* stats, bool shapeless)
      : stats_(stats ? stats : &local_), shapeless_(shapeless) {}

  std::vector<Array> run(const std::vector<Array>& outputs, const std::vector<Array>& inputs) {
    std::unordered_set<const ArrayNode*> ins;
    for (const Array& a : inputs) ins.insert(a.node().get());
    auto leaf = [&](const ArrayNode& n) {
      return ins.count(&n) || n.op == Op::Placeholder || n.data || n.error;
    };
    for (const Array& a : topological_order(outputs, leaf)) {
      if (leaf(*a.node())) {
        map_.emplace(a.node().get(), canonical_constant(a));
        continue;
      }
      map_.emplace(a.node().get(), rewrite(a));
    }
    std::vector<Array> out;
    for (const Array& o : outputs) out.push_back(map_.at(o.node().get()));
    return out;
  }

 private:
  // Small constants with equal values become one node, so expressions using them CSE.
  Array canonical_constant(const Array& a) {
    const ArrayNode& n = *a.node();
    if (!is_constant(n) || a.size() > 16) return a;
    std::vector<unsigned char> bytes(a.nbytes());
    read_data(a, bytes.data());
    std::string key = "const|" + n.dtype.name() + to_string(n.shape) + "|" +
                      std::string(bytes.begin(), bytes.end()) + "|" + n.stream.stream.str();
    auto [it, fresh] = seen_.emplace(std::move(key), a);
    if (!fresh && !it->second.same(a)) stats_->cse++;
    return it->second;
  }

  Array rewrite(const Array& a) {
    const ArrayNode& n = *a.node();
    std::vector<Array> in;
    bool changed = false;
    for (const Array& x : n.inputs) {
      in.push_back(map_.at(x.node().get()));
      changed = changed || !in.back().same(x);
    }
    Array cur = changed ? make_array(n.shape, n.dtype, n.op, n.params, in, n.stream) : a;
    if (auto s = algebra(cur)) {
      stats_->simplified++;
      return *s;
    }
    // A collective runs on every rank in the order of its plan: never folded away, never merged
    // (two equal recvs are two messages).
    if (is_collective(n.op)) return cur;
    if (auto f = fold(cur)) {
      stats_->folded++;
      return *f;
    }
    std::string key = cse_key(*cur.node());
    auto it = seen_.find(key);
    if (it != seen_.end()) {
      stats_->cse++;
      return it->second;
    }
    seen_.emplace(std::move(key), cur);
    return cur;
  }

  // The simpler equivalent of `a` its primitive's rules give (compile/rules/), if any.
  std::optional<Array> algebra(const Array& a) {
    const ArrayNode& n = *a.node();
    auto rule = rules(n.op).simplify;
    if (!rule) return std::nullopt;
    return rule(a, SimplifyContext{n, shapeless_});
  }

  // Evaluates a small node whose inputs are all constants, on the reference interpreter (whose
  // results define Kiln's semantics, so folding never changes an answer).
  std::optional<Array> fold(const Array& a) {
    const ArrayNode& n = *a.node();
    if (n.op == Op::Random || shape_size(n.shape) > kFoldLimit) return std::nullopt;
    for (const Array& x : n.inputs)
      if (!is_constant(*x.node())) return std::nullopt;
    if (n.inputs.empty() && n.op != Op::Full && n.op != Op::Arange) return std::nullopt;
    if (n.op == Op::Full && shape_size(n.shape) > 1) return std::nullopt;  // kernels fill fast
    ResolvedStream ref{Stream{0, Device{"reference", 0}}, StreamOrigin::Explicit};
    Array probe = make_array(n.shape, n.dtype, n.op, n.params, n.inputs, ref);
    try {
      eval(probe);
    } catch (const Error&) {
      return std::nullopt;  // leave it to run (and fail) where the user asked
    }
    return make_array(n.shape, n.dtype, array_buffer(probe), n.stream);
  }

  PassStats local_;
  PassStats* stats_;
  bool shapeless_;
  std::unordered_map<const ArrayNode*, Array> map_;
  std::unordered_map<std::string, Array> seen_;
};

}  // namespace

// Under shapeless the identity must hold for every shape: only 0-d values qualify.
bool SimplifyContext::all_equal(const Array& c, double v) const {
  return (!shapeless || c.ndim() == 0) && kiln::all_equal(c, v);
}

std::vector<Array> simplify(const std::vector<Array>& outputs, const std::vector<Array>& inputs,
                            PassStats* stats, bool shapeless) {
  return Simplifier(stats, shapeless).run(outputs, inputs);
}

}  // namespace kiln
