// AOT artifacts: the lowered text form plus what running needs beyond it (task kinds, launch
// params, matmul shapes, output shapes, captured constants' bytes) and a checksum. Reading
// checks the version, the checksum, every field and every index, rebuilds the Plan, validates
// each kernel, and finally renders the text form again and requires it to equal the file's.
#include <cstdio>
#include <set>
#include <sstream>

#include "backends/kernel_text.h"
#include "backends/native.h"
#include "compile/aot_state.h"
#include "distributed/group.h"
#include "graph/array_node.h"
#include "graph/error.h"
#include "graph/hash.h"
#include "graph/ops.h"

namespace kiln {

namespace {

constexpr std::string_view kVersionLine = "kiln artifact 1";
constexpr int64_t kMaxElements = int64_t(1) << 40;

template <typename T>
std::string paren_list(const std::vector<T>& v) {
  std::ostringstream os;  // not string concatenation: GCC 12's false -Wrestrict (bug 105329)
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ")";
  return os.str();
}

// --- reading ----------------------------------------------------------------------------------

Dtype read_dtype(TextReader& r) {
  std::string name = r.word();
  try {
    return dtype_from_name(name);
  } catch (const Error&) {
    r.fail("a dtype name (float32, int64, bool, ...)");
  }
}

// "(4, 8)", "(4,)" (one axis, as Python writes it) or "()".
Shape read_shape(TextReader& r) {
  Shape s;
  r.expect("(");
  if (r.accept(")")) return s;
  for (;;) {
    int64_t e = r.integer();
    if (e < 0 || e > kMaxElements) r.fail("an extent between 0 and 2^40");
    if (s.size() == 64) r.fail("at most 64 axes");
    s.push_back(e);
    if (!r.accept(",")) break;
    if (s.size() == 1 && r.accept(")")) return s;
    r.expect(" ");
  }
  r.expect(")");
  return s;
}

std::vector<int64_t> read_list(TextReader& r) {
  std::vector<int64_t> v;
  r.expect("(");
  if (r.accept(")")) return v;
  do {
    if (v.size() == (1u << 20)) r.fail("a list of at most 2^20 items");
    v.push_back(r.integer());
  } while (r.accept(","));
  r.expect(")");
  return v;
}

int index_below(TextReader& r, int64_t v, size_t size, const char* what) {
  if (v < 0 || v >= static_cast<int64_t>(size))
    r.fail(std::string("a ") + what + " index below " + std::to_string(size));
  return static_cast<int>(v);
}

Device read_device(TextReader& r) {
  std::string w = r.word();
  size_t colon = w.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == w.size() || w.size() > 64)
    r.fail("a device such as cpu:0");
  Device d;
  d.backend = w.substr(0, colon);
  int64_t index = 0;
  for (char c : w.substr(colon + 1)) {
    if (c < '0' || c > '9' || index > 100000) r.fail("a device index");
    index = index * 10 + (c - '0');
  }
  d.index = static_cast<int>(index);
  return d;
}

LaneSpec read_lane(TextReader& r) {
  LaneSpec l;
  if (r.accept("caller's stream")) return l;
  if (r.accept("placement ")) {
    l.origin = StreamOrigin::Placement;
    l.stream.device = read_device(r);
    return l;
  }
  r.expect("stream ");
  l.origin = StreamOrigin::Explicit;
  int64_t index = r.integer();
  if (index < 0 || index > 100000) r.fail("a stream index");
  l.stream.index = static_cast<int>(index);
  r.expect(" on ");
  l.stream.device = read_device(r);
  return l;
}

struct Parsed {
  std::vector<Dtype> dtypes;
  std::vector<Shape> shapes;
  std::vector<Dtype> out_dtypes;
  std::vector<Shape> out_shapes;
  bool shapeless = false;
  std::string graph;
  std::vector<LaneSpec> lanes;
  std::vector<Slot> slots;
  std::vector<Task> tasks;
  std::vector<int> inputs, outputs;
  std::vector<int> output_ranks;  // placement on ranks: this part's rank, the world's size
  int part_rank = -1, part_ranks = 0;
};

void read_types(TextReader& r, std::vector<Dtype>& dtypes, std::vector<Shape>& shapes) {
  if (r.at_end_of_line()) return;
  do {
    r.accept(" ");
    dtypes.push_back(read_dtype(r));
    shapes.push_back(read_shape(r));
  } while (r.accept(","));
}

void read_signature(TextReader& r, Parsed& p) {
  r.expect("kiln lowered 1");
  r.expect_end_of_line();
  r.next_line();
  r.expect("signature");
  p.shapeless = r.accept(" shapeless");
  r.expect(":");
  if (!r.accept(" ->")) {
    read_types(r, p.dtypes, p.shapes);
    r.expect(" ->");
  }
  read_types(r, p.out_dtypes, p.out_shapes);
  r.expect_end_of_line();
  r.next_line();
}

// The graph section is kept as text (it is for people; running needs only the plan).
void read_graph(TextReader& r, Parsed& p) {
  r.expect("graph:");
  r.expect_end_of_line();
  r.next_line();
  while (r.accept("  ")) {
    p.graph += "  " + r.rest() + "\n";
    r.next_line();
  }
}

void read_plan(TextReader& r, Parsed& p) {
  r.expect("plan:");
  r.expect_end_of_line();
  r.next_line();
  while (r.accept("lane ")) {
    if (r.integer() != static_cast<int64_t>(p.lanes.size())) r.fail("lanes numbered in order");
    r.expect(": ");
    LaneSpec l = read_lane(r);
    for (const LaneSpec& other : p.lanes)
      if (other == l) r.fail("a lane unlike the ones before (Kiln writes each lane once)");
    p.lanes.push_back(l);
    r.expect_end_of_line();
    r.next_line();
  }
  while (r.accept("slot ")) {
    if (r.integer() != static_cast<int64_t>(p.slots.size())) r.fail("slots numbered in order");
    Slot s;
    r.expect(": ");
    s.dtype = read_dtype(r);
    r.expect("[");
    s.elements = r.integer();
    if (s.elements < 0 || s.elements > kMaxElements) r.fail("an element count below 2^40");
    r.expect("] lane ");
    int64_t lane = r.integer();
    if (lane < -1 || lane >= static_cast<int64_t>(p.lanes.size())) r.fail("a lane index");
    s.lane = static_cast<int>(lane);
    if (r.accept(" input "))
      s.kind = SlotKind::Input, s.index = index_below(r, r.integer(), 1 << 20, "input");
    else if (r.accept(" output "))
      s.kind = SlotKind::Output, s.index = index_below(r, r.integer(), 1 << 20, "output");
    else
      r.expect(" temp");
    r.expect_end_of_line();
    p.slots.push_back(s);
    r.next_line();
  }
  while (r.accept("task ")) {
    size_t t = p.tasks.size();
    if (r.integer() != static_cast<int64_t>(t)) r.fail("tasks numbered in order");
    Task task;
    r.expect(": ");
    task.name = r.word();
    r.expect(" lane ");
    task.lane = index_below(r, r.integer(), p.lanes.size(), "lane");
    r.expect(" slots");
    for (int64_t s : read_list(r)) task.slots.push_back(index_below(r, s, p.slots.size(), "slot"));
    r.expect(" deps");
    // Only earlier tasks: the order in the file is a topological order, so no cycle can hide.
    for (int64_t d : read_list(r)) task.deps.push_back(index_below(r, d, t, "earlier task"));
    // A matmul's operands read transposed: taken from the artifact section's task line, and
    // this line must equal the plan rendered from it (checked at the end).
    if (r.accept(" transposed ")) r.word();
    r.expect_end_of_line();
    p.tasks.push_back(std::move(task));
    r.next_line();
  }
}

void skip_placements(TextReader& r) {
  r.expect("placements:");
  r.expect_end_of_line();
  r.next_line();
  while (r.accept("  ")) r.next_line();  // rendered from the plan; compared at the end
}

void read_kernels(TextReader& r, std::vector<Kernel>& kernels) {
  r.expect("kernels:");
  r.expect_end_of_line();
  r.next_line();
  while (r.line().substr(0, 7) == "kernel ") {
    if (kernels.size() == (1u << 16)) r.fail("at most 2^16 kernels");
    kernels.push_back(read_kernel(r));
  }
}

std::vector<uint8_t> read_hex(TextReader& r, size_t bytes) {
  std::string h = r.rest();
  if (h.size() != 2 * bytes) r.fail(std::to_string(2 * bytes) + " hex digits of data");
  auto nib = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    r.fail("lower-case hex digits");
  };
  std::vector<uint8_t> out(bytes);
  for (size_t i = 0; i < bytes; ++i)
    out[i] = static_cast<uint8_t>(nib(h[2 * i]) * 16 + nib(h[2 * i + 1]));
  return out;
}

