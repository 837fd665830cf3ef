#include "compile/aot.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "compile/aot_state.h"
#include "compile/graph_walk.h"
#include "executor/executor.h"
#include "graph/error.h"
#include "graph/trace_state.h"

namespace kiln {

namespace {

std::string type_str(Dtype d, const Shape& s) {
  std::ostringstream os;
  os << d << to_string(s);
  return os.str();
}

std::string lane_label(const LaneSpec& l) {
  if (l.origin == StreamOrigin::Default) return "caller";
  return l.stream.device.str();
}

std::string lane_text(const LaneSpec& l) {
  switch (l.origin) {
    case StreamOrigin::Default: return "caller's stream (resolved at each call)";
    case StreamOrigin::Explicit: return l.stream.str() + " (explicit)";
    case StreamOrigin::Placement: return l.stream.device.str() + " (placement)";
  }
  return "?";
}

template <typename T>
std::string tuple_str(const std::vector<T>& v) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ")";
  return os.str();
}

// A constant's values on one line, row-major (the type after the colon gives the shape): a
// scalar alone, else "[a, b, c]", past 6 values the first and last three around "..." (NumPy's
// edge items), floats to 6 digits as Array::str() prints them. The artifact holds the exact bytes.
std::string values_text(const Array& a) {
  constexpr int64_t kEdge = 3;
  int64_t n = a.size();
  std::vector<double> f;
  std::vector<int64_t> i;
  std::vector<uint64_t> u;
  if (a.dtype().is_float())
    f = a.to_vector<double>();
  else if (!a.dtype().is_unsigned())
    i = a.to_vector<int64_t>();
  else
    u = a.to_vector<uint64_t>();
  // An ostringstream, not string appends: GCC 12 reports a false -Wstringop-overflow for those.
  std::ostringstream os;
  auto element = [&](int64_t k) {
    if (a.dtype() == bool_) {
      os << (i[k] ? "true" : "false");
    } else if (!f.empty()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", f[k]);
      os << buf;
    } else if (!u.empty()) {
      os << u[k];
    } else {
      os << i[k];
    }
  };
  if (a.ndim() == 0) {
    element(0);
    return os.str();
  }
  os << "[";
  for (int64_t k = 0; k < n; ++k) {
    if (n > 2 * kEdge && k == kEdge) {
      os << "..., ";
      k = n - kEdge;
    }
    element(k);
    if (k + 1 < n) os << ", ";
  }
  os << "]";
  return os.str();
}

// A fill value as the constants print theirs: floats to 6 digits (Scalar::str() gives 17).
std::string scalar_text(const Scalar& v) {
  if (!v.dtype.is_float()) return v.str();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v.f);
  return buf;
}

// What a node's params add to its operands: reduction axes, permutations, the axis a native
// primitive or concatenate works along, slice bounds, fill values. Without them the graph does
// not say what it computes (sum(%2) over which axes?).
std::string attributes_text(const ArrayNode& n) {
  const Params& p = n.params;
  std::ostringstream os;
  switch (n.op) {
    case Op::Reduce:
    case Op::Count:
      os << " axes=" << tuple_str(p.axes);
      if (n.op == Op::Reduce && p.keepdims) os << " keepdims";
      break;
    case Op::Transpose: os << " perm=" << tuple_str(p.axes); break;
    case Op::Concatenate:
    case Op::Sort:
    case Op::Argsort:
    case Op::Scan:
    case Op::Gather:
    case Op::ScatterAdd:
      if (!p.axes.empty()) os << " axis=" << p.axes[0];
      if ((n.op == Op::Sort || n.op == Op::Argsort) && p.descending) os << " descending";
      if (n.op == Op::Scan && p.reverse) os << " reverse";
      if (n.op == Op::Scan && !p.inclusive) os << " exclusive";
      break;
    case Op::Slice:
      os << " start=" << tuple_str(p.start) << " stop=" << tuple_str(p.stop)
         << " step=" << tuple_str(p.step);
      break;
    case Op::Full: os << " value=" << scalar_text(p.value); break;
    case Op::Arange:
      os << " start=" << scalar_text(p.value) << " step=" << scalar_text(p.step_value);
      break;
    default: break;
  }
  return os.str();
}

