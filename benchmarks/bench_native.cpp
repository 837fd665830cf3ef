// The native primitives on cpu against NumPy, in one run: sort, argsort, cumsum, take with
// random indices and scatter_add (np.bincount with weights) of 2^20 float32, each the fastest
// of `reps` eager evaluations, beside NumPy's fastest on the same sizes (benchmarks/peers/
// native_numpy.py, run before and after Kiln's cases; the faster of its two runs counts) and
// the copy bound (the faster of one memcpy and a copy split across the threads; the split copy
// timed rep by rep alternately with cumsum, so each finds the caches as the other left them).
// Goals (issue 20): sort <= 1x NumPy, argsort <= 1x, take <= 1.5x, scatter_add <= 2x
// bincount, cumsum >= 70% of copy bandwidth. Then take, cumsum, and scatter_add of n updates into
// 2^16 slots, on every other usable device (opencl, vulkan), beside the cpu backend's: on a GPU
// they should be faster, on a CPU device no worse; and each device kernel against the Kernel IR
// lowering it replaced.
// Sort and argsort there too (goal: faster than the cpu backend where the device is a GPU).
// Last, take(W, ids) * s + b and sum(take(W, ids), 1) compiled on cpu (W 50000 x 512 float32,
// 65536 ids), the gather read inside the kernel against it stored first (KILN_GATHER_FUSION=0).
//   build/benchmarks/bench_native [python] [reps] [n]   (python: ~/peers/bin/python)
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/extension.h"
#include "backends/native_kernels.h"
#include "kiln.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

double best_ms(int reps, const std::function<void()>& f) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return best;
}

// NumPy's best time per case from one run of the peer script; empty when it cannot run.
std::map<std::string, double> numpy_times(const std::string& python, int reps, int64_t n,
                                          std::string& version) {
  std::map<std::string, double> r;
  std::string cmd = python + " " + KILN_SOURCE_DIR "/benchmarks/peers/native_numpy.py " +
                    std::to_string(n) + " " + std::to_string(reps) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char line[512], name[128];
  double ms = 0;
  while (std::fgets(line, sizeof line, p)) {
    if (std::strncmp(line, "ready numpy ", 12) == 0) {
      version = line + 12;
      version.erase(version.find_last_not_of("\r\n") + 1);
    } else if (std::sscanf(line, "%127s best_ms %lf", name, &ms) == 2) {
      r[name] = ms;
    }
  }
  pclose(p);
  return r;
}

// A device's native kernel against the Kernel IR lowering it replaced (backends/
// native_kernels.h: reductions over a whole axis per output element, O(n^2) or O(n m)), both
// through the backend's queue on the same input buffers, at a size the lowering can do: fastest
// of `reps` ms each, and whether their outputs agree (`agree` compares them).
struct VsLowering {
  double kernel_ms = 0, lowered_ms = 0;
  bool same = false;
};

template <typename T>
std::vector<char> bytes_of(const std::vector<T>& v) {
  const char* p = reinterpret_cast<const char*>(v.data());
  return std::vector<char>(p, p + v.size() * sizeof(T));
}

