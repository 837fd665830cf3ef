// The transport over MPI (Open MPI here): MPI_Init_thread at start, MPI_Comm_split for groups,
// and non-blocking collectives (MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block) and
// messages (MPI_Isend, MPI_Irecv) that the engine's progress thread completes with MPI_Test.
// Built only when CMake found MPI (KILN_HAVE_MPI).
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <thread>
#include <vector>

#include "distributed/transport.h"
#include "graph/error.h"
#include "graph/float16.h"

namespace kiln::distributed {

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw_error("distributed: ", what, " failed: ", std::string(msg, len));
}

MPI_Datatype mpi_type(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool: return MPI_C_BOOL;
    case Dtype::Kind::Int8: return MPI_INT8_T;
    case Dtype::Kind::Int32: return MPI_INT32_T;
    case Dtype::Kind::Int64: return MPI_INT64_T;
    case Dtype::Kind::UInt8: return MPI_UINT8_T;
    case Dtype::Kind::UInt32: return MPI_UINT32_T;
    case Dtype::Kind::UInt64: return MPI_UINT64_T;
    case Dtype::Kind::Float16:
    case Dtype::Kind::BFloat16: return MPI_UINT16_T;  // reduced by the user ops below
    case Dtype::Kind::Float32: return MPI_FLOAT;
    case Dtype::Kind::Float64: return MPI_DOUBLE;
  }
  throw_error("distributed: no MPI type for ", d);
}

// Kiln's maximum and minimum propagate NaN (backends/scalar_ops.h); MPI_MAX and MPI_MIN need
// not, so floating-point max and min are user ops. float16 and bfloat16 have no MPI type: their
// sum, max and min widen to float32 and round back, as Kiln's element-wise ops do.
template <typename T>
T pick(T a, T b, bool max) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return max ? (a < b ? b : a) : (b < a ? b : a);
}

template <typename T, int Kind>  // Kind: 0 max, 1 min
void float_op(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const T*>(in);
  auto* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = pick(a[i], b[i], Kind == 0);
}

template <bool Brain, int Kind>  // Kind: 0 max, 1 min, 2 sum
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = Brain ? bfloat16_bits_to_float(a[i]) : half_bits_to_float(a[i]);
    float y = Brain ? bfloat16_bits_to_float(b[i]) : half_bits_to_float(b[i]);
    float r = Kind == 2 ? x + y : pick(x, y, Kind == 0);
    b[i] = Brain ? float_to_bfloat16_bits(r) : float_to_half_bits(r);
  }
}

class MpiRequest : public Request {
 public:
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Datatype type = MPI_BYTE;
  MPI_Status status{};
  bool test() override {
    int done = 0;
    check(MPI_Test(&req, &done, &status), "MPI_Test");
    return done != 0;
  }
  int64_t received() const override {
    int n = 0;
    MPI_Get_count(&status, type, &n);
    return n;
  }
};

