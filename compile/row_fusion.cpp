#include "compile/row_fusion.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>
#include <unordered_map>

#include "graph/error.h"

namespace kiln {

namespace {

bool constant_dims(const Kernel& k) {
  for (const Dim& d : k.domain)
    if (d.is_runtime()) return false;
  for (const KernelBuffer& b : k.buffers) {
    for (const Dim& d : b.map.strides)
      if (d.is_runtime()) return false;
    if (b.map.offset.is_runtime()) return false;
  }
  return true;
}

// Whether the kernel reads some buffer through a Gather: the passes of a row kernel share
// buffers by node and map, which a gathered read (other rows than the map's) would break.
bool gathers(const Kernel& k) {
  for (const Value& v : k.body)
    if (v.kind == ValueKind::Gather) return true;
  return false;
}

// A kernel that may be a pass: a plain kernel of constant dims (not a row kernel, no in-place
// pair, no gathered read).
bool pass_candidate(const FusedStep& s) {
  return s.kernel && !s.kernel->is_rows() && s.kernel->in_place.empty() &&
         constant_dims(*s.kernel) && !gathers(*s.kernel);
}

// Whether a reduction reads some buffer contiguously along its innermost reduced axis: a row
// in memory. A column reduction (strided along it) keeps its own kernel, which the cpu backend
// walks in tiles across the columns instead.
bool contiguous_rows(const Kernel& k) {
  int last = k.ndim() - 1;
  for (const Value& v : k.body)
    if (v.kind == ValueKind::Load && k.buffers[v.buffer].map.strides[last] == Dim::constant(1))
      return true;
  return false;
}

class Chains {
 public:
  Chains(const LeafFn& is_leaf, const SameLaneFn& same_lane, int max_buffers)
      : is_leaf_(is_leaf), same_lane_(same_lane), max_buffers_(max_buffers) {}

  std::vector<FusedStep> run(std::vector<FusedStep> steps) {
    for (const FusedStep& s : steps) {
      if (s.library) writer_[s.library] = &s;
      for (size_t b = 0; s.kernel && b < s.buffers.size(); ++b)
        if (s.kernel->buffers[b].output) writer_[s.buffers[b]] = &s;
    }
    // Decide every chain first, then move the steps: writer_ points into `steps` (and, once a
    // chain is joined, at the joined step, which reads what all its passes read).
    std::vector<bool> used(steps.size(), false);
    std::deque<FusedStep> joined;
    std::vector<std::pair<size_t, FusedStep*>> at;  // (first pass, its joined step)
    for (size_t i = 0; i < steps.size(); ++i) {
      if (used[i]) continue;
      std::vector<size_t> chain = chain_from(steps, i, used);
      if (chain.size() < 2) continue;
      std::vector<const FusedStep*> passes;
      for (size_t c : chain) passes.push_back(&steps[c]);
      std::optional<FusedStep> j = join_passes(passes, max_buffers_);
      if (!j) continue;
      for (size_t c : chain) used[c] = true;
      joined.push_back(std::move(*j));
      FusedStep& js = joined.back();
      for (size_t b = 0; b < js.buffers.size(); ++b)
        if (js.kernel->buffers[b].output) writer_[js.buffers[b]] = &js;
      at.emplace_back(i, &js);
    }
    std::vector<FusedStep> out;
    size_t next = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (next < at.size() && at[next].first == i) {
        out.push_back(std::move(*at[next++].second));
      } else if (!used[i]) {
        out.push_back(std::move(steps[i]));
      }
    }
    return out;
  }

 private:
  // Steps that join the reduction at `first`: later kernels over its domain, reducing the same
  // axes or none (an element-wise pass ends the chain), that read what the chain stores at the
  // rows being walked and need nothing computed from it by a kernel outside the chain.
  std::vector<size_t> chain_from(const std::vector<FusedStep>& steps, size_t first,
                                 const std::vector<bool>& used) {
    const FusedStep& head = steps[first];
    if (!pass_candidate(head) || !head.kernel->reduce || !contiguous_rows(*head.kernel))
      return {first};
    std::vector<size_t> chain{first};
    NodeSet stored;
    std::map<const ArrayNode*, IndexMap> store_map;
    auto add_stores = [&](const FusedStep& s) {
      for (size_t b = 0; b < s.buffers.size(); ++b)
        if (s.kernel->buffers[b].output) {
          stored.insert(s.buffers[b]);
          store_map[s.buffers[b]] = s.kernel->buffers[b].map;
        }
    };
    add_stores(head);
    std::vector<const ArrayNode*> external;  // computed nodes the passes read from elsewhere
    auto add_external = [&](const FusedStep& s) {
      for (size_t b = 0; b < s.buffers.size(); ++b)
        if (!s.kernel->buffers[b].output && !is_leaf_(*s.buffers[b]) && !stored.count(s.buffers[b]))
          external.push_back(s.buffers[b]);
    };
    add_external(head);
    for (size_t j = first + 1; j < steps.size(); ++j) {
      const FusedStep& s = steps[j];
      if (used[j] || !pass_candidate(s) || !(s.kernel->domain == head.kernel->domain)) continue;
      if (s.kernel->reduce && s.kernel->reduce->naxes != head.kernel->reduce->naxes) continue;
      if (!same_lane_(*s.lane_node, *head.lane_node)) continue;
      bool reads_chain = false, ok = true;
      for (size_t b = 0; b < s.buffers.size() && ok; ++b) {
        const ArrayNode* n = s.buffers[b];
        if (s.kernel->buffers[b].output || !stored.count(n)) continue;
        reads_chain = true;
        ok = store_map[n] == s.kernel->buffers[b].map;  // the row it stored, nothing else
      }
      if (!ok || !reads_chain) continue;
      // Joined, the chain is one step: nothing it reads from another kernel may need what it
      // stores (that kernel would have to run both before and after it).
      NodeSet more = stored;
      std::vector<const ArrayNode*> ext = external;
      for (size_t b = 0; b < s.buffers.size(); ++b) {
        if (s.kernel->buffers[b].output)
          more.insert(s.buffers[b]);
        else if (!is_leaf_(*s.buffers[b]) && !stored.count(s.buffers[b]))
          ext.push_back(s.buffers[b]);
      }
      for (const ArrayNode* n : ext) ok = ok && !needs(n, more);
      if (!ok) continue;
      chain.push_back(j);
      add_stores(s);
      external = std::move(ext);
      if (!s.kernel->reduce) break;
    }
    return chain;
  }

