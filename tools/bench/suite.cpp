#include "tools/bench/suite.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace kiln::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string dims(std::initializer_list<int64_t> s) {
  std::string out;
  for (int64_t e : s) {
    if (!out.empty()) out += 'x';
    out += std::to_string(e);
  }
  return out;
}

Array normal_on(const Shape& s, const Device& d, uint64_t seed, float scale = 1.0f) {
  Array x = random::normal(s, float32, random::key(seed), d) * scale;
  eval(x);
  return x;
}

Array gelu(const Array& x) { return x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f; }

std::vector<Array> one(Array a) { return {std::move(a)}; }

// An element-wise or row-wise case over one (rows x cols) float32 input.
Case rowwise(std::string name, int64_t rows, int64_t cols, int passes, Fn fn) {
  Case c;
  c.name = std::move(name);
  c.shape = dims({rows, cols});
  c.bytes = 4.0 * rows * cols * passes;
  c.dims = {rows, cols};
  c.inputs = [rows, cols](const Device& d) { return one(normal_on({rows, cols}, d, 1)); };
  c.fn = std::move(fn);
  return c;
}

// gelu evaluates erf in every element: on a CPU that arithmetic, not memory, can be the limit,
// and no bound for it is measured, so the copy bound is stated as what it is.
Case gelu_case(int64_t rows, int64_t cols) {
  Case c =
      rowwise("gelu", rows, cols, 2, [](const std::vector<Array>& in) { return one(gelu(in[0])); });
  c.bound_note =
      "a copy of the same bytes; erf in every element can make arithmetic the real limit (not "
      "measured), so a low fraction need not mean memory is the problem";
  return c;
}

Case mlp(int64_t m, int64_t k, int64_t h) {
  Case c;
  c.name = "mlp block";
  c.shape = dims({m, k}) + "->" + std::to_string(h) + "->" + std::to_string(k);
  c.flops = 2.0 * m * k * h * 2;
  c.dims = {m, k, h};
  c.bound = Bound::Compute;
  c.bound_note = "its two matmuls' flops at the float32 FMA peak (gelu's erf is not counted)";
  c.inputs = [=](const Device& d) {
    return std::vector<Array>{normal_on({m, k}, d, 1), normal_on({k, h}, d, 2, 0.03f),
                              normal_on({h}, d, 3), normal_on({h, k}, d, 4, 0.015f),
                              normal_on({k}, d, 5)};
  };
  c.fn = [](const std::vector<Array>& in) {
    return one(matmul(gelu(matmul(in[0], in[1]) + in[2]), in[3]) + in[4]);
  };
  return c;
}

Case attention(int64_t heads, int64_t seq, int64_t dim) {
  Case c;
  c.name = "attention";
  c.shape = dims({heads, seq, dim});
  c.flops = 2.0 * heads * seq * seq * dim * 2;
  c.dims = {heads, seq, dim};
  c.bound = Bound::Compute;
  c.bound_note = "its two matmuls' flops at the float32 FMA peak (the softmax is not counted)";
  c.inputs = [=](const Device& d) {
    return std::vector<Array>{normal_on({heads, seq, dim}, d, 1),
                              normal_on({heads, seq, dim}, d, 2),
                              normal_on({heads, seq, dim}, d, 3)};
  };
  c.fn = [dim](const std::vector<Array>& in) {
    Array s = matmul(in[0], transpose(in[1], {0, 2, 1})) * (1.0f / std::sqrt(float(dim)));
    return one(matmul(softmax(s, -1), in[2]));
  };
  return c;
}

Case reduction(std::string name, int64_t rows, int64_t cols, std::vector<int> axes) {
  Case c = rowwise(std::move(name), rows, cols, 1,
                   [axes](const std::vector<Array>& in) { return one(sum(in[0], axes)); });
  c.bound_note =
      "a copy of the bytes it reads (it only reads, and reading is cheaper than copying, so it "
      "can pass 100%)";
  return c;
}

Case random_draws(int64_t n) {
  Case c;
  c.name = "random normal";
  c.shape = dims({n});
  c.bytes = 4.0 * n;
  c.dims = {n};
  // Each element costs a counter hash and a transform to the normal distribution (a log, a
  // square root and a sine/cosine or an inverse erf): arithmetic, not the 4 bytes written, is
  // the limit, and no bound for that arithmetic is measured, so none is claimed.
  c.bound = Bound::None;
  c.bound_note =
      "none: the generator's arithmetic per element is the limit, and it is not measured";
  c.compiled = false;  // a draw with a new key each call is an eager op
  c.inputs = [](const Device&) { return std::vector<Array>{}; };
  c.fn = [n](const std::vector<Array>&) { return one(random::normal({n})); };
  return c;
}