// A native primitive's arguments: "OP DTYPE outer O n N inner I m M scan S descending B
// reverse B inclusive B shared B" (the words native_text writes).
NativeArgs read_native(TextReader& r) {
  NativeArgs a;
  r.expect(" ");
  std::string op = r.word();
  bool found = false;
  for (Op o : {Op::Sort, Op::Argsort, Op::Scan, Op::Gather, Op::ScatterAdd, Op::AllReduce,
               Op::AllGather, Op::SumScatter, Op::Send, Op::Recv})
    if (op == op_name(o)) a.op = o, found = true;
  if (!found)
    r.fail(
        "a native primitive: sort, argsort, scan, gather, scatter_add, all_reduce, "
        "all_gather, sum_scatter, send or recv");
  r.expect(" ");
  a.dtype = read_dtype(r);
  auto extent = [&](const char* name) {
    r.expect(name);
    int64_t v = r.integer();
    if (v < 0 || v > kMaxElements) r.fail(std::string("a native extent between 0 and 2^40"));
    return v;
  };
  a.outer = extent(" outer "), a.n = extent(" n "), a.inner = extent(" inner "),
  a.m = extent(" m ");
  r.expect(" scan ");
  std::string scan = r.word();
  found = false;
  for (ScanOp s : {ScanOp::Sum, ScanOp::Prod, ScanOp::Max, ScanOp::Min, ScanOp::LogAddExp})
    if (scan == op_name(s)) a.scan = s, found = true;
  if (!found) r.fail("a scan: cumsum, cumprod, cummax, cummin or logcumsumexp");
  auto flag = [&](const char* name) {
    r.expect(name);
    int64_t v = r.integer();
    if (v != 0 && v != 1) r.fail("a flag of 0 or 1");
    return v == 1;
  };
  a.descending = flag(" descending "), a.reverse = flag(" reverse ");
  a.inclusive = flag(" inclusive "), a.shared_index = flag(" shared ");
  if (is_collective(a.op)) {  // " reduce R group G peer P": the group by its id in the process
    r.expect(" reduce ");
    std::string red = r.word();
    found = false;
    for (ReduceOp o : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
      if (red == op_name(o)) a.reduce = o, found = true;
    if (!found) r.fail("a collective's reduction: sum, max or min");
    r.expect(" group ");
    int64_t g = r.integer();
    r.expect(" peer ");
    int64_t peer = r.integer();
    if (g < 0 || g > (1 << 20) || peer < -1 || peer > (1 << 24))
      r.fail("a group id >= 0 and a peer rank >= -1");
    a.group = static_cast<int>(g), a.peer = static_cast<int>(peer);
    if (r.accept(" tag ")) {  // a cut edge's message (placement on ranks)
      int64_t tag = r.integer();
      if ((a.op != Op::Send && a.op != Op::Recv) || tag < 1 || tag > (int64_t(1) << 30))
        r.fail("a message tag between 1 and 2^30 on a send or recv");
      a.tag = static_cast<int>(tag);
    }
  }
  return a;
}

// The "artifact:" section; fills task kinds, params, matmul shapes; returns the constants.
std::vector<Array> read_extra(TextReader& r, Parsed& p, std::vector<Kernel>& kernels) {
  r.expect("artifact:");
  r.expect_end_of_line();
  r.next_line();
  r.expect("inputs ");
  for (int64_t s : read_list(r)) p.inputs.push_back(index_below(r, s, p.slots.size(), "slot"));
  r.expect_end_of_line();
  r.next_line();
  r.expect("outputs ");
  for (int64_t s : read_list(r)) p.outputs.push_back(index_below(r, s, p.slots.size(), "slot"));
  r.expect_end_of_line();
  r.next_line();
  if (r.accept("part of rank ")) {  // placement on ranks: "part of rank R of N outputs (..)"
    p.part_rank = static_cast<int>(r.integer());
    r.expect(" of ");
    p.part_ranks = static_cast<int>(r.integer());
    r.expect(" output ranks ");
    for (int64_t o : read_list(r)) {
      if (o < -1 || o >= p.part_ranks) r.fail("output ranks of -1 or below the world's size");
      p.output_ranks.push_back(static_cast<int>(o));
    }
    if (p.part_rank < 0 || p.part_rank >= p.part_ranks || p.part_ranks > (1 << 20) ||
        p.output_ranks.size() != p.outputs.size())
      r.fail("a rank below the world's size and a rank per output");
    r.expect_end_of_line();
    r.next_line();
  }
  if (p.outputs.size() != p.out_shapes.size()) r.fail("as many outputs as the signature has");
  if (p.inputs.size() < p.shapes.size()) r.fail("at least as many inputs as the signature has");
  size_t next_kernel = 0;
  for (size_t t = 0; t < p.tasks.size(); ++t) {
    Task& task = p.tasks[t];
    r.expect("task ");
    if (r.integer() != static_cast<int64_t>(t)) r.fail("task " + std::to_string(t));
    r.expect(" ");
    std::string kind = r.word();
    if (kind == "copy") {
      task.kind = TaskKind::Copy;
      if (task.slots.size() != 2) r.fail("a copy with 2 slots");
    } else if (kind == "kernel") {
      task.kind = TaskKind::Kernel;
      if (next_kernel == kernels.size()) r.fail("a kernel listed for every kernel task");
      task.kernel = std::make_shared<const Kernel>(std::move(kernels[next_kernel++]));
      r.expect(" params ");
      task.params = read_list(r);
      if (task.kernel->name != task.name)
        r.fail("kernel " + task.name + " for task " + std::to_string(t) + " (found kernel " +
               task.kernel->name + ")");
      if (task.slots.size() != task.kernel->buffers.size())
        r.fail("as many slots as kernel " + task.kernel->name + " has buffers");
    } else if (kind == "matmul") {
      task.kind = TaskKind::Matmul;
      MatmulArgs& m = task.matmul;
      r.expect(" ");
      m.dtype = read_dtype(r);
      r.expect(" m "), m.m = r.integer();
      r.expect(" n "), m.n = r.integer();
      r.expect(" k "), m.k = r.integer();
      if (m.m < 0 || m.n < 0 || m.k < 0 || m.m > kMaxElements || m.n > kMaxElements ||
          m.k > kMaxElements)
        r.fail("matmul sizes between 0 and 2^40");
      r.expect(" a "), m.a_offsets = read_list(r);
      r.expect(" b "), m.b_offsets = read_list(r);
      r.expect(" c "), m.c_offsets = read_list(r);
      // Operands read in place transposed: "transposed a", "b" or "ab"; none in artifacts
      // written before Kiln read transposed operands (they hold a copy task instead).
      if (r.accept(" transposed ")) {
        m.trans_a = r.accept("a");
        m.trans_b = r.accept("b");
        if (!m.trans_a && !m.trans_b) r.fail("'a', 'b' or 'ab' after 'transposed'");
      }
      if (task.slots.size() != 3) r.fail("a matmul with 3 slots");
    } else if (kind == "native") {
      task.kind = TaskKind::Native;
      task.native = read_native(r);
    } else {
      r.fail("a task kind: copy, kernel, matmul or native");
    }
    r.expect_end_of_line();
    r.next_line();
  }
  if (next_kernel != kernels.size()) r.fail("no more kernels than kernel tasks");
  std::vector<Array> constants;
  for (size_t i = p.shapes.size(); i < p.inputs.size(); ++i) {
    const Slot& s = p.slots[p.inputs[i]];
    r.expect("constant ");
    if (r.integer() != static_cast<int64_t>(i)) r.fail("constant " + std::to_string(i));
    r.expect(" ");
    std::vector<uint8_t> data = read_hex(r, s.bytes());
    constants.push_back(array_from_bytes(data.data(), data.size(), {s.elements}, s.dtype));
    r.next_line();
  }
  return constants;
}

// Bounds the plan's own invariants the executor relies on, beyond the per-line checks.
void check_plan(TextReader& r, const Parsed& p) {
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const Slot& s = p.slots[p.inputs[i]];
    if (s.kind != SlotKind::Input || s.index != static_cast<int>(i))
      r.fail("inputs that are the slots marked 'input " + std::to_string(i) + "'");
    if (i < p.shapes.size() && (s.dtype != p.dtypes[i] || s.elements != shape_size(p.shapes[i])))
      r.fail("input " + std::to_string(i) + " slot matching the signature");
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const Slot& s = p.slots[p.outputs[i]];
    if (!p.output_ranks.empty() && p.output_ranks[i] >= 0) {  // another rank's: nothing here
      if (s.elements != 0 || s.kind != SlotKind::Output)
        r.fail("an empty slot for a remote output");
      continue;
    }
    if (s.dtype != p.out_dtypes[i] || s.elements != shape_size(p.out_shapes[i]))
      r.fail("output " + std::to_string(i) + " slot matching the signature");
  }
  for (const Task& t : p.tasks) {
    if (t.kind == TaskKind::Copy && p.slots[t.slots[0]].bytes() != p.slots[t.slots[1]].bytes())
      r.fail("copies between slots of one size (task " + t.name + ")");
    if (t.kind == TaskKind::Kernel)
      for (size_t b = 0; b < t.slots.size(); ++b)
        if (p.slots[t.slots[b]].dtype != t.kernel->buffers[b].dtype)
          r.fail("kernel " + t.kernel->name + " buffers of their slots' dtypes");
    if (t.kind == TaskKind::Native) {
      const NativeArgs& a = t.native;
      std::vector<size_t> bytes;
      for (int s : t.slots) bytes.push_back(p.slots[s].bytes());
      NativeArgs sized = a;
      sized.buffers.assign(t.slots.size(), nullptr);
      if (is_collective(a.op)) {  // {in, out}, Recv's {out}, a cut edge's Send's {in}
        bool recv = a.op == Op::Recv, edge_send = a.op == Op::Send && a.tag > 0;
        if (t.slots.size() != (recv || edge_send ? 1u : 2u) ||
            (!recv && p.slots[t.slots[0]].elements != a.n) ||
            (!edge_send && p.slots[t.slots.back()].elements != a.m))
          r.fail("collective operands of their slots' sizes");
      } else {
        try {
          check_native_args(sized, bytes);
        } catch (const Error& e) {
          r.fail(std::string("native operands inside their slots (") + e.what() + ")");
        }
      }
      bool indexed = a.op == Op::Gather || a.op == Op::ScatterAdd;
      for (size_t b = 0; b < t.slots.size(); ++b) {
        Dtype want = indexed && b == 1 ? int64 : (a.op == Op::Argsort && b == 1 ? int64 : a.dtype);
        if (p.slots[t.slots[b]].dtype != want) r.fail("native operands of their slots' dtypes");
      }
    }
    if (t.kind == TaskKind::Matmul) {
      const MatmulArgs& m = t.matmul;
      size_t batches = m.c_offsets.size();
      if (m.a_offsets.size() != batches || m.b_offsets.size() != batches)
        r.fail("matmul offset lists of one length");
      auto fits = [&](int slot, const std::vector<int64_t>& offs, int64_t n) {
        for (int64_t o : offs)
          if (o < 0 || o + n > p.slots[slot].elements) return false;
        return true;
      };
      if (!fits(t.slots[0], m.a_offsets, m.m * m.k) || !fits(t.slots[1], m.b_offsets, m.k * m.n) ||
          !fits(t.slots[2], m.c_offsets, m.m * m.n))
        r.fail("matmul operands inside their slots");
    }
  }
}