  // Whether the kernel (or library call) that stores `x` needs, through the steps before it, a
  // node of `targets`: a step that stores several nodes orders them all behind its inputs.
  bool needs(const ArrayNode* x, const NodeSet& targets) const {
    std::vector<const ArrayNode*> stack{x};
    NodeSet seen;
    while (!stack.empty()) {
      const ArrayNode* n = stack.back();
      stack.pop_back();
      if (targets.count(n)) return true;
      if (!seen.insert(n).second) continue;
      auto w = writer_.find(n);
      if (w == writer_.end()) continue;  // a plan input
      const FusedStep& s = *w->second;
      if (s.library) {
        stack.insert(stack.end(), s.reads.begin(), s.reads.end());
      } else {
        for (size_t b = 0; b < s.buffers.size(); ++b)
          if (!s.kernel->buffers[b].output) stack.push_back(s.buffers[b]);
      }
    }
    return false;
  }

  const LeafFn& is_leaf_;
  const SameLaneFn& same_lane_;
  int max_buffers_;
  std::unordered_map<const ArrayNode*, const FusedStep*> writer_;  // the step storing each node
};

// "rows_" and the words of the passes' names, each once, in order (the reductions' ops too:
// a reduction with a prologue is named for the prologue).
std::string row_name(const std::vector<const FusedStep*>& chain) {
  std::vector<std::string> words;
  auto add = [&](const std::string& w) {
    if (!w.empty() && w != "fused" && std::find(words.begin(), words.end(), w) == words.end())
      words.push_back(w);
  };
  for (const FusedStep* s : chain) {
    const Kernel& k = *s->kernel;
    if (k.reduce) add(op_name(k.reduce->op));
    std::string w;
    for (char c : k.name + "_") {
      if (c != '_') {
        w += c;
      } else {
        add(w);
        w.clear();
      }
    }
  }
  std::string name = "rows";
  for (const std::string& w : words) name.append("_").append(w);
  return name;
}

}  // namespace

std::optional<FusedStep> join_passes(const std::vector<const FusedStep*>& chain, int max_buffers) {
  Kernel k;
  k.name = row_name(chain);
  k.domain = chain[0]->kernel->domain;
  FusedStep out;
  out.lane_node = chain[0]->lane_node;
  // One buffer per (node, dtype, map): a node the chain stores is read back through the very
  // buffer that stored it.
  std::map<std::tuple<const ArrayNode*, Dtype::Kind, std::string>, int> index;
  std::map<const ArrayNode*, int> entries;  // buffers per node
  int loads = 0;
  for (const FusedStep* s : chain) {
    const Kernel& sk = *s->kernel;
    std::vector<int> remap(sk.buffers.size());
    for (size_t b = 0; b < sk.buffers.size(); ++b) {
      const KernelBuffer& kb = sk.buffers[b];
      std::string map = std::to_string(kb.map.offset.value);  // constant dims only
      for (const Dim& d : kb.map.strides) map.append(",").append(std::to_string(d.value));
      auto key = std::make_tuple(s->buffers[b], kb.dtype.kind, map);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, static_cast<int>(k.buffers.size())).first;
        k.buffers.push_back({kb.dtype, false, kb.map});
        out.buffers.push_back(s->buffers[b]);
        ++entries[s->buffers[b]];
        if (!kb.output) ++loads;
      }
      if (kb.output) {
        if (k.buffers[it->second].output) return std::nullopt;  // stored twice
        k.buffers[it->second].output = true;
      }
      remap[b] = it->second;
    }
    int32_t shift = static_cast<int32_t>(out.params.size());
    out.params.insert(out.params.end(), s->params.begin(), s->params.end());
    Pass p;
    p.body = sk.body;
    for (Value& v : p.body) {
      if (v.kind == ValueKind::Load) v.buffer = remap[v.buffer];
      if (v.param >= 0) v.param += shift;
    }
    p.reduce = sk.reduce;
    for (const Store& st : sk.stores) p.stores.push_back({remap[st.buffer], st.value});
    k.passes.push_back(std::move(p));
  }
  if (loads > max_buffers) return std::nullopt;
  // A node stored by the kernel must have no second buffer (another map would read other rows
  // than the one the walk is at).
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (k.buffers[b].output && entries[out.buffers[b]] != 1) return std::nullopt;
  try {  // a chain the checks above let through but Kernel IR rejects stays separate kernels
    k.validate();
  } catch (const Error&) {
    return std::nullopt;
  }
  out.kernel = std::make_shared<const Kernel>(std::move(k));
  return out;
}

std::vector<FusedStep> fuse_rows(std::vector<FusedStep> steps, const LeafFn& is_leaf,
                                 const SameLaneFn& same_lane, int max_buffers) {
  return Chains(is_leaf, same_lane, max_buffers).run(std::move(steps));
}

}  // namespace kiln