template <typename T>
std::vector<T> values_of(const std::vector<char>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

// `args` without buffers; `inputs` are the bytes of args.buffers before the output.
VsLowering vs_lowering(
    Device dev, NativeArgs args, const std::vector<std::vector<char>>& inputs, size_t out_bytes,
    int reps,
    const std::function<bool(const std::vector<char>&, const std::vector<char>&)>& agree) {
  Backend& be = backend_for(dev);
  std::vector<std::shared_ptr<Buffer>> in;
  for (const std::vector<char>& b : inputs) {
    in.push_back(be.allocate(dev.index, b.size()));
    in.back()->write(b.data(), 0, b.size());
  }
  auto o1 = be.allocate(dev.index, out_bytes), o2 = be.allocate(dev.index, out_bytes);
  auto q = be.create_queue(dev.index);
  auto run = [&](Buffer* out, bool lowered) {
    args.buffers.clear();
    for (auto& b : in) args.buffers.push_back(b.get());
    args.buffers.push_back(out);
    EventPtr e =
        lowered ? enqueue_native_as_kernels(be, dev.index, *q, args) : q->enqueue_native(args);
    if (e) e->wait();
    q->finish();
  };
  VsLowering r;
  r.kernel_ms = best_ms(reps, [&] { run(o1.get(), false); });
  r.lowered_ms = best_ms(reps, [&] { run(o2.get(), true); });
  std::vector<char> g1(out_bytes), g2(out_bytes);
  o1->read(g1.data(), 0, out_bytes);
  o2->read(g2.data(), 0, out_bytes);
  r.same = agree(g1, g2);
  return r;
}

bool equal_bits(const std::vector<char>& a, const std::vector<char>& b) { return a == b; }

// Small integers (0..999) as float32, so every order of a float sum gives the same bits.
std::vector<float> small_integers(std::mt19937_64& rng, int64_t n) {
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(rng() % 1000);
  return x;
}

std::vector<int64_t> random_indices(std::mt19937_64& rng, int64_t n) {
  std::vector<int64_t> idx(n);
  for (int64_t& i : idx) i = static_cast<int64_t>(rng() % n);
  return idx;
}

// Gather (O(n m) lowered): n of n float32, shared indices.
VsLowering gather_vs_lowering(Device dev, int64_t n, int reps) {
  std::mt19937_64 rng(1);
  NativeArgs args;
  args.op = Op::Gather;
  args.n = args.m = n;
  args.shared_index = true;
  return vs_lowering(dev, args,
                     {bytes_of(small_integers(rng, n)), bytes_of(random_indices(rng, n))}, n * 4,
                     reps, equal_bits);
}

// scatter_add (atomics, O(n + m)): n updates into n slots.
VsLowering scatter_vs_lowering(Device dev, int64_t n, int reps) {
  std::mt19937_64 rng(2);
  NativeArgs args;
  args.op = Op::ScatterAdd;
  args.n = args.m = n;
  args.shared_index = true;
  std::vector<float> base = small_integers(rng, n);
  std::vector<int64_t> idx = random_indices(rng, n);
  return vs_lowering(dev, args, {bytes_of(base), bytes_of(idx), bytes_of(small_integers(rng, n))},
                     n * 4, reps, equal_bits);
}

// Sort (bitonic, O(n log^2 n) against O(n^2) ranks): argsort of n float32 with many ties, whose
// indices must agree exactly (both are stable).
VsLowering sort_vs_lowering(Device dev, int64_t n, int reps) {
  std::mt19937_64 rng(3);
  NativeArgs args;
  args.op = Op::Argsort;
  args.n = n;
  return vs_lowering(dev, args, {bytes_of(small_integers(rng, n))}, n * 8, reps, equal_bits);
}

// cumsum: float sums in another order, so "agree" allows 1e-6 of the running sum of |x| (the
// values are small integers, so in practice both are exact).
VsLowering scan_vs_lowering(Device dev, int64_t n, int reps) {
  std::mt19937_64 rng(2);
  std::vector<float> x = small_integers(rng, n);
  NativeArgs args;
  args.op = Op::Scan;
  args.n = n;
  return vs_lowering(dev, args, {bytes_of(x)}, n * 4, reps,
                     [&](const std::vector<char>& a, const std::vector<char>& b) {
                       std::vector<float> g1 = values_of<float>(a), g2 = values_of<float>(b);
                       double mass = 0;
                       for (int64_t i = 0; i < n; ++i) {
                         mass += std::abs(x[i]);
                         if (std::abs(g1[i] - g2[i]) > 1e-6 * mass) return false;
                       }
                       return true;
                     });
}

// The largest difference between two float32 results relative to max(1, |want|).
double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return 1e30;
  double d = 0;
  for (size_t i = 0; i < got.size(); ++i)
    d = std::max(d,
                 std::fabs(double(got[i]) - want[i]) / std::max(1.0, std::fabs(double(want[i]))));
  return d;
}