// The simplified graph, one node per line in dependency order: `%3 = add(%1, %2) : float32(4,)`,
// `%4 = sum(%3) axes=(0) : float32()`, `%1 = constant [1, 2] : float32(2,)`, with
// `@ device (placement)` or `@ stream (explicit)` where the user pinned the node.
std::string graph_text(const Entry& e) {
  std::unordered_map<const ArrayNode*, int> name;
  std::unordered_map<const ArrayNode*, int> arg;
  for (size_t i = 0; i < e.placeholders.size(); ++i) arg[e.placeholders[i].node().get()] = int(i);
  auto leaf = [&](const ArrayNode& n) {
    return arg.count(&n) || n.op == Op::Placeholder || n.op == Op::Constant || n.data;
  };
  std::ostringstream os;
  for (const Array& a : topological_order(e.outputs, leaf)) {
    const ArrayNode& n = *a.node();
    int id = static_cast<int>(name.size());
    name[&n] = id;
    os << "  %" << id << " = ";
    if (auto it = arg.find(&n); it != arg.end())
      os << "arg " << it->second;
    else if (leaf(n))
      os << "constant" << (n.data ? " " : "") << (n.data ? values_text(a) : "");
    else {
      os << primitive_name(n.op, n.params) << "(";
      for (size_t i = 0; i < n.inputs.size(); ++i)
        os << (i ? ", " : "") << "%" << name.at(n.inputs[i].node().get());
      os << ")" << attributes_text(n);
    }
    os << " : " << type_str(n.dtype, n.shape);
    if (n.stream.origin == StreamOrigin::Placement)
      os << " @ " << n.stream.stream.device.str() << " (placement)";
    else if (n.stream.origin == StreamOrigin::Explicit)
      os << " @ " << n.stream.stream.str() << " (explicit)";
    os << "\n";
  }
  os << "  return";
  for (size_t i = 0; i < e.outputs.size(); ++i)
    os << (i ? ", " : " ") << "%" << name.at(e.outputs[i].node().get());
  os << "\n";
  return os.str();
}

double elements(const Kernel& k, const std::vector<int64_t>& params) {
  double n = 1;
  for (const Dim& d : k.domain) n *= static_cast<double>(d.eval(params.data()));
  return n;
}

double kernel_flops(const Kernel& k, const std::vector<int64_t>& params) {
  int ops = 0;
  for (const Value& v : k.body)
    if (v.kind == ValueKind::Unary || v.kind == ValueKind::Binary || v.kind == ValueKind::Select ||
        v.kind == ValueKind::Reduce)
      ++ops;
  return ops * elements(k, params);
}

}  // namespace

std::string lowered_text(const AotState& s) {
  const Plan& plan = s.plan->plan;
  std::ostringstream os;
  os << "kiln lowered 1\n";
  bool shapeless = s.shapeless;
  os << "signature" << (shapeless ? " shapeless" : "") << ":";
  for (size_t i = 0; i < s.dtypes.size(); ++i)
    os << (i ? ", " : " ") << type_str(s.dtypes[i], s.shapes[i]);
  os << " ->";
  for (size_t i = 0; i < s.plan->out_shapes.size(); ++i)
    os << (i ? ", " : " ") << type_str(plan.slots()[plan.outputs[i]].dtype, s.plan->out_shapes[i]);
  os << "\ngraph:\n" << s.graph;
  os << "plan:\n" << plan.str();
  os << "placements:\n";
  for (size_t l = 0; l < plan.lanes().size(); ++l)
    os << "  lane " << l << ": " << lane_text(plan.lanes()[l]) << "\n";
  for (size_t t = 0; t < plan.tasks().size(); ++t) {
    const Task& task = plan.tasks()[t];
    os << "  task " << t << " " << task.name << " on " << lane_label(plan.lanes()[task.lane])
       << "\n";
  }
  os << "kernels:\n";
  for (const Task& task : plan.tasks())
    if (task.kernel) os << task.kernel->str();
  return os.str();
}

namespace {

std::string bytes_str(double b) {
  std::ostringstream os;
  os.precision(3);
  if (b >= 1 << 20)
    os << b / (1 << 20) << " MiB";
  else if (b >= 1 << 10)
    os << b / (1 << 10) << " KiB";
  else
    os << b << " B";
  return os.str();
}

}  // namespace

