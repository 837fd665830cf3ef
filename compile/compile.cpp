#include "compile/compile.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "compile/async_results.h"
#include "compile/eval.h"
#include "compile/graph_walk.h"
#include "compile/lower.h"
#include "compile/passes.h"
#include "compile/rules.h"
#include "compile/shapes.h"
#include "compile/trace_cache.h"
#include "executor/executor.h"
#include "executor/lanes.h"
#include "graph/array_node.h"
#include "graph/trace_state.h"

namespace kiln {

namespace {

std::atomic<bool> g_enabled{[] {
  const char* e = std::getenv("KILN_DISABLE_COMPILE");
  return !(e && *e && std::string(e) != "0");
}()};

Signature signature_of(const std::vector<Array>& inputs, Covers covers) {
  Signature s;
  s.words.reserve(2 + 4 * inputs.size());
  s.words.push_back(static_cast<int64_t>(inputs.size()));
  for (const Array& a : inputs) {  // node fields directly: this runs at every call
    const ArrayNode& n = *a.node();
    s.words.push_back(static_cast<int64_t>(n.dtype.kind));
    if (covers != Covers::Dtypes) s.words.push_back(static_cast<int64_t>(n.shape.size()));
    if (covers == Covers::Shapes) s.words.insert(s.words.end(), n.shape.begin(), n.shape.end());
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int64_t w : s.words) h = (h ^ static_cast<uint64_t>(w)) * 0x100000001b3ULL;
  s.hash = h;
  return s;
}

// A shapeless trace serves inputs of every rank when each node's shape follows from its inputs'
// by broadcasting alone: element-wise ops over the inputs and fixed-shape values (fills, draws,
// captured constants). Axes, reshapes, slices, reductions and matmul tie the graph to a rank.
bool replays_for_any_rank(const std::vector<Array>& outputs, const std::vector<Array>& inputs) {
  std::unordered_set<const ArrayNode*> ins;
  for (const Array& a : inputs) ins.insert(a.node().get());
  auto leaf = [&](const ArrayNode& n) { return ins.count(&n) || n.data != nullptr; };
  for (const Array& a : topological_order(outputs, leaf)) {
    const ArrayNode& n = *a.node();
    if (!leaf(n) && !rules(n.op).any_rank) return false;
  }
  return true;
}

std::shared_ptr<ShapePlan> lower_entry(const std::vector<Array>& outputs,
                                       const std::vector<Array>& placeholders, bool shapeless,
                                       size_t state_inputs) {
  LowerOptions lo;
  lo.state_inputs = state_inputs;
  lo.eager = false;
  lo.fuse = true;
  lo.runtime_dims = shapeless;
  LoweredGraph lg = lower(outputs, placeholders, lo);
  auto l = std::make_shared<ShapePlan>();
  l->constants.assign(lg.inputs.begin() + static_cast<long>(placeholders.size()), lg.inputs.end());
  for (const Array& o : outputs) l->out_shapes.push_back(o.shape());
  l->plan = std::move(lg.plan);
  return l;
}

}  // namespace

std::shared_ptr<Entry> CompiledFunction::Impl::trace(const std::vector<Array>& args,
                                                     const std::vector<Array>& state) const {
  uint64_t first_traced_id = next_node_id();  // nodes made from here on belong to the trace
  auto placeholder = [](const Array& a) {
    return make_array(a.shape(), a.dtype(), Op::Placeholder, {}, {},
                      ResolvedStream{current_stream(), StreamOrigin::Default});
  };
  std::vector<Array> ph_args, ph_state;
  for (const Array& a : args) ph_args.push_back(placeholder(a));
  for (const Array& a : state) ph_state.push_back(placeholder(a));

  // Run the user function over placeholders, with the captured state containers pointing at
  // placeholders too; put every container back as it was afterwards.
  std::vector<std::vector<Array>> saved_in, saved_out;
  for (auto* v : options.inputs) saved_in.push_back(*v);
  for (auto* v : options.outputs) saved_out.push_back(*v);
  std::vector<Array> outputs;
  std::vector<size_t> state_sizes;
  size_t num_user = 0;
  {
    size_t k = 0;
    for (auto* v : options.inputs)
      for (Array& a : *v) a = ph_state[k++];
    struct Restore {
      const Impl* self;
      std::vector<std::vector<Array>>& in;
      std::vector<std::vector<Array>>& out;
      ~Restore() {
        for (size_t i = 0; i < self->options.inputs.size(); ++i) *self->options.inputs[i] = in[i];
        for (size_t i = 0; i < self->options.outputs.size(); ++i)
          *self->options.outputs[i] = out[i];
      }
    } restore{this, saved_in, saved_out};
    TraceStateGuard tracing;
    outputs = fn(ph_args);
    num_user = outputs.size();
    for (auto* v : options.outputs) {
      state_sizes.push_back(v->size());
      outputs.insert(outputs.end(), v->begin(), v->end());
    }
  }

  // Captured arrays made before the trace but not yet evaluated are constants: compute them now.
  std::vector<Array> pending;
  for (const Array& a : topological_order(outputs, [&](const ArrayNode& n) {
         return n.data || n.error || n.id < first_traced_id || n.op == Op::Placeholder;
       }))
    if (a.id() < first_traced_id && !a.is_evaluated() && !a.is_placeholder()) pending.push_back(a);
  if (!pending.empty()) eval(pending);

  std::vector<Array> stop = ph_args;
  stop.insert(stop.end(), ph_state.begin(), ph_state.end());
  auto e = std::make_shared<Entry>();
  e->outputs = simplify(outputs, stop, nullptr, options.shapeless);
  if (!options.shapeless) e->outputs = sink_reshapes(e->outputs, stop);
  e->placeholders = stop;
  e->num_user_outputs = num_user;
  e->num_state_inputs = ph_state.size();
  e->state_output_sizes = state_sizes;
  // Without shapeless the signature fixes every shape: lower now, once, before publishing.
  if (!options.shapeless)
    e->single = lower_entry(e->outputs, e->placeholders, false, e->num_state_inputs);
  e->any_rank = options.shapeless && replays_for_any_rank(e->outputs, e->placeholders);
  return e;
}

std::shared_ptr<ShapePlan> CompiledFunction::Impl::lowered_for(
    Entry& e, const std::vector<Array>& all) const {
  if (e.single) return e.single;
  std::vector<int64_t> key;
  for (const Array& a : all) {
    const Shape& shape = a.node()->shape;
    key.push_back(static_cast<int64_t>(shape.size()));
    key.insert(key.end(), shape.begin(), shape.end());
  }
  std::lock_guard<std::mutex> lock(e.mu);
  auto it = e.lowered.find(key);
  if (it != e.lowered.end()) return it->second;
  std::shared_ptr<ShapePlan> l;
  bool traced_shapes = true;
  for (size_t i = 0; i < all.size(); ++i)
    traced_shapes = traced_shapes && all[i].shape() == e.placeholders[i].shape();
  if (traced_shapes) {
    l = lower_entry(e.outputs, e.placeholders, options.shapeless, e.num_state_inputs);
  } else {
    std::vector<Shape> shapes;
    for (const Array& a : all) shapes.push_back(a.shape());
    std::vector<Array> ph;
    std::vector<Array> outs = replay_shapes(e.outputs, e.placeholders, shapes, ph);
    l = lower_entry(outs, ph, true, e.num_state_inputs);
  }
  e.lowered.emplace(std::move(key), l);
  return l;
}

std::vector<Array> run_plan(const std::shared_ptr<const ShapePlan>& e, std::vector<Array> inputs,
                            const BeforeSubmit& before_submit, const OnSubmitFailure& on_failure) {
  // An input in flight on device work binds the buffer that work writes, and the executor
  // orders this call after it (on the device where it can): no round trip per call in a loop.
  // Other unevaluated inputs are evaluated first.
  std::vector<std::shared_ptr<Buffer>> buffers(inputs.size());
  std::vector<InFlightInput> after;
  std::vector<Array> unevaluated;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Array& a = inputs[i];
    if (a.node()->ready.load(std::memory_order_acquire)) continue;
    InFlightInput in{i, nullptr, 0};
    int output = -1;
    buffers[i] = in_flight_buffer(a, &in.producer, &output);
    if (!buffers[i]) {
      unevaluated.push_back(a);
      continue;
    }
    in.output = static_cast<size_t>(output);
    after.push_back(std::move(in));
  }
  if (!unevaluated.empty()) eval(unevaluated);
  buffers.reserve(inputs.size() + e->constants.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!buffers[i]) buffers[i] = array_buffer(inputs[i]);
  for (const Array& c : e->constants) buffers.push_back(array_buffer(c));

