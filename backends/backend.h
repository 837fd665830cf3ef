// The whole contract between Kiln and a backend, kept as narrow as IREE's HAL: list devices,
// allocate buffers, compile a Kernel for a device, create a queue per lane, enqueue kernels,
// copies and library calls, and wait. Host backends (reference, cpu) run enqueued work inline and
// return no event; device backends (OpenCL, Vulkan) return an Event that completes later.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/devices.h"
#include "backends/kernel_ir.h"
#include "graph/buffer.h"
#include "graph/device.h"

namespace kiln {

// Completion of enqueued device work. Callbacks may run on a driver thread; they must be cheap
// and must not block.
class Event {
 public:
  virtual ~Event() = default;
  // Calls f exactly once when the work completes (immediately if it already has), with the
  // error that stopped it or nullptr.
  virtual void on_complete(std::function<void(std::exception_ptr)> f) = 0;
  virtual void wait() = 0;  // blocks; rethrows the work's error
};
using EventPtr = std::shared_ptr<Event>;

// A completion the host signals (an OpenCL user event): device work can be enqueued before the
// cpu task producing its input has run, and wait for it on the device. Completed exactly once;
// a backend completes a dropped, uncompleted signal with an error so no queue waits forever.
class Signal {
 public:
  virtual ~Signal() = default;
  virtual EventPtr event() = 0;  // what Queue::enqueue_wait takes
  virtual void complete(std::exception_ptr error) = 0;
};

// A Kernel compiled for one device; opaque to everyone but its backend.
class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
};

struct KernelArgs {
  std::vector<Buffer*> buffers;  // in Kernel::buffers order
  std::vector<int64_t> params;   // runtime Dims
};

// C[i] = A[i] @ B[i] for each batch i, row-major contiguous m x k and k x n operands placed at
// the given element offsets (batch broadcasting is resolved into the offsets). A transposed
// operand is stored as its transpose: A as k x m when trans_a, B as n x k when trans_b (the
// lowering passes x @ w.T with w as stored instead of copying w.T). Every backend reads both.
struct MatmulArgs {
  Dtype dtype;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::vector<int64_t> a_offsets, b_offsets, c_offsets;
  Buffer* a = nullptr;
  Buffer* b = nullptr;
  Buffer* c = nullptr;
};

// A native primitive (Op::Sort, Argsort, Scan, Gather, ScatterAdd; graph/primitives.h) over
// row-major contiguous buffers. The input is viewed as (outer, n, inner) and the op works along
// n, independently for each (outer, inner) pair; gathers and scatters read or write m places
// along it, at indices that are int64, counted from the end when negative and clamped to
// [0, n - 1] (the op layer's documented rule). Buffers, bound per call:
//   Sort, Argsort: {in, out}; Scan: {in, out}, both (outer, n, inner);
//   Gather: {a (outer, n, inner), indices, out (outer, m, inner)};
//   ScatterAdd: {a (outer, n, inner), indices, updates (outer, m, inner), out like a}.
// indices are (m) shared by every row when `shared_index`, else (outer, m, inner).
// `dtype` is the data's (in, a, out; Argsort's out is int64).
struct NativeArgs {
  Op op = Op::Sort;
  Dtype dtype = float32;
  int64_t outer = 1, n = 0, inner = 1, m = 0;
  ScanOp scan = ScanOp::Sum;
  bool descending = false, reverse = false, inclusive = true, shared_index = false;
  // Collectives (Op::AllReduce .. Recv), which never reach a backend: the executor hands them to
  // distributed/. Buffers {in, out} ({out} for Recv) of n and m elements.
  ReduceOp reduce = ReduceOp::Sum;
  int group = 0, peer = -1;
  // Send and Recv of a cut edge (placement on ranks): edge + 1, the message's tag; buffers {in}
  // of n elements (Send: it writes nothing) or {out} of m. 0: a collective or the user's send
  // and recv.
  int tag = 0;
  std::vector<Buffer*> buffers;
  int64_t out_elements() const { return outer * inner * (op == Op::Gather ? m : n); }
};

// One ordered lane of work on one device: work runs in submission order, and work enqueued
// after other work sees its results (an in-order queue), so the executor may enqueue a chain of
// tasks on one queue without waiting between them.
class Queue {
 public:
  virtual ~Queue() = default;
  // Each returns nullptr when the work already completed (host backends) or an Event.
  // Errors of inline work are thrown; errors of device work arrive through the Event.
  virtual EventPtr enqueue_kernel(const CompiledKernel& k, const KernelArgs& args) = 0;
  // Copies into this queue's device memory (from host memory or the device itself), or out of
  // it into host memory: the executor sends a copy from device memory into an inline lane
  // (a cpu lane) to a queue of the source device, so no host thread blocks on the transfer.
  virtual EventPtr enqueue_copy(Buffer& src, Buffer& dst, size_t bytes) = 0;
  virtual EventPtr enqueue_matmul(const MatmulArgs& args) = 0;
  // A native primitive; a backend without it raises kiln::Error naming the op (never runs it
  // elsewhere).
  virtual EventPtr enqueue_native(const NativeArgs& args);
  virtual void finish() = 0;  // waits for all enqueued work
  // Device-side ordering between lanes: whether enqueue_wait accepts events of other queues on
  // the same device and of this queue's signals (create_signal), and the call itself, which
  // makes the work enqueued on this queue from now on wait, on the device, for `events` (no
  // host thread waits). Returns false when it cannot; the executor then orders the work on
  // the host.
  virtual bool waits_on_device() const { return false; }
  virtual bool enqueue_wait(const std::vector<EventPtr>& events) {
    (void)events;
    return false;
  }
  // A signal device work on this device can wait for; null when the queue has none.
  virtual std::shared_ptr<Signal> create_signal() { return nullptr; }
  // True when enqueue_* complete the work before returning (host backends).
  virtual bool runs_inline() const = 0;
  // Commands accepted but not yet given to the device, each with why it is held back (an
  // OpenCL queue defers a call that may block behind a host wait; backends/opencl/host_gate.h).
  // For pending_work(); thread-safe.
  virtual std::vector<std::string> held() const { return {}; }
  // How many device-only submissions a caller may keep in flight on this queue before its next
  // one waits for the oldest (a driver whose per-command cost grows with its backlog), and how
  // many bytes of their outputs (a loop whose outputs in flight outgrow the device's cache reads
  // and writes every step in memory); 0: no bound. Read by the executor at each submission.
  virtual size_t calls_ahead() const { return 0; }
  virtual size_t bytes_ahead() const { return 0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::vector<DeviceInfo> devices() = 0;
  // True when kernels can read and write host memory (a HostBuffer) directly, so plans need no
  // copy for host-resident inputs.
  virtual bool uses_host_memory() const = 0;
  virtual std::shared_ptr<Buffer> allocate(int device, size_t bytes) = 0;
  // Compiles (or finds in the backend's cache, keyed by Kernel::hash()) a kernel. Must be
  // thread-safe: the executor compiles a plan's kernels concurrently. The kernel's code lives
  // at least as long as the returned handle, whatever the backend's cache evicts.
  virtual std::shared_ptr<const CompiledKernel> compile(int device, const Kernel& k) = 0;
  // Whether compile() takes row kernels (kernel_ir.h, invariant 6). A backend that does not
  // gets each pass compiled as a kernel of its own, enqueued one after another on its queue
  // (backends/row_passes.h).
  virtual bool runs_row_kernels() const { return false; }
  virtual std::unique_ptr<Queue> create_queue(int device) = 0;
};

}  // namespace kiln