Lowered CompiledFunction::lower(const std::vector<Array>& example_args) const {
  if (!impl_)
    throw_error(
        "lower: this CompiledFunction is empty (default-constructed or moved from); make "
        "one with kiln::compile(fn)");
  if (is_tracing())
    throw_error("lower: called while another function is being traced; lower outside any trace");
  auto s = std::make_shared<AotState>();
  s->impl = impl_;
  std::vector<Array> state = impl_->state_inputs();
  std::tie(s->entry, s->plan) = impl_->prepare(example_args, state);
  for (const Array& a : example_args)
    s->dtypes.push_back(a.dtype()), s->shapes.push_back(a.shape());
  s->shapeless = impl_->options.shapeless;
  s->graph = graph_text(*s->entry);
  Lowered l;
  l.s_ = std::move(s);
  return l;
}

std::string Lowered::as_text() const { return lowered_text(*s_); }

Executable Lowered::compile() const {
  prepare(s_->plan->plan);
  Executable e;
  e.s_ = s_;
  return e;
}

CostAnalysis Lowered::cost_analysis() const {
  const Plan& plan = s_->plan->plan;
  CostAnalysis c;
  for (const Task& t : plan.tasks()) {
    CostAnalysis::Device& d = c.devices[lane_label(plan.lanes()[t.lane])];
    double read = 0, written = 0;
    if (t.kind == TaskKind::Kernel) {
      ++d.kernels;
      d.flops += kernel_flops(*t.kernel, t.params);
      for (size_t b = 0; b < t.slots.size(); ++b)
        (t.kernel->buffers[b].output ? written : read) += plan.slots()[t.slots[b]].bytes();
    } else if (t.kind == TaskKind::Copy) {
      ++d.copies;
      read = written = plan.slots()[t.slots[1]].bytes();
    } else if (t.kind == TaskKind::Native) {
      ++d.library_calls;
      for (size_t b = 0; b < t.slots.size(); ++b)
        (t.writes(b) ? written : read) += plan.slots()[t.slots[b]].bytes();
    } else if (t.kind == TaskKind::Matmul) {
      ++d.library_calls;
      const MatmulArgs& m = t.matmul;
      d.flops += 2.0 * m.m * m.n * m.k * std::max<size_t>(1, m.c_offsets.size());
      read = plan.slots()[t.slots[0]].bytes() + plan.slots()[t.slots[1]].bytes();
      written = plan.slots()[t.slots[2]].bytes();
    }
    d.bytes_read += read;
    d.bytes_written += written;
  }
  for (const auto& [name, d] : c.devices) {
    c.total.flops += d.flops;
    c.total.bytes_read += d.bytes_read;
    c.total.bytes_written += d.bytes_written;
    c.total.kernels += d.kernels;
    c.total.copies += d.copies;
    c.total.library_calls += d.library_calls;
  }
  return c;
}

std::string CostAnalysis::str() const {
  std::ostringstream os;
  auto line = [&](const std::string& name, const Device& d) {
    os << name << ": " << d.flops << " flops, " << bytes_str(d.bytes_read) << " read, "
       << bytes_str(d.bytes_written) << " written, " << d.kernels << " kernels, " << d.copies
       << " copies, " << d.library_calls << " library calls\n";
  };
  for (const auto& [name, d] : devices) line(name, d);
  line("total", total);
  return os.str();
}