  // The outputs are in flight until the plan's completion publishes into them.
  const Plan& plan = e->plan;
  size_t n = plan.outputs.size();
  Stream caller = current_stream();
  auto passed_through = [&](size_t i) {  // the function returned an input unchanged
    const Slot& s = plan.slots()[plan.outputs[i]];
    return s.kind == SlotKind::Input && s.index < static_cast<int>(inputs.size());
  };
  std::vector<Array> outs, fresh;
  outs.reserve(n);
  fresh.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Slot& s = plan.slots()[plan.outputs[i]];
    if (passed_through(i)) {
      outs.push_back(inputs[s.index]);
      continue;
    }
    Stream st = s.lane >= 0 ? resolve_lane(plan.lanes()[s.lane], caller) : caller;
    Array out = make_array(e->out_shapes[i], s.dtype, Op::Constant, {}, {},
                           ResolvedStream{st, StreamOrigin::Default});
    out.node()->in_flight = true;  // nobody else sees it yet
    out.node()->pending_output = static_cast<int>(i);
    outs.push_back(out);
    fresh.push_back(std::move(out));
  }
  std::vector<size_t> which;  // the plan output of each fresh array, unless all are fresh
  if (fresh.size() != n)
    for (size_t i = 0; i < n; ++i)
      if (!passed_through(i)) which.push_back(i);
  // The fresh arrays move into the completion (`outs` holds them too): no copies per call.
  RunDone publish = [fresh = std::move(fresh), which = std::move(which)](RunResult r) {
    if (which.empty()) return publish_results(fresh, r);
    RunResult mine;  // the results of the fresh outputs, in their order
    for (size_t i : which) {
      mine.outputs.push_back(r.outputs[i]);
      mine.errors.push_back(r.errors[i]);
    }
    publish_results(fresh, mine);
  };
  if (before_submit) before_submit(outs);
  inputs.clear();  // the executor's buffers are now all this call holds of them
  std::shared_ptr<Pending> work;
  try {
    work = execute_async(plan, e, std::move(buffers), std::move(publish), after);
  } catch (...) {  // nothing ran: whoever holds an output reads the error, never waits forever
    std::exception_ptr error = std::current_exception();
    std::vector<Array> failed;  // the fresh outputs: still in flight, as nothing ran
    for (const Array& a : outs)
      if (a.node()->in_flight) failed.push_back(a);
    publish_results(failed, RunResult{std::vector<std::shared_ptr<Buffer>>(failed.size()),
                                      std::vector<std::exception_ptr>(failed.size(), error)});
    for (const InFlightInput& in : after) in.producer->wait();  // before `buffers` are reused
    if (on_failure) on_failure(buffers);
    throw;
  }
  if (work) attach_pending(outs, work);  // the fresh ones; inputs passed through are evaluated
  return outs;
}