class MpiTransport : public Transport {
 public:
  MpiTransport() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      // The progress thread makes every MPI call after this one; FUNNELED is not enough as it
      // is not the main thread, SERIALIZED is.
      if (provided < MPI_THREAD_SERIALIZED)
        throw_error("distributed: this MPI gives thread level ", provided,
                    "; Kiln needs MPI_THREAD_SERIALIZED or more");
    }
    comms_.push_back(MPI_COMM_WORLD);
    // The exit barrier's own communicator: on MPI_COMM_WORLD it could pair with a collective
    // another rank still waits in.
    check(MPI_Comm_dup(MPI_COMM_WORLD, &exit_comm_), "MPI_Comm_dup");
    // Heartbeats have their own too, so that they never match anything else.
    check(MPI_Comm_dup(MPI_COMM_WORLD, &beat_comm_), "MPI_Comm_dup");
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    beat_sends_.assign(static_cast<size_t>(n), MPI_REQUEST_NULL);
    heard_at_.assign(static_cast<size_t>(n), Clock::time_point{});
    int* ub = nullptr;
    int has_ub = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &has_ub);
    if (has_ub && ub) tag_ub_ = *ub;
    auto op = [&](MPI_User_function* f) {
      MPI_Op o;
      check(MPI_Op_create(f, 1, &o), "MPI_Op_create");
      return o;
    };
    f32_[0] = op(float_op<float, 0>), f32_[1] = op(float_op<float, 1>);
    f64_[0] = op(float_op<double, 0>), f64_[1] = op(float_op<double, 1>);
    f16_[0] = op(half_op<false, 0>), f16_[1] = op(half_op<false, 1>),
    f16_[2] = op(half_op<false, 2>);
    bf16_[0] = op(half_op<true, 0>), bf16_[1] = op(half_op<true, 1>),
    bf16_[2] = op(half_op<true, 2>);
  }

  int world() const override { return 0; }
  int rank(int comm) const override {
    int r = 0;
    MPI_Comm_rank(comms_.at(comm), &r);
    return r;
  }
  int size(int comm) const override {
    int s = 0;
    MPI_Comm_size(comms_.at(comm), &s);
    return s;
  }

  int split(int comm, int color, int key) override {
    MPI_Comm c;
    check(MPI_Comm_split(comms_.at(comm), color, key, &c), "MPI_Comm_split");
    comms_.push_back(c);
    return static_cast<int>(comms_.size()) - 1;
  }

  std::unique_ptr<Request> start(const Work& w) override {
    auto r = std::make_unique<MpiRequest>();
    MPI_Comm c = comms_.at(w.comm);
    MPI_Datatype t = mpi_type(w.dtype);
    r->type = t;
    if (w.count > INT32_MAX) throw_error("distributed: more than 2^31 elements in one message");
    if (w.tag > tag_ub_)
      throw_error("distributed: message tag ", w.tag, " is above this MPI's largest, ", tag_ub_,
                  " (a function placed on ranks with that many cut edges)");
    int n = static_cast<int>(w.count);
    switch (w.op) {
      case Op::AllReduce:
        check(MPI_Iallreduce(w.in, w.out, n, t, reduce_op(w.dtype, w.reduce), c, &r->req),
              "MPI_Iallreduce");
        break;
      case Op::AllGather:
        check(MPI_Iallgather(w.in, n, t, w.out, n, t, c, &r->req), "MPI_Iallgather");
        break;
      case Op::SumScatter:
        check(MPI_Ireduce_scatter_block(w.in, w.out, n / size(w.comm), t,
                                        reduce_op(w.dtype, ReduceOp::Sum), c, &r->req),
              "MPI_Ireduce_scatter_block");
        break;
      case Op::Send: check(MPI_Isend(w.in, n, t, w.peer, w.tag, c, &r->req), "MPI_Isend"); break;
      case Op::Recv: check(MPI_Irecv(w.out, n, t, w.peer, w.tag, c, &r->req), "MPI_Irecv"); break;
      default: throw_error("internal: ", op_name(w.op), " is not a collective");
    }
    return r;
  }

  void notify_exit(int to, const std::vector<int64_t>& counts) override {
    notices_out_.push_back(counts);
    MPI_Request req;
    check(MPI_Isend(notices_out_.back().data(), static_cast<int>(counts.size()), MPI_INT64_T, to,
                    kExitTag, exit_comm_, &req),
          "MPI_Isend");
    sends_.push_back(req);
  }

  bool exit_notice(int& from, std::vector<int64_t>& counts) override {
    int found = 0;
    MPI_Status st;
    check(MPI_Iprobe(MPI_ANY_SOURCE, kExitTag, exit_comm_, &found, &st), "MPI_Iprobe");
    if (!found) return false;
    int n = 0;
    MPI_Get_count(&st, MPI_INT64_T, &n);
    counts.assign(static_cast<size_t>(n), 0);
    check(MPI_Recv(counts.data(), n, MPI_INT64_T, st.MPI_SOURCE, kExitTag, exit_comm_,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
    from = st.MPI_SOURCE;
    heard_at_.at(static_cast<size_t>(from)) = Clock::now();
    heard_++;
    return true;
  }

  void heartbeat() override {
    int me = rank(0);
    for (size_t q = 0; q < beat_sends_.size(); ++q) {
      if (static_cast<int>(q) == me) continue;
      int done = 1;
      if (beat_sends_[q] != MPI_REQUEST_NULL)
        check(MPI_Test(&beat_sends_[q], &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done)  // a peer behind a cut link never takes it: no second one piles up behind it
        check(MPI_Isend(&beat_, 1, MPI_CHAR, static_cast<int>(q), kBeatTag, beat_comm_,
                        &beat_sends_[q]),
              "MPI_Isend");
    }
    take_beats();
  }

  // Receives every heartbeat that has arrived, noting when each peer was last heard from.
  void take_beats() {
    for (;;) {
      int found = 0;
      MPI_Status st;
      check(MPI_Iprobe(MPI_ANY_SOURCE, kBeatTag, beat_comm_, &found, &st), "MPI_Iprobe");
      if (!found) return;
      char b = 0;
      check(MPI_Recv(&b, 1, MPI_CHAR, st.MPI_SOURCE, kBeatTag, beat_comm_, MPI_STATUS_IGNORE),
            "MPI_Recv");
      heard_at_.at(static_cast<size_t>(st.MPI_SOURCE)) = Clock::now();
    }
  }

  double silent_for(int peer) const override {
    Clock::time_point t = heard_at_.at(static_cast<size_t>(peer));
    if (t == Clock::time_point{}) return -1;
    return std::chrono::duration<double>(Clock::now() - t).count();
  }

  bool barrier(double seconds) override {
    MPI_Request req;
    check(MPI_Ibarrier(exit_comm_, &req), "MPI_Ibarrier");
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::vector<int64_t> counts;
    for (int from = 0;;) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) break;
      if (seconds >= 0 && std::chrono::steady_clock::now() > end) return false;
      while (exit_notice(from, counts)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Every other rank sent its notice before the barrier: take the rest, so that no message
    // is left unreceived when MPI ends, and complete this rank's own.
    int others = size(0) - 1;
    for (int from = 0; heard_ < others;)
      if (!exit_notice(from, counts)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    check(MPI_Waitall(static_cast<int>(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE),
          "MPI_Waitall");
    // Heartbeats: this rank's last ones complete (small: sent eagerly), and those that came
    // are taken, so that none is left unreceived that MPI can see now.
    check(
        MPI_Waitall(static_cast<int>(beat_sends_.size()), beat_sends_.data(), MPI_STATUSES_IGNORE),
        "MPI_Waitall");
    take_beats();
    return true;
  }

  void finalize() override {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }

 private:
  MPI_Op reduce_op(Dtype d, ReduceOp r) const {
    int k = r == ReduceOp::Max ? 0 : r == ReduceOp::Min ? 1 : 2;
    if (d == float16) return f16_[k];
    if (d == bfloat16) return bf16_[k];
    if (d.is_bool()) return k == 1 ? MPI_LAND : MPI_LOR;  // sum and max: or; min: and
    if (k == 2) return MPI_SUM;
    if (d == float32) return f32_[k];
    if (d == float64) return f64_[k];
    return k == 0 ? MPI_MAX : MPI_MIN;
  }

  using Clock = std::chrono::steady_clock;
  std::vector<MPI_Comm> comms_;
  MPI_Comm exit_comm_ = MPI_COMM_NULL;
  MPI_Comm beat_comm_ = MPI_COMM_NULL;
  static constexpr int kExitTag = 1;
  static constexpr int kBeatTag = 2;
  char beat_ = 1;
  std::vector<MPI_Request> beat_sends_;           // per world rank: its heartbeat in flight
  std::vector<Clock::time_point> heard_at_;       // per world rank: last heard from (epoch: never)
  std::deque<std::vector<int64_t>> notices_out_;  // this rank's exit notices, until sent
  std::vector<MPI_Request> sends_;
  int heard_ = 0;       // exit notices received
  int tag_ub_ = 32767;  // the least MPI promises
  MPI_Op f32_[2], f64_[2], f16_[3], bf16_[3];
};

}  // namespace

std::unique_ptr<Transport> start_mpi() { return std::make_unique<MpiTransport>(); }

}  // namespace kiln::distributed