std::shared_ptr<AotState> make_state(const Parsed& p, const std::vector<Array>& constants) {
  auto s = std::make_shared<AotState>();
  s->dtypes = p.dtypes, s->shapes = p.shapes, s->shapeless = p.shapeless, s->graph = p.graph;
  s->plan = std::make_shared<ShapePlan>();
  Plan& plan = s->plan->plan;
  // A remap can make two lanes equal; the plan keeps one, so renumber what refers to them.
  std::vector<int> lane;
  for (const LaneSpec& l : p.lanes) lane.push_back(plan.add_lane(l));
  for (Slot sl : p.slots) {
    if (sl.lane >= 0) sl.lane = lane[sl.lane];
    plan.add_slot(sl);
  }
  for (Task t : p.tasks) {
    t.lane = lane[t.lane];
    plan.add_task(std::move(t));
  }
  plan.inputs = p.inputs;
  plan.outputs = p.outputs;
  plan.output_ranks = p.output_ranks;
  plan.part_rank = p.part_rank, plan.part_ranks = p.part_ranks;
  plan.finalize();
  s->plan->constants = constants;
  s->plan->out_shapes = p.out_shapes;
  return s;
}

}  // namespace

std::string artifact_text(const AotState& s) {
  if (s.impl && (!s.impl->options.inputs.empty() || !s.impl->options.outputs.empty()))
    throw Error(
        "save: this function has captured inputs/outputs state, which an artifact cannot carry "
        "(it lives in the caller's containers); pass the state as arguments and results instead");
  const Plan& plan = s.plan->plan;
  std::ostringstream os;
  os << kVersionLine << "\n" << lowered_text(s) << "artifact:\n";
  os << "inputs " << paren_list(plan.inputs) << "\noutputs " << paren_list(plan.outputs) << "\n";
  if (plan.part_rank >= 0)
    os << "part of rank " << plan.part_rank << " of " << plan.part_ranks << " output ranks "
       << paren_list(plan.output_ranks) << "\n";
  for (size_t t = 0; t < plan.tasks().size(); ++t) {
    const Task& task = plan.tasks()[t];
    os << "task " << t << " ";
    switch (task.kind) {
      case TaskKind::Copy: os << "copy"; break;
      case TaskKind::Kernel: os << "kernel params " << paren_list(task.params); break;
      case TaskKind::Matmul: {
        const MatmulArgs& m = task.matmul;
        os << "matmul " << m.dtype << " m " << m.m << " n " << m.n << " k " << m.k << " a "
           << paren_list(m.a_offsets) << " b " << paren_list(m.b_offsets) << " c "
           << paren_list(m.c_offsets);
        if (m.trans_a || m.trans_b)
          os << " transposed " << (m.trans_a ? "a" : "") << (m.trans_b ? "b" : "");
        break;
      }
      case TaskKind::Native: {
        const NativeArgs& a = task.native;
        os << "native " << op_name(a.op) << " " << a.dtype << " outer " << a.outer << " n " << a.n
           << " inner " << a.inner << " m " << a.m << " scan " << op_name(a.scan) << " descending "
           << a.descending << " reverse " << a.reverse << " inclusive " << a.inclusive << " shared "
           << a.shared_index;
        if (is_collective(a.op))
          os << " reduce " << op_name(a.reduce) << " group " << a.group << " peer " << a.peer;
        if (a.tag > 0) os << " tag " << a.tag;
        break;
      }
      case TaskKind::Host:
        throw Error("save: task " + task.name +
                    " is a host callback, which an artifact cannot carry");
    }
    os << "\n";
  }
  size_t first_constant = s.dtypes.size();
  for (size_t i = 0; i < s.plan->constants.size(); ++i) {
    const Array& c = s.plan->constants[i];
    std::vector<uint8_t> bytes(c.nbytes());
    read_data(c, bytes.data());
    os << "constant " << first_constant + i << " ";
    static const char* digits = "0123456789abcdef";
    std::string hex(2 * bytes.size(), '0');
    for (size_t b = 0; b < bytes.size(); ++b)
      hex[2 * b] = digits[bytes[b] >> 4], hex[2 * b + 1] = digits[bytes[b] & 15];
    os << hex << "\n";
  }
  std::string body = os.str();
  return body + "checksum " + hex64(fnv1a(body)) + "\n";
}