std::vector<Array> CompiledFunction::Impl::run(const Entry& entry,
                                               const std::shared_ptr<const ShapePlan>& e,
                                               const std::vector<Array>& args,
                                               std::vector<Array> state) const {
  if (options.inputs.empty() && options.outputs.empty()) return run_plan(e, args);  // no state
  // What it takes to rebuild the old state from its buffers, should the submission fail after
  // the write-back below (the arrays themselves are let go, so the plan may donate them).
  struct Old {
    Shape shape;
    Dtype dtype;
    ResolvedStream stream;
  };
  std::vector<Old> old;
  for (const Array& a : state) old.push_back({a.shape(), a.dtype(), a.node()->stream});
  std::vector<size_t> sizes;  // of the input containers, now
  for (auto* v : options.inputs) sizes.push_back(v->size());
  std::vector<Array> inputs = args;
  inputs.insert(inputs.end(), std::make_move_iterator(state.begin()),
                std::make_move_iterator(state.end()));
  state.clear();
  // Write the captured outputs back before the plan is submitted, then hand the user outputs to
  // the caller. Each container gets exactly what the trace wrote into it, whatever its size is.
  auto write_back = [&](const std::vector<Array>& outs) {
    auto at = outs.begin() + static_cast<long>(entry.num_user_outputs);
    for (size_t i = 0; i < options.outputs.size(); ++i) {
      auto n = static_cast<long>(entry.state_output_sizes[i]);
      options.outputs[i]->assign(at, at + n);
      at += n;
    }
  };
  // Nothing ran: each input container gets its old values back (an output container that is
  // not also an input keeps the failed outputs, which raise the error when read).
  auto restore = [&](const std::vector<std::shared_ptr<Buffer>>& buffers) {
    if (buffers.size() < args.size() + old.size()) return;  // the executor kept them
    size_t k = 0;
    for (size_t c = 0; c < options.inputs.size(); ++c) {
      std::vector<Array> back;
      for (size_t j = 0; j < sizes[c]; ++j, ++k)
        back.push_back(
            make_array(old[k].shape, old[k].dtype, buffers[args.size() + k], old[k].stream));
      *options.inputs[c] = std::move(back);
    }
  };
  std::vector<Array> outs = run_plan(e, std::move(inputs), write_back, restore);
  outs.erase(outs.begin() + static_cast<long>(entry.num_user_outputs), outs.end());
  return outs;
}