std::vector<Array> Executable::operator()(const std::vector<Array>& args) const {
  const AotState& s = *s_;
  bool any_shape = s.shapeless && s.impl;  // a loaded artifact runs the shapes it was saved for
  if (args.size() != s.dtypes.size())
    throw_error("Executable: takes ", s.dtypes.size(), " arguments, got ", args.size());
  // A loaded artifact holds one lowering: its buffer sizes and launch values are those of the
  // shapes it was saved with, and lowering for others needs the traced graph, which it does not
  // carry. Arguments of the right dtypes at other shapes raise naming both signatures, saying
  // so outright when the function was shapeless (its text still reads "signature shapeless").
  if (!s.impl) {
    bool dtypes = true, shapes = true;
    for (size_t i = 0; i < args.size(); ++i) {
      dtypes = dtypes && args[i].dtype() == s.dtypes[i];
      shapes = shapes && args[i].shape() == s.shapes[i];
    }
    if (dtypes && !shapes) {
      std::ostringstream given, saved;  // not string +: GCC 12's false -Wstringop-overflow
      for (size_t i = 0; i < args.size(); ++i) {
        given << (i ? ", " : "") << type_str(args[i].dtype(), args[i].shape());
        saved << (i ? ", " : "") << type_str(s.dtypes[i], s.shapes[i]);
      }
      throw_error("Executable: called with ", given.str(), "; this artifact runs only ",
                  saved.str(),
                  s.shapeless ? ", the shapes its shapeless function was lowered for (an "
                                "artifact holds one lowering, not the traced graph)"
                              : ", the shapes it was lowered for",
                  "; lower the function at these shapes and save it again");
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    bool same = args[i].dtype() == s.dtypes[i] &&
                (any_shape ? args[i].ndim() == static_cast<int>(s.shapes[i].size())
                           : args[i].shape() == s.shapes[i]);
    if (!same)
      throw_error("Executable: argument ", i, " is ", type_str(args[i].dtype(), args[i].shape()),
                  "; it was lowered for ", type_str(s.dtypes[i], s.shapes[i]),
                  any_shape ? " (shapeless: any shape of that rank)" : "",
                  s.impl ? "; lower the function again for these arguments"
                         : "; a loaded artifact runs the shapes it was saved with");
  }
  if (!s.impl) return run_plan(s.plan, args);
  std::vector<Array> state = s.impl->state_inputs();
  std::shared_ptr<ShapePlan> plan = s.plan;
  if (any_shape) {
    std::vector<Array> all = args;
    all.insert(all.end(), state.begin(), state.end());
    plan = s.impl->lowered_for(*s.entry, all);
  }
  return s.impl->run(*s.entry, plan, args, std::move(state));
}

std::string Executable::as_text() const { return lowered_text(*s_); }

std::string Executable::artifact() const { return artifact_text(*s_); }

std::vector<int> Executable::output_ranks() const {
  const Plan& plan = s_->plan->plan;
  if (plan.output_ranks.empty()) return std::vector<int>(plan.outputs.size(), -1);
  return plan.output_ranks;
}

void Executable::save(const std::string& path) const {
  std::string text = artifact();
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw_error("save: cannot write ", path, "; give a path in a writable folder");
}

Executable Executable::load(const std::string& path, const DeviceMap& remap) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("Executable::load: cannot open ", path);
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > (size_t(1) << 32))
      throw_error("Executable::load: ", path, " is over 4 GiB; it is not a Kiln artifact");
  }
  Executable e;
  e.s_ = read_artifact(text, path, remap);
  return e;
}

Executable Executable::from_artifact(std::string_view text, const DeviceMap& remap) {
  Executable e;
  e.s_ = read_artifact(text, "artifact", remap);
  return e;
}

MemoryAnalysis Executable::memory_analysis() const {
  const Plan& plan = s_->plan->plan;
  MemoryAnalysis m;
  std::vector<bool> group_seen(plan.storage_groups(), false), donated(plan.slots().size(), false);
  for (const Donation& d : plan.donations()) donated[d.output] = true;
  for (size_t i = 0; i < plan.slots().size(); ++i) {
    const Slot& slot = plan.slots()[i];
    std::string dev = slot.lane >= 0 ? lane_label(plan.lanes()[slot.lane]) : "host arguments";
    MemoryAnalysis::Device& d = m.devices[dev];
    int g = plan.storage(static_cast<int>(i));
    if (slot.kind == SlotKind::Input) {
      d.argument_bytes += slot.bytes();
    } else if (slot.kind == SlotKind::Output) {
      (donated[i] ? d.donated_bytes : d.output_bytes) += slot.bytes();
    } else if (plan.input_of(static_cast<int>(i)) >= 0) {  // a copy of an argument
      d.argument_copy_bytes += slot.bytes();
    } else if (g < 0) {
      d.temp_bytes += slot.bytes();
    } else if (!group_seen[g]) {
      group_seen[g] = true;
      d.temp_bytes += plan.storage_bytes(g);
    }
  }
  return m;
}

size_t MemoryAnalysis::peak_bytes() const {
  size_t n = 0;
  for (const auto& [name, d] : devices) n += d.argument_bytes + d.output_bytes + d.temp_bytes;
  return n;
}

std::string MemoryAnalysis::str() const {
  std::ostringstream os;
  for (const auto& [name, d] : devices)
    os << name << ": arguments " << bytes_str(double(d.argument_bytes)) << ", outputs "
       << bytes_str(double(d.output_bytes)) << " (+ " << bytes_str(double(d.donated_bytes))
       << " in donated arguments), argument copies " << bytes_str(double(d.argument_copy_bytes))
       << " (aliases on the argument's device), temporaries " << bytes_str(double(d.temp_bytes))
       << "\n";
  os << "peak " << bytes_str(double(peak_bytes())) << "\n";
  return os.str();
}

}  // namespace kiln