std::shared_ptr<AotState> read_artifact(std::string_view text, const std::string& source,
                                        const std::map<std::string, std::string>& remap,
                                        bool verify_checksum) {
  TextReader r(text, source);
  if (r.line() != kVersionLine)
    r.fail(std::string("'") + std::string(kVersionLine) + "' (this Kiln reads artifact version 1)");
  // The checksum line is last: it covers every byte before it.
  size_t at = text.rfind("\nchecksum ");
  if (verify_checksum) {
    if (at == std::string_view::npos)
      throw Error(source +
                  ": no checksum line at the end: the file is truncated or not an artifact");
    std::string_view tail = text.substr(at + 10);
    if (!tail.empty() && tail.back() == '\n') tail.remove_suffix(1);
    if (tail != hex64(fnv1a(text.substr(0, at + 1))))
      throw Error(source +
                  ": the checksum does not match the contents: the file was truncated, "
                  "damaged or edited after Kiln wrote it");
  }
  r.next_line();
  Parsed p;
  read_signature(r, p);
  read_graph(r, p);
  read_plan(r, p);
  skip_placements(r);
  std::vector<Kernel> kernels;
  read_kernels(r, kernels);
  std::vector<Array> constants = read_extra(r, p, kernels);
  r.expect("checksum ");
  check_plan(r, p);

  // What Kiln writes for this plan must be what the file says: no hand edit slips through.
  std::shared_ptr<AotState> s = make_state(p, constants);
  std::string again = lowered_text(*s);
  std::string_view original = text.substr(text.find('\n') + 1);
  original = original.substr(0, original.find("\nartifact:\n") + 1);
  if (again != original) {
    size_t line = 2, i = 0;
    while (i < again.size() && i < original.size() && again[i] == original[i]) {
      if (again[i] == '\n') ++line;
      ++i;
    }
    throw Error(source + ":" + std::to_string(line) +
                ": the text form differs from what Kiln writes for the plan it describes "
                "(hand-edited?)");
  }
  // A part of a program placed on ranks runs on its rank only.
  if (p.part_rank >= 0) {
    distributed::Group world = distributed::init();
    if (world.rank() != p.part_rank || world.size() != p.part_ranks)
      throw Error(source + ": it holds rank " + std::to_string(p.part_rank) +
                  "'s part of a program placed on " + std::to_string(p.part_ranks) +
                  " ranks; this is rank " + std::to_string(world.rank()) + " of " +
                  std::to_string(world.size()) +
                  " (save one artifact per rank and run each on its own: mpiexec -n " +
                  std::to_string(p.part_ranks) + " kiln run model.{rank}.kiln ...)");
  }
  // Devices: remapped ones replaced, then every device must be usable here. A remap naming a
  // device the artifact does not place work on is a mistake (a misspelt name would otherwise
  // leave the work where it was).
  std::set<std::string> placed;
  for (const LaneSpec& l : p.lanes)
    if (l.origin != StreamOrigin::Default) placed.insert(l.stream.device.str());
  for (const auto& [from, to] : remap)
    if (!placed.count(from)) {
      std::string names;
      for (const std::string& n : placed) names += (names.empty() ? "" : ", ") + n;
      throw Error(source + ": cannot remap " + from + ": the artifact places no work on it (" +
                  (names.empty() ? std::string("it places work on no device; everything follows "
                                               "the caller's stream")
                                 : "it places work on " + names) +
                  ")");
    }
  bool remapped = false;
  for (LaneSpec& l : p.lanes) {
    if (l.origin == StreamOrigin::Default) continue;
    std::string name = l.stream.device.str();
    if (auto it = remap.find(name); it != remap.end()) {
      try {
        l.stream.device = device(it->second);
      } catch (const Error& e) {
        throw Error(source + ": cannot remap " + name + " to " + it->second + ": " + e.what());
      }
      remapped = true;
    }
    try {
      check_device(l.stream.device);
    } catch (const Error& e) {
      throw Error(source + ": it places work on " + name + ", which this machine cannot run (" +
                  e.what() + "); remap it, e.g. Executable::load(path, {{\"" + name +
                  "\", \"cpu:0\"}})");
    }
  }
  if (remapped) s = make_state(p, constants);
  return s;
}

}  // namespace kiln
