#include "backends/reference/reference.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/launch_check.h"
#include "backends/scalar_ops.h"
#include "graph/error.h"
#include "graph/random.h"

namespace kiln {

namespace {

using scalar::Val;

constexpr double kTwoPi = 6.283185307179586476925286766559;

using scalar::load;
using scalar::store;

Val random_value(const Value& v, uint64_t key, int64_t counter) {
  Dtype ud = v.dist == RandomDist::Uniform ? v.dtype : random::normal_compute_dtype(v.dtype);
  Val r;
  uint64_t c = static_cast<uint64_t>(counter);
  if (v.dist == RandomDist::Bits) {
    r.i = static_cast<int64_t>(random::bits(key, c));
    return r;
  }
  if (v.dist == RandomDist::Uniform) {
    r.f = random::unit_from_bits(random::bits(key, c), ud);
  } else {
    double u1 = random::unit_from_bits(random::bits(key, 2 * c), ud);
    double u2 = random::unit_from_bits(random::bits(key, 2 * c + 1), ud);
    r.f = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(kTwoPi * u2);
  }
  r.f = scalar::round_to(r.f, v.dtype);
  return r;
}

// Interprets one kernel launch. Reductions accumulate floats in double (the most accurate
// answer is the right oracle) and integers with wrap-around in their dtype.
class Interpreter {
 public:
  Interpreter(const Kernel& k, const KernelArgs& args) : k_(k), args_(args) {
    for (const Dim& d : k.domain) extents_.push_back(d.eval(args.params.data()));
    for (Buffer* b : args.buffers) {
      if (!b->host_ptr())
        throw_error("reference backend: kernel ", k.name, " got a non-host buffer");
      ptrs_.push_back(b->host_ptr());
    }
    vals_.resize(k.body.size());
  }

  void run() {
    int kept = k_.kept_axes();
    std::vector<int64_t> point(extents_.size(), 0);
    for (int i = 0; i < kept; ++i)
      if (extents_[i] == 0) return;
    reduce_at_ = k_.reduce ? k_.reduce->value : static_cast<int>(k_.body.size());
    do {
      if (k_.reduce) {
        reduce_point(point, kept);
        eval_range(point, reduce_at_ + 1, static_cast<int>(k_.body.size()));
      } else {
        eval_range(point, 0, static_cast<int>(k_.body.size()));
      }
      for (const Store& s : k_.stores)
        store(ptrs_[s.buffer], k_.buffers[s.buffer].dtype, address(k_.buffers[s.buffer].map, point),
              vals_[s.value]);
    } while (next(point, 0, kept));
  }

 private:
  int64_t address(const IndexMap& m, const std::vector<int64_t>& point) const {
    int64_t a = m.offset.eval(args_.params.data());
    for (size_t i = 0; i < point.size(); ++i)
      a += point[i] * m.strides[i].eval(args_.params.data());
    return a;
  }

  // Advances the axes [from, to) of point in row-major order; false when they wrap around.
  bool next(std::vector<int64_t>& point, int from, int to) const {
    for (int i = to - 1; i >= from; --i) {
      if (++point[i] < extents_[i]) return true;
      point[i] = 0;
    }
    return false;
  }

  void reduce_point(std::vector<int64_t>& point, int kept) {
    const Value& rv = k_.body[reduce_at_];
    Dtype in = k_.body[rv.a].dtype;
    ReduceOp op = k_.reduce->op;
    double facc = op == ReduceOp::Prod ? 1.0 : 0.0;
    int64_t iacc = op == ReduceOp::Prod ? 1 : 0;
    bool first = true;
    int64_t best_pos = 0, pos = 0;
    bool empty = false;
    for (int i = kept; i < static_cast<int>(point.size()); ++i) {
      point[i] = 0;
      empty = empty || extents_[i] == 0;
    }
    if (!empty) do {
        eval_range(point, 0, reduce_at_);
        Val x = vals_[rv.a];
        switch (op) {
          case ReduceOp::Sum:
            if (in.is_float())
              facc += x.f;
            else
              iacc = scalar::wrap(static_cast<int64_t>(uint64_t(iacc) + uint64_t(x.i)), in);
            break;
          case ReduceOp::Prod:
            if (in.is_float())
              facc *= x.f;
            else
              iacc = scalar::wrap(static_cast<int64_t>(uint64_t(iacc) * uint64_t(x.i)), in);
            break;
          case ReduceOp::Max:
          case ReduceOp::Min:
          case ReduceOp::Argmax: {
            bool better;
            if (first) {
              better = true;
            } else if (in.is_float()) {
              bool cur_nan = std::isnan(facc);
              better =
                  !cur_nan && (std::isnan(x.f) || (op == ReduceOp::Min ? x.f < facc : x.f > facc));
            } else {
              better = op == ReduceOp::Min ? scalar::int_less(x.i, iacc, in)
                                           : scalar::int_less(iacc, x.i, in);
            }
            if (better) {
              facc = x.f, iacc = x.i, best_pos = pos;
            }
            break;
          }
        }
        first = false;
        ++pos;
      } while (next(point, kept, static_cast<int>(point.size())));
    for (int i = kept; i < static_cast<int>(point.size()); ++i) point[i] = 0;
    Val r;
    if (op == ReduceOp::Argmax)
      r.i = best_pos;
    else if (rv.dtype.is_float())
      r.f = scalar::round_to(facc, rv.dtype);
    else
      r.i = iacc;
    vals_[reduce_at_] = r;
  }