Case dispatch() {
  Case c;
  c.name = "dispatch";
  c.shape = "0-d";
  c.bound = Bound::None;
  c.inputs = [](const Device& d) {
    Array x = array(0.5f, d), y = array(1.5f, d);
    eval({x, y});
    return std::vector<Array>{x, y};
  };
  c.fn = [](const std::vector<Array>& in) { return one(exp(-in[0]) + in[1]); };
  return c;
}

// The first call of a function compiled anew, on a shape never seen before: trace, fuse, lower
// and build the kernel (the disk cache cannot have it).
Case first_call() {
  Case c;
  c.name = "first call";
  c.shape = "gelu, cold";
  c.bound = Bound::None;
  c.eager = false;
  c.inputs = [](const Device&) { return std::vector<Array>{}; };
  c.fn = [](const std::vector<Array>& in) { return one(gelu(in[0])); };
  c.sample = [](const Device& d, int rep) {
    // A shape no earlier sample or run used (a run starts from its clock), so the kernel is built
    // now rather than found in the memory or disk cache.
    static int64_t serial =
        std::chrono::system_clock::now().time_since_epoch().count() / 1000 % 1000000;
    Array x = normal_on(Shape{4096 + serial++}, d, 9);
    (void)rep;
    auto t0 = Clock::now();
    auto f = compile([](const std::vector<Array>& in) { return one(gelu(in[0])); });
    eval(f({x}));
    return ms_since(t0);
  };
  return c;
}

// Scheduler DAG shapes: kernels that cannot fuse (reductions feeding reductions), in a chain or
// fanned out and joined.
Case dag(std::string name, int tasks, bool chain) {
  Case c;
  c.name = std::move(name);
  c.shape = std::to_string(tasks) + " kernels";
  c.bound = Bound::None;
  c.tasks = tasks;
  c.dims = {};
  c.inputs = [](const Device& d) { return one(normal_on({64, 64}, d, 1)); };
  c.fn = [tasks, chain](const std::vector<Array>& in) {
    Array acc = in[0];
    std::vector<Array> parts;
    for (int i = 0; i < tasks; ++i) {
      if (chain)
        acc = in[0] - mean(acc, -1, true);  // each mean needs the previous one stored
      else
        parts.push_back(max(in[0] * float(i + 1), -1, true));
    }
    if (!chain) {
      acc = parts[0];
      for (size_t i = 1; i < parts.size(); ++i) acc = acc + parts[i];
    }
    return one(acc);
  };
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::Bandwidth: return "bandwidth";
    case Bound::Compute: return "fma peak";
    case Bound::None: return "none";
  }
  return "none";
}

std::string bound_note(const Case& c) {
  if (!c.bound_note.empty()) return c.bound_note;
  switch (c.bound) {
    case Bound::Bandwidth: return "a copy of the same bytes";
    case Bound::Compute: return "its flops at the float32 FMA peak";
    case Bound::None: return "none: a latency";
  }
  return "none";
}

// `make demo`'s taste of the suite: one element-wise, one row-wise, one matmul and the
// dispatch case, small enough that every device (the reference interpreter included) finishes
// in seconds. The same report as the others.
std::vector<Case> demo_suite() {
  return {
      gelu_case(256, 1024),
      rowwise("softmax", 256, 1024, 2,
              [](const std::vector<Array>& in) { return one(softmax(in[0], -1)); }),
      mlp(16, 128, 512),
      dispatch(),
  };
}