std::pair<std::shared_ptr<Entry>, std::shared_ptr<ShapePlan>> CompiledFunction::Impl::prepare(
    const std::vector<Array>& args, const std::vector<Array>& state) const {
  std::vector<Array> with_state;
  if (!state.empty()) {
    with_state = args;
    with_state.insert(with_state.end(), state.begin(), state.end());
  }
  const std::vector<Array>& all = state.empty() ? args : with_state;
  Signature sig = signature_of(all, options.shapeless ? Covers::Ranks : Covers::Shapes);
  std::shared_ptr<Entry> entry;
  {
    std::shared_lock<std::shared_mutex> lock(mu);
    auto it = cache.find(sig);
    if (it != cache.end()) entry = it->second;
  }
  if (!entry) {
    std::unique_lock<std::shared_mutex> lock(mu);
    auto it = cache.find(sig);
    Signature loose = options.shapeless ? signature_of(all, Covers::Dtypes) : Signature{};
    auto any = any_rank.find(loose);
    if (it != cache.end()) {
      entry = it->second;
    } else if (options.shapeless && any != any_rank.end()) {
      entry = cache[sig] = any->second;  // a new rank, the same trace
    } else {
      entry = cache[sig] = trace(args, state);
      ++traces;
      if (entry->any_rank) any_rank.emplace(std::move(loose), entry);
    }
  }
  std::shared_ptr<ShapePlan> lowered = lowered_for(*entry, all);
  return {entry, lowered};
}

namespace {
void check_made(const void* impl) {
  if (!impl)
    throw_error(
        "compile: this CompiledFunction is empty (default-constructed or moved from); make one "
        "with kiln::compile(fn)");
}
}  // namespace

std::vector<Array> CompiledFunction::operator()(const std::vector<Array>& args) const {
  check_made(impl_.get());
  const Impl& im = *impl_;
  // Inside a trace or a transform the function runs inline: the caller records its graph.
  if (!compile_enabled() || is_tracing() || in_transform()) return im.fn(args);
  std::vector<Array> state = im.state_inputs();
  auto [entry, lowered] = im.prepare(args, state);
  return im.run(*entry, lowered, args, std::move(state));
}

size_t CompiledFunction::cache_size() const {
  check_made(impl_.get());
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  return impl_->traces;
}

CompiledFunction compile(Fn fn, CompileOptions options) {
  if (!fn) throw_error("compile: the function is empty");
  for (auto* v : options.inputs)
    if (!v) throw_error("compile: a null container in CompileOptions::inputs");
  for (auto* v : options.outputs)
    if (!v) throw_error("compile: a null container in CompileOptions::outputs");
  CompiledFunction f;
  f.impl_ = std::make_shared<CompiledFunction::Impl>();
  f.impl_->fn = std::move(fn);
  f.impl_->options = std::move(options);
  return f;
}

void disable_compile() { g_enabled.store(false); }
void enable_compile() { g_enabled.store(true); }
bool compile_enabled() { return g_enabled.load(); }

}  // namespace kiln