  void eval_range(const std::vector<int64_t>& point, int from, int to) {
    for (int i = from; i < to; ++i) {
      const Value& v = k_.body[i];
      Val& out = vals_[i];
      switch (v.kind) {
        case ValueKind::Load:
          out = load(ptrs_[v.buffer], v.dtype, address(k_.buffers[v.buffer].map, point));
          break;
        case ValueKind::Constant: {
          Scalar c = v.param >= 0 ? scalar_from_word(args_.params[v.param], v.dtype) : v.constant;
          out.f = c.f;
          out.i = c.i;
          break;
        }
        case ValueKind::Index: out.i = address(v.map, point); break;
        case ValueKind::Gather: {  // take's rule: wrap once, then clamp (kernel_ir.h)
          int64_t extent = v.extent.eval(args_.params.data()), row = vals_[v.a].i;
          if (row < 0) row += extent;
          row = std::clamp<int64_t>(row, 0, extent - 1);
          out = load(
              ptrs_[v.buffer], v.dtype,
              address(k_.buffers[v.buffer].map, point) + row * v.step.eval(args_.params.data()));
          break;
        }
        case ValueKind::Unary: out = scalar::unary(v.unary, vals_[v.a], v.dtype); break;
        case ValueKind::Binary:
          out = scalar::binary(v.binary, vals_[v.a], vals_[v.b], k_.body[v.a].dtype);
          break;
        case ValueKind::Select: out = vals_[v.a].i ? vals_[v.b] : vals_[v.c]; break;
        case ValueKind::Cast: out = scalar::cast(vals_[v.a], k_.body[v.a].dtype, v.dtype); break;
        case ValueKind::Random: {
          uint64_t key = v.b >= 0       ? static_cast<uint64_t>(vals_[v.b].i)
                         : v.param >= 0 ? static_cast<uint64_t>(args_.params[v.param])
                                        : v.key;
          out = random_value(v, key, vals_[v.a].i);
          break;
        }
        case ValueKind::Reduce: break;  // computed by reduce_point
      }
    }
  }

  const Kernel& k_;
  const KernelArgs& args_;
  std::vector<int64_t> extents_;
  std::vector<void*> ptrs_;
  std::vector<Val> vals_;
  int reduce_at_ = 0;
};

struct ReferenceKernel : CompiledKernel {
  Kernel kernel;
  LaunchCheck check;
};

// A transposed operand (trans_a: A stored k x m, trans_b: B stored n x k) is read in place.
void matmul(const MatmulArgs& a) {
  const void* A = a.a->host_ptr();
  const void* B = a.b->host_ptr();
  void* C = a.c->host_ptr();
  auto a_at = [&](int64_t i, int64_t p) { return a.trans_a ? p * a.m + i : i * a.k + p; };
  auto b_at = [&](int64_t p, int64_t j) { return a.trans_b ? j * a.k + p : p * a.n + j; };
  for (size_t bi = 0; bi < a.c_offsets.size(); ++bi) {
    for (int64_t i = 0; i < a.m; ++i)
      for (int64_t j = 0; j < a.n; ++j) {
        Val acc;
        for (int64_t p = 0; p < a.k; ++p) {
          Val x = load(A, a.dtype, a.a_offsets[bi] + a_at(i, p));
          Val y = load(B, a.dtype, a.b_offsets[bi] + b_at(p, j));
          if (a.dtype.is_float())
            acc.f += x.f * y.f;
          else
            acc.i = static_cast<int64_t>(uint64_t(acc.i) + uint64_t(x.i) * uint64_t(y.i));
        }
        if (a.dtype.is_float())
          acc.f = scalar::round_to(acc.f, a.dtype);
        else
          acc.i = scalar::wrap(acc.i, a.dtype);
        store(C, a.dtype, a.c_offsets[bi] + i * a.n + j, acc);
      }
  }
}

class ReferenceQueue : public Queue {
 public:
  EventPtr enqueue_kernel(const CompiledKernel& k, const KernelArgs& args) override {
    auto& rk = static_cast<const ReferenceKernel&>(k);
    rk.check(rk.kernel, args);
    Interpreter(rk.kernel, args).run();
    return nullptr;
  }
  EventPtr enqueue_copy(Buffer& src, Buffer& dst, size_t bytes) override {
    if (!dst.host_ptr()) throw_error("reference backend: copy into a non-host buffer");
    src.read(dst.host_ptr(), 0, bytes);
    return nullptr;
  }
  EventPtr enqueue_matmul(const MatmulArgs& a) override {
    for (Buffer* b : {a.a, a.b, a.c})
      if (!b->host_ptr()) throw_error("reference backend: matmul got a non-host buffer");
    matmul(a);
    return nullptr;
  }
  EventPtr enqueue_native(const NativeArgs& a) override {
    reference_native(a);
    return nullptr;
  }
  void finish() override {}
  bool runs_inline() const override { return true; }
};

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  std::vector<DeviceInfo> devices() override {
    return {DeviceInfo{Device{"reference", 0}, "plain C++ interpreter of Kernel IR (the oracle)",
                       true, ""}};
  }
  bool uses_host_memory() const override { return true; }
  std::shared_ptr<Buffer> allocate(int device, size_t bytes) override {
    return std::make_shared<HostBuffer>(bytes, Device{"reference", device});
  }
  std::shared_ptr<const CompiledKernel> compile(int, const Kernel& k) override {
    k.validate();
    auto c = std::make_shared<ReferenceKernel>();
    c->kernel = k;
    c->check = LaunchCheck(k);
    return c;
  }
  std::unique_ptr<Queue> create_queue(int) override { return std::make_unique<ReferenceQueue>(); }
};

}  // namespace

std::shared_ptr<Backend> make_reference_backend() { return std::make_shared<ReferenceBackend>(); }

}  // namespace kiln