// take(W, ids) * s + b compiled on `dev` (W rows x width float32, m ids): the gather read
// through its indices inside the element-wise kernel, against the same function traced with
// KILN_GATHER_FUSION=0 (the gather stored by its library call, then read back). Timed rep by rep
// alternately (a busy moment of a shared machine slows both), fastest of `reps` each.
struct FusedGather {
  double fused_ms = 1e30, stored_ms = 1e30;
  bool same = false;
};
FusedGather fused_gather(Device dev, int64_t rows, int64_t width, int64_t m, int reps, bool bag) {
  StreamScope on(dev);
  Array w = random::normal({rows, width}, float32, random::key(3), dev);
  Array ids = astype(
      random::uniform(0, static_cast<double>(rows), {m}, float32, random::key(4), dev), int64, dev);
  Array s = random::normal({width}, float32, random::key(5), dev);
  Array b = random::normal({width}, float32, random::key(6), dev);
  eval({w, ids, s, b});
  auto embed = [bag](const std::vector<Array>& x) {
    // bag: an embedding bag's row sums, a reduction reading the gathered rows.
    if (bag) return std::vector<Array>{sum(take(x[0], x[1], 0), 1)};
    return std::vector<Array>{take(x[0], x[1], 0) * x[2] + x[3]};
  };
  // Each traces (and so plans) at its first call, under the setting it is timed with.
  auto fused = compile(embed), stored = compile(embed);
  std::vector<float> a = fused({w, ids, s, b})[0].to_vector<float>();
  setenv("KILN_GATHER_FUSION", "0", 1);
  std::vector<float> c = stored({w, ids, s, b})[0].to_vector<float>();
  unsetenv("KILN_GATHER_FUSION");
  FusedGather r;
  r.same = a == c;
  for (int i = 0; i < reps; ++i) {
    r.fused_ms = std::min(r.fused_ms, best_ms(1, [&] { eval(fused({w, ids, s, b})); }));
    r.stored_ms = std::min(r.stored_ms, best_ms(1, [&] { eval(stored({w, ids, s, b})); }));
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const char* home = std::getenv("HOME");
  std::string python = argc > 1 ? argv[1] : std::string(home ? home : "") + "/peers/bin/python";
  int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  int64_t n = argc > 3 ? std::atoll(argv[3]) : int64_t(1) << 20;

  std::string version;
  std::map<std::string, double> np1 = numpy_times(python, reps, n, version);

  std::mt19937_64 rng(0);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  std::vector<float> xv(n);
  std::vector<int64_t> iv(n);
  for (float& v : xv) v = normal(rng);
  for (int64_t& v : iv) v = pick(rng);
  Device cpu = device("cpu");
  Array x = array(xv, {n}, float32, cpu);
  Array idx = array(iv, {n}, int64, cpu);
  Array zero = zeros({n}, float32, cpu);
  eval({x, idx, zero});
  StreamScope scope(cpu);

  std::map<std::string, double> kiln;
  kiln["sort"] = best_ms(reps, [&] { eval(sort(x)); });
  kiln["argsort"] = best_ms(reps, [&] { eval(argsort(x)); });
  kiln["take"] = best_ms(reps, [&] { eval(take(x, idx, 0)); });
  kiln["scatter_add"] = best_ms(reps, [&] { eval(scatter_add(zero, idx, x, 0)); });
  // The copy bound: the same bytes read and written, by one memcpy or by every thread. The
  // threads' copy is timed alternately with cumsum (rep by rep), so that a busy moment of a
  // shared machine slows both rather than one, and each reads its input after the other's 8 MB
  // went through the caches (had the memcpy of the same bytes run just before the copy, as it
  // once did, the copy would find its input and output warm where cumsum does not: 1-4 points
  // of the ratio here). The memcpy is timed in a loop of its own.
  std::vector<float> dst(n);
  int parts = tbb::this_task_arena::max_concurrency();
  auto copy_all = [&] {
    tbb::parallel_for(0, parts, [&](int p) {
      int64_t lo = n * p / parts, hi = n * (p + 1) / parts;
      std::memcpy(dst.data() + lo, xv.data() + lo, (hi - lo) * sizeof(float));
    });
  };
  double copy1 = best_ms(reps, [&] { std::memcpy(dst.data(), xv.data(), n * sizeof(float)); });
  double copyp = 1e30, scan = 1e30;
  for (int r = 0; r < reps; ++r) {
    scan = std::min(scan, best_ms(1, [&] { eval(cumsum(x, 0)); }));
    copyp = std::min(copyp, best_ms(1, copy_all));
  }
  kiln["cumsum"] = scan;
  double copy = std::min(copy1, copyp);

  // take on the device backends, the table and indices drawn there (an array made from host
  // values would be copied to the device at every call), each result checked against the cpu
  // backend's take of the same values (issue 20: faster than the cpu backend where the device
  // is a GPU; on PoCL and lavapipe, CPU devices, no worse).
  struct DeviceTake {
    std::string device, what;
    double ms;
    bool matches;
  };
  std::vector<DeviceTake> device_take;
  struct DeviceScan {
    std::string device;
    double ms, worst;
  };
  std::vector<DeviceScan> device_scan;
  for (const DeviceInfo& info : devices()) {
    if (info.device.backend == "cpu" || info.device.backend == "reference" || !info.available)
      continue;
    StreamScope on(info.device);
    Array xd = random::normal({n}, float32, random::key(1), info.device);
    Array id = astype(
        random::uniform(0, static_cast<double>(n), {n}, float32, random::key(2), info.device),
        int64, info.device);
    eval({xd, id});
    double ms = best_ms(reps, [&] { eval(take(xd, id, 0)); });
    Array want = take(array(xd.to_vector<float>(), {n}, float32, cpu),
                      array(id.to_vector<int64_t>(), {n}, int64, cpu), 0, cpu);
    bool same = take(xd, id, 0).to_vector<float>() == want.to_vector<float>();
    device_take.push_back({info.device.str(), info.description, ms, same});
    // cumsum there too: float sums in another order than the cpu's, so the largest difference
    // relative to the running sum of |x| is printed (rounding: ~1e-7 of that).
    double scan_ms = best_ms(reps, [&] { eval(cumsum(xd, 0)); });
    std::vector<float> got = cumsum(xd, 0).to_vector<float>(), xs = xd.to_vector<float>();
    std::vector<float> want_scan = cumsum(array(xs, {n}, float32, cpu), 0, cpu).to_vector<float>();
    double worst = 0, mass = 0;
    for (int64_t i = 0; i < n; ++i) {
      mass += std::abs(xs[i]);
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want_scan[i]) / mass);
    }
    device_scan.push_back({info.device.str(), scan_ms, worst});
  }
  // scatter_add of n float32 updates into 2^16 slots on each device, the updates and indices
  // drawn there, beside the cpu backend's on the same values; float sums differ from cpu's by
  // their order only (issue 20: faster than the cpu fallback where the device is a GPU).
  const int64_t slots = int64_t{1} << 16;
  struct DeviceScatter {
    std::string device;
    double ms, rel_diff;
  };
  std::vector<DeviceScatter> device_scatter;
  double cpu_scatter_ms = 0;
  for (const DeviceInfo& info : devices()) {
    if (info.device.backend == "reference" || !info.available) continue;
    StreamScope on(info.device);
    Array ud = random::normal({n}, float32, random::key(3), info.device);
    Array sd = astype(
        random::uniform(0, static_cast<double>(slots), {n}, float32, random::key(4), info.device),
        int64, info.device);
    Array bd = zeros({slots}, float32, info.device);
    eval({ud, sd, bd});
    double ms = best_ms(reps, [&] { eval(scatter_add(bd, sd, ud, 0)); });
    if (info.device.backend == "cpu") {
      cpu_scatter_ms = ms;
      continue;
    }
    Array want =
        scatter_add(zeros({slots}, float32, cpu), array(sd.to_vector<int64_t>(), {n}, int64, cpu),
                    array(ud.to_vector<float>(), {n}, float32, cpu), 0, cpu);
    device_scatter.push_back(
        {info.device.str(), ms,
         max_rel_diff(scatter_add(bd, sd, ud, 0).to_vector<float>(), want.to_vector<float>())});
  }
  // sort and argsort on the device backends, the values drawn there; each checked against the
  // cpu backend's on the same values (issue 20: faster than the cpu fallback on a GPU).
  struct DeviceSort {
    std::string device;
    double sort_ms, argsort_ms;
    bool matches;
  };
  std::vector<DeviceSort> device_sort;
  for (const DeviceInfo& info : devices()) {
    if (info.device.backend == "cpu" || info.device.backend == "reference" || !info.available)
      continue;
    StreamScope on(info.device);
    Array xd = random::normal({n}, float32, random::key(3), info.device);
    eval(xd);
    double sort_ms = best_ms(reps, [&] { eval(sort(xd)); });
    double argsort_ms = best_ms(reps, [&] { eval(argsort(xd)); });
    Array xc = array(xd.to_vector<float>(), {n}, float32, cpu);
    bool same = sort(xd).to_vector<float>() == sort(xc, -1, cpu).to_vector<float>() &&
                argsort(xd).to_vector<int64_t>() == argsort(xc, -1, cpu).to_vector<int64_t>();
    device_sort.push_back({info.device.str(), sort_ms, argsort_ms, same});
  }
  const int64_t small = 4096;
  std::vector<std::pair<std::string, VsLowering>> vs_lowering, scatter_lowering, sort_lowering,
      scan_vs;
  for (const DeviceInfo& info : devices())
    if (info.available && (info.device.backend == "opencl" || info.device.backend == "vulkan")) {
      vs_lowering.push_back({info.device.str(), gather_vs_lowering(info.device, small, 5)});
      scatter_lowering.push_back({info.device.str(), scatter_vs_lowering(info.device, small, 5)});
      sort_lowering.push_back({info.device.str(), sort_vs_lowering(info.device, small, 5)});
      scan_vs.push_back({info.device.str(), scan_vs_lowering(info.device, small, 5)});
    }

  std::map<std::string, double> np2 = numpy_times(python, reps, n, version);
  auto numpy = [&](const std::string& c) {
    double a = np1.count(c) ? np1[c] : 1e30, b = np2.count(c) ? np2[c] : 1e30;
    return std::min(a, b);
  };

  std::printf("native primitives on %s, n = %lld float32, fastest of %d; NumPy %s\n",
              cpu.str().c_str(), static_cast<long long>(n), reps,
              version.empty() ? "(not found: give the python with numpy)" : version.c_str());
  std::printf("%-12s %10s %10s %8s %8s  %s\n", "case", "kiln ms", "numpy ms", "ratio", "goal",
              "numpy call");
  struct Row {
    const char* name;
    const char* np;
    double goal;
    const char* call;
  };
  for (Row r : {Row{"sort", "sort", 1.0, "np.sort(x)"},
                Row{"argsort", "argsort", 1.0, "np.argsort(x) (not stable)"},
                Row{"argsort", "argsort_stable", 1.0, "np.argsort(x, kind='stable')"},
                Row{"take", "take", 1.5, "np.take(x, idx)"},
                Row{"scatter_add", "scatter_add", 2.0, "np.bincount(idx, x, minlength=n)"},
                Row{"cumsum", "cumsum", 0, "np.cumsum(x)"}}) {
    double k = kiln[r.name], p = numpy(r.np);
    bool have = p < 1e29;
    std::printf("%-12s %10.3f %10s %7.2fx %8s  %s\n", r.name, k,
                have ? std::to_string(p).substr(0, 7).c_str() : "-", have ? k / p : 0.0,
                r.goal > 0 ? ("<= " + std::to_string(r.goal).substr(0, 3) + "x").c_str() : "",
                r.call);
  }
  std::printf(
      "\ntake of %lld random indices from %lld float32 on each device (table and "
      "indices there; fastest of %d calls, each evaluated)\n",
      static_cast<long long>(n), static_cast<long long>(n), reps);
  std::printf("%-10s %10s %12s  %s\n", "device", "ms", "cpu / device", "result");
  std::printf("%-10s %10.3f %12s  %s\n", cpu.str().c_str(), kiln["take"], "1.00x", "");
  for (const DeviceTake& t : device_take)
    std::printf("%-10s %10.3f %11.2fx  %s; %s\n", t.device.c_str(), t.ms, kiln["take"] / t.ms,
                t.matches ? "matches cpu" : "DIFFERS FROM CPU", t.what.substr(0, 60).c_str());

  std::printf(
      "\nsort and argsort of %lld float32 on each device (values drawn there; fastest of %d "
      "calls, each evaluated)\n",
      static_cast<long long>(n), reps);
  std::printf("%-10s %10s %12s %11s %12s  %s\n", "device", "sort ms", "cpu / device", "argsort ms",
              "cpu / device", "result");
  std::printf("%-10s %10.3f %12s %11.3f %12s\n", cpu.str().c_str(), kiln["sort"], "1.00x",
              kiln["argsort"], "1.00x");
  for (const DeviceSort& t : device_sort)
    std::printf("%-10s %10.3f %11.2fx %11.3f %11.2fx  %s\n", t.device.c_str(), t.sort_ms,
                kiln["sort"] / t.sort_ms, t.argsort_ms, kiln["argsort"] / t.argsort_ms,
                t.matches ? "matches cpu" : "DIFFERS FROM CPU");

  std::printf(
      "\ngather of %lld from %lld float32 (shared indices): the device kernel against "
      "the Kernel IR lowering it replaced, fastest of 5\n",
      static_cast<long long>(small), static_cast<long long>(small));
  std::printf("%-10s %10s %12s %9s  %s\n", "device", "kernel ms", "lowering ms", "speedup",
              "outputs");
  for (const auto& [dev, r] : vs_lowering)
    std::printf("%-10s %10.3f %12.3f %8.1fx  %s\n", dev.c_str(), r.kernel_ms, r.lowered_ms,
                r.lowered_ms / r.kernel_ms, r.same ? "equal" : "DIFFER");

  std::printf(
      "\nscatter_add of %lld float32 updates into %lld slots on each device (updates and "
      "indices there; fastest of %d calls, each evaluated)\n",
      static_cast<long long>(n), static_cast<long long>(slots), reps);
  std::printf("%-10s %10s %12s  %s\n", "device", "ms", "cpu / device", "max rel diff vs cpu");
  std::printf("%-10s %10.3f %12s\n", cpu.str().c_str(), cpu_scatter_ms, "1.00x");
  for (const DeviceScatter& t : device_scatter)
    std::printf("%-10s %10.3f %11.2fx  %.2g\n", t.device.c_str(), t.ms, cpu_scatter_ms / t.ms,
                t.rel_diff);
  std::printf(
      "\nscatter_add of %lld into %lld float32 (shared indices): the device kernel against "
      "the Kernel IR lowering it replaced, fastest of 5\n",
      static_cast<long long>(small), static_cast<long long>(small));
  std::printf("%-10s %10s %12s %9s  %s\n", "device", "kernel ms", "lowering ms", "speedup",
              "outputs");
  for (const auto& [dev, r] : scatter_lowering)
    std::printf("%-10s %10.3f %12.3f %8.1fx  %s\n", dev.c_str(), r.kernel_ms, r.lowered_ms,
                r.lowered_ms / r.kernel_ms, r.same ? "equal" : "DIFFER");

  std::printf(
      "\nargsort of %lld float32 (values 0..999, many ties): the device kernel against the "
      "Kernel IR lowering it replaced, fastest of 5\n",
      static_cast<long long>(small));
  std::printf("%-10s %10s %12s %9s  %s\n", "device", "kernel ms", "lowering ms", "speedup",
              "outputs");
  for (const auto& [dev, r] : sort_lowering)
    std::printf("%-10s %10.3f %12.3f %8.1fx  %s\n", dev.c_str(), r.kernel_ms, r.lowered_ms,
                r.lowered_ms / r.kernel_ms, r.same ? "equal" : "DIFFER");
  std::printf(
      "\ncumsum of %lld float32 on each device (input there; fastest of %d calls, each "
      "evaluated; diff: the largest |device - cpu| / running sum of |x|)\n",
      static_cast<long long>(n), reps);
  std::printf("%-10s %10s %12s  %s\n", "device", "ms", "cpu / device", "diff");
  std::printf("%-10s %10.3f %12s\n", cpu.str().c_str(), kiln["cumsum"], "1.00x");
  for (const DeviceScan& t : device_scan)
    std::printf("%-10s %10.3f %11.2fx  %.1e\n", t.device.c_str(), t.ms, kiln["cumsum"] / t.ms,
                t.worst);
  std::printf(
      "\ncumsum of %lld float32: the device kernels against the Kernel IR lowering they "
      "replaced, fastest of 5\n",
      static_cast<long long>(small));
  std::printf("%-10s %10s %12s %9s  %s\n", "device", "kernel ms", "lowering ms", "speedup",
              "outputs");
  for (const auto& [dev, r] : scan_vs)
    std::printf("%-10s %10.3f %12.3f %8.1fx  %s\n", dev.c_str(), r.kernel_ms, r.lowered_ms,
                r.lowered_ms / r.kernel_ms, r.same ? "agree" : "DIFFER");

  const int64_t rows = 50000, width = 512, m = 65536;
  FusedGather fg = fused_gather(cpu, rows, width, m, std::min(reps, 10), false);
  FusedGather bag = fused_gather(cpu, rows, width, m, std::min(reps, 10), true);
  std::printf(
      "\ntake(W, ids) * s + b compiled on %s, W %lld x %lld float32, %lld ids: the gather "
      "inside the element-wise kernel vs stored first (KILN_GATHER_FUSION=0), fastest of %d\n",
      cpu.str().c_str(), static_cast<long long>(rows), static_cast<long long>(width),
      static_cast<long long>(m), std::min(reps, 10));
  std::printf("fused %.3f ms, stored %.3f ms: %.2fx; outputs %s\n", fg.fused_ms, fg.stored_ms,
              fg.stored_ms / fg.fused_ms, fg.same ? "equal" : "DIFFER");
  std::printf("sum(take(W, ids), 1): fused %.3f ms, stored %.3f ms: %.2fx; outputs %s\n",
              bag.fused_ms, bag.stored_ms, bag.stored_ms / bag.fused_ms,
              bag.same ? "equal" : "DIFFER");

  double bytes = 2.0 * n * sizeof(float);
  std::printf("\ncopy of the same bytes: %.3f ms (%.1f GB/s; memcpy %.3f ms, %d threads %.3f ms)\n",
              copy, bytes / copy / 1e6, copy1, parts, copyp);
  std::printf("cumsum: %.3f ms = %.0f%% of copy bandwidth (goal >= 70%%); NumPy's %.0f%%\n",
              kiln["cumsum"], 100 * copy / kiln["cumsum"], 100 * copy / numpy("cumsum"));
  return 0;
}