std::vector<Case> suite(const std::string& name) {
  if (name == "demo") return demo_suite();
  if (name != "quick" && name != "standard")
    throw Error("kiln bench: unknown suite '" + name +
                "'; the suites are demo, quick and standard");
  bool q = name == "quick";
  int64_t n = q ? 1 << 20 : 1 << 24;  // elements of the element-wise cases
  int64_t rows = q ? 1024 : 4096, cols = 1024;
  auto norm = [](bool rms) {
    return [rms](const std::vector<Array>& in) {
      const Array& x = in[0];
      if (rms) return one(x * rsqrt(mean(x * x, -1, true) + 1e-6f));
      Array mu = mean(x, -1, true), xc = x - mu;
      return one(xc * rsqrt(mean(xc * xc, -1, true) + 1e-5f));
    };
  };
  std::vector<Case> cases = {
      gelu_case(n / 1024, 1024),
      rowwise("softmax", rows, cols, 2,
              [](const std::vector<Array>& in) { return one(softmax(in[0], -1)); }),
      rowwise("layer norm", rows, cols, 2, norm(false)),
      rowwise("rms norm", rows, cols, 2, norm(true)),
      mlp(q ? 64 : 256, q ? 256 : 1024, q ? 1024 : 4096),
      attention(q ? 4 : 8, q ? 128 : 512, 64),
      reduction("column sum", rows, cols, {0}),
      reduction("row sum", rows, cols, {1}),
      reduction("full sum", rows, cols, {0, 1}),
      random_draws(n),
      dispatch(),
      first_call(),
      dag("dag chain", q ? 16 : 64, true),
      dag("dag fan-out", q ? 16 : 64, false),
  };
  return cases;
}

std::vector<Result> run(const std::vector<Case>& cases, const Options& options, const Machine& m,
                        const std::function<void(size_t, size_t, const std::string&)>& progress) {
  std::vector<Device> devs = options.devices;
  if (devs.empty())
    for (const DeviceInfo& d : devices())
      if (d.available) devs.push_back(d.device);
  double budget = options.seconds_per_case > 0 ? options.seconds_per_case
                  : options.suite == "demo"    ? 0.1
                  : options.suite == "quick"   ? 0.25
                                               : 1.0;
  size_t total = 0, done = 0;
  for (const Case& c : cases) total += devs.size() * (size_t(c.eager) + size_t(c.compiled));
  std::vector<Result> results;
  std::map<double, double> copy_at;  // bytes -> GB/s, measured once per size
  for (const Case& c : cases)
    for (const Device& d : devs)
      for (const char* mode : {"eager", "compiled"}) {
        bool compiled = std::string(mode) == "compiled";
        if (compiled ? !c.compiled : !c.eager) continue;
        Result r;
        r.name = c.name, r.shape = c.shape, r.device = d.str(), r.mode = mode;
        r.bound = c.bound, r.tasks = c.tasks, r.bound_note = bound_note(c);
        progress(done++, total, c.name + " on " + r.device + ", " + mode);
        try {
          StreamScope scope(d);
          std::vector<double> samples;
          // At least 3 samples, more until the budget is spent; a case slower than that (the
          // reference interpreter on a matmul) stops after 4x the budget with what it has.
          auto t0 = Clock::now();
          auto more = [&](int rep, int cap) {
            double spent = ms_since(t0) / 1e3;
            return rep == 0 || (rep < 3 && spent < 4 * budget) || (spent < budget && rep < cap);
          };
          if (c.sample) {
            for (int rep = 0; more(rep, 20); ++rep) samples.push_back(c.sample(d, rep));
          } else {
            std::vector<Array> in = c.inputs(d);
            Fn f = compiled ? Fn(compile(c.fn)) : c.fn;
            eval(f(in));  // warm: kernels built, caches filled
            t0 = Clock::now();
            for (int rep = 0; more(rep, 1000); ++rep) {
              auto t1 = Clock::now();
              eval(f(in));
              samples.push_back(ms_since(t1));
            }
          }
          r.reps = static_cast<int>(samples.size());
          r.median_ms = median(samples);
          r.min_ms = *std::min_element(samples.begin(), samples.end());
          r.max_ms = *std::max_element(samples.begin(), samples.end());
          double s = r.median_ms / 1e3;
          if (c.bytes > 0) r.gbps = c.bytes / s / 1e9;
          if (c.flops > 0) r.gflops = c.flops / s / 1e9;
          if (c.bound == Bound::Bandwidth) {
            auto it = copy_at.find(c.bytes);
            if (it == copy_at.end())
              it = copy_at.emplace(c.bytes, copy_gbps_at(c.bytes, m.threads)).first;
            r.bound_value = it->second;
            r.fraction = r.gbps / r.bound_value;
          }
          if (c.bound == Bound::Compute && m.peak_gflops_f32 > 0) {
            r.bound_value = m.peak_gflops_f32;
            r.fraction = r.gflops / m.peak_gflops_f32;
          }
        } catch (const std::exception& e) {
          r.error = e.what();
        }
        results.push_back(std::move(r));
      }
  progress(done, total, "done");
  return results;
}

}  // namespace kiln::bench
