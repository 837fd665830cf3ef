// Streaming (non-temporal) stores of the cpu backend's row walk (backends/cpu/streaming_stores.h):
// the generated code stores whole aligned vectors non-temporally and nothing else; rows whose
// starts cannot be proven aligned, and launches that bind a misaligned output, keep ordinary
// stores; the line is the last-level cache or KILN_NONTEMPORAL_BYTES; and the four row ops give
// the reference interpreter's values through the streaming walk (the line set to 0, so small
// shapes take it), read back on another thread right after.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <regex>
#include <string>
#include <thread>

#include "backends/cpu/jit.h"
#include "backends/cpu/streaming_stores.h"
#include "backends/host_cache.h"
#include "backends/kernel_text.h"
#include "graph/text_reader.h"
#include "kernel_diff.h"
#include "kiln.h"
#include "row_ops.h"
#include "test_util.h"

namespace kiln {
namespace {

using test::row_inputs;
using test::row_ops;
using test::RowOp;

CompiledFunction compiled(const RowOp& op) {
  return compile(
      [op](const std::vector<Array>& in) { return std::vector<Array>{op(in[0], in[1], in[2])}; });
}

// The row kernel `op` lowers to for inputs of dtype d, (rows, len).
Kernel row_kernel(const RowOp& op, Dtype d, int64_t rows, int64_t len) {
  std::string text = compiled(op).lower(row_inputs(d, rows, len, 1)).as_text();
  size_t at = text.find("kernel rows_");
  EXPECT_NE(at, std::string::npos) << text;
  text = text.substr(at);  // the reader keeps views into it
  TextReader r(text, "test");
  return read_kernel(r);
}

struct EnvScope {  // sets a variable for the scope (read when kernels compile)
  std::string name;
  EnvScope(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~EnvScope() { unsetenv(name.c_str()); }
};

// The JIT targets this host; streaming stores are x86's.
bool x86_host() {
#if defined(__x86_64__) || defined(__i386__)
  return true;
#else
  return false;
#endif
}

cpu::CodegenOptions streaming() {
  cpu::CodegenOptions o;
  o.streaming_stores = true;
  return o;
}

// The stores the optimised IR marks non-temporal, each as "<type> align <n>".
std::vector<std::string> nontemporal_stores(const std::string& ir) {
  std::vector<std::string> out;
  std::regex store(R"(store (<\d+ x \w+>|\w+) [^,]+, ptr [^,]+, align (\d+), !nontemporal)");
  for (std::sregex_iterator it(ir.begin(), ir.end(), store), end; it != end; ++it)
    out.push_back((*it)[1].str() + " align " + (*it)[2].str());
  return out;
}

// Bytes of an LLVM vector type "<16 x float>".
int64_t vector_bytes(const std::string& type) {
  std::smatch m;
  std::regex vec(R"(<(\d+) x (\w+)>)");
  if (!std::regex_search(type, m, vec)) return 0;
  std::string e = m[2].str();
  int64_t elem = e == "double" || e == "i64"  ? 8
                 : e == "float" || e == "i32" ? 4
                 : e == "half" || e == "i16"  ? 2
                                              : 1;
  return std::stoll(m[1].str()) * elem;
}

}  // namespace

// Rows a multiple of 64 bytes: the element-wise pass's vectors are marked non-temporal, each
// whole and aligned to at least its size, and become vmovntps/vmovntdq (float32, float64), never
// movnti, with an sfence; without the option no store is non-temporal.
TEST(StreamingStores, WholeAlignedVectorsOnly) {
  if (!x86_host()) GTEST_SKIP() << "streaming stores are x86 only";
  for (Dtype d : {float32, float64, float16, bfloat16}) {
    for (const auto& [name, op] : row_ops()) {
      SCOPED_TRACE(name + " " + d.name());
      Kernel k = row_kernel(op, d, 4, 1024);
      ASSERT_FALSE(cpu::streamable_buffers(k).empty()) << k.str();
      std::string ir = cpu::Jit::instance().optimized_ir(k, streaming());
      std::vector<std::string> nt = nontemporal_stores(ir);
      ASSERT_FALSE(nt.empty()) << ir;
      for (const std::string& s : nt) {
        int64_t bytes = vector_bytes(s);
        EXPECT_GE(bytes, 16) << s;
        EXPECT_GE(std::stoll(s.substr(s.rfind(' ') + 1)), bytes) << s;  // aligned to its size
      }
      std::string as = cpu::Jit::instance().assembly(k, streaming());
      // A 16-bit output's conversion may fold into its store (vpmovdw, vcvtps2ph to memory),
      // which has no non-temporal form: the mark is then dropped, never split.
      if (!d.is_half()) {
        EXPECT_TRUE(std::regex_search(as, std::regex(R"(\tv?movnt(ps|pd|dq)\t)"))) << as;
      }
      EXPECT_EQ(as.find("movnti"), std::string::npos) << as;
      EXPECT_NE(as.find("sfence"), std::string::npos) << as;
      std::string plain = cpu::Jit::instance().assembly(k);
      EXPECT_EQ(plain.find("movnt"), std::string::npos) << plain;
      EXPECT_EQ(cpu::Jit::instance().optimized_ir(k).find("!nontemporal"), std::string::npos);
    }
  }
}

// A row whose start is not a multiple of 64 bytes (1000 float32: 4000 bytes), or an output
// view at an unaligned offset: nothing streams, whatever the line.
TEST(StreamingStores, UnprovableRowStartsStayOrdinary) {
  if (!x86_host()) GTEST_SKIP() << "streaming stores are x86 only";
  EnvScope line("KILN_NONTEMPORAL_BYTES", "0"), pays("KILN_ROW_STORES", "streaming");
  Kernel odd = row_kernel(row_ops()[0].second, float32, 4, 1000);
  EXPECT_TRUE(cpu::streamable_buffers(odd).empty());
  EXPECT_FALSE(cpu::streams_output(odd));
  Kernel even = row_kernel(row_ops()[0].second, float32, 4, 1024);
  EXPECT_TRUE(cpu::streams_output(even));
  for (int b : cpu::streamable_buffers(even)) {
    Kernel shifted = even;
    shifted.buffers[b].map.offset = Dim::constant(4);  // 16 bytes in
    EXPECT_TRUE(cpu::streamable_buffers(shifted).empty());
  }
  // Only the element-wise pass's output streams, never the per-row results of the reductions.
  std::vector<int> s = cpu::streamable_buffers(even);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(even.buffers[s[0]].map.strides.back(), Dim::constant(1));
}

// The line: the last-level cache unless KILN_NONTEMPORAL_BYTES says otherwise; a kernel streams
// when its streamed output is larger than the line and streaming pays on the host (measured
// once, or forced by KILN_ROW_STORES).
TEST(StreamingStores, LineIsTheLastLevelCacheAndTheHostDecides) {
  if (!x86_host()) GTEST_SKIP() << "streaming stores are x86 only";
  int64_t llc = last_level_cache_bytes();
  EXPECT_EQ(cpu::streaming_min_bytes(), llc > 0 ? llc : -1);
  Kernel k = row_kernel(row_ops()[0].second, float32, 4, 1024);  // 16 KiB of output
  {
    EnvScope line("KILN_NONTEMPORAL_BYTES", "16383"), pays("KILN_ROW_STORES", "streaming");
    EXPECT_TRUE(cpu::streams_output(k));
  }
  {
    EnvScope line("KILN_NONTEMPORAL_BYTES", "16383"), pays("KILN_ROW_STORES", "ordinary");
    EXPECT_FALSE(cpu::streams_output(k));
  }
  {
    EnvScope line("KILN_NONTEMPORAL_BYTES", "16384"), pays("KILN_ROW_STORES", "streaming");
    EXPECT_FALSE(cpu::streams_output(k));
  }
  {
    EnvScope line("KILN_NONTEMPORAL_BYTES", "lots");
    test::expect_error([&] { cpu::streams_output(k); },
                       {"KILN_NONTEMPORAL_BYTES='lots'", "whole number"});
  }
  {
    EnvScope line("KILN_NONTEMPORAL_BYTES", "0"), pays("KILN_ROW_STORES", "always");
    test::expect_error([&] { cpu::streams_output(k); }, {"KILN_ROW_STORES", "always"});
  }
  if (llc > 0) {
    EXPECT_FALSE(cpu::streams_output(k));  // 16 KiB is within any last-level cache
    // Measured (this binary's private cache folder): an answer, the same when asked again.
    bool pays = cpu::streaming_pays(k);
    EXPECT_EQ(cpu::streaming_pays(k), pays);
  }
}

// Every row op and float dtype through the streaming walk against the reference interpreter,
// rows around vector widths (tails of ordinary stores) and a count that splits across threads;
// the result read on another thread as soon as the call returns.
TEST(StreamingStores, RowOpsMatchReference) {
  EnvScope line("KILN_NONTEMPORAL_BYTES", "0"), pays("KILN_ROW_STORES", "streaming");
  for (Dtype d : {float32, float64, float16, bfloat16})
    for (int64_t len : {64, 1000, 1056})
      for (const auto& [name, op] : row_ops()) {
        SCOPED_TRACE(name + " " + d.name() + " len " + std::to_string(len));
        int64_t rows = len == 1056 ? 301 : 9;
        std::vector<Array> in = row_inputs(d, rows, len, static_cast<unsigned>(len));
        CompiledFunction f = compiled(op);
        std::vector<double> want;
        {
          StreamScope scope(device("reference"));
          want = test::values(f(in)[0]);
        }
        std::vector<double> got;
        {
          StreamScope scope(device("cpu"));
          Array out = f(in)[0];
          std::thread reader([&] { got = test::values(out); });
          reader.join();
        }
        double tol = d == float16 ? 4e-3 : d == bfloat16 ? 3e-2 : d == float64 ? 1e-12 : 2e-5;
        ASSERT_EQ(got.size(), want.size());
        int bad = 0;
        for (size_t i = 0; i < got.size() && bad < 5; ++i)
          if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])))) {
            ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
            ++bad;
          }
      }
}

namespace {

// A host buffer whose data starts `shift` bytes past a 64-byte boundary.
class ShiftedBuffer : public Buffer {
 public:
  ShiftedBuffer(size_t bytes, size_t shift) : bytes_(bytes), store_(bytes + 128), shift_(shift) {}
  size_t bytes() const override { return bytes_; }
  Device device() const override { return Device{"cpu", 0}; }
  void* host_ptr() override { return data(); }
  void read(void* dst, size_t offset, size_t n) const override {
    std::memcpy(dst, const_cast<ShiftedBuffer*>(this)->data() + offset, n);
  }
  void write(const void* src, size_t offset, size_t n) override {
    std::memcpy(data() + offset, src, n);
  }

 private:
  uint8_t* data() {
    auto p = reinterpret_cast<uintptr_t>(store_.data());
    return reinterpret_cast<uint8_t*>((p + 63) / 64 * 64 + shift_);
  }
  size_t bytes_;
  std::vector<uint8_t> store_;
  size_t shift_;
};

}  // namespace

// The kernel checks the output's alignment per call: a launch binding it 16 bytes past a
// boundary takes the ordinary walk and gives the same bytes as an aligned one.
TEST(StreamingStores, MisalignedOutputTakesTheOrdinaryWalk) {
  if (!x86_host()) GTEST_SKIP() << "streaming stores are x86 only";
  EnvScope line("KILN_NONTEMPORAL_BYTES", "0"), pays("KILN_ROW_STORES", "streaming");
  Kernel k = row_kernel(row_ops()[0].second, float32, 64, 1024);
  ASSERT_TRUE(cpu::streams_output(k));
  Backend& be = backend_for(device("cpu"));
  auto ck = be.compile(0, k);
  std::vector<float> x(64 * 1024);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  for (float& v : x) v = u(rng);
  auto run_with = [&](size_t shift) {
    std::vector<std::unique_ptr<ShiftedBuffer>> bufs;
    KernelArgs args;
    int64_t elements = 64 * 1024;
    for (const KernelBuffer& b : k.buffers) {
      bool row = b.map.strides.back() == Dim::constant(1);
      size_t bytes = static_cast<size_t>(row ? elements : 64) * b.dtype.size();
      bufs.push_back(std::make_unique<ShiftedBuffer>(bytes, b.output && row ? shift : 0));
      args.buffers.push_back(bufs.back().get());
    }
    bufs[0]->write(x.data(), 0, x.size() * sizeof(float));
    auto q = be.create_queue(0);
    q->enqueue_kernel(*ck, args);
    q->finish();
    std::vector<float> out(elements);
    bufs.back()->read(out.data(), 0, out.size() * sizeof(float));
    return out;
  };
  std::vector<float> aligned = run_with(0), shifted = run_with(16);
  ASSERT_EQ(k.buffers.size(), 4u);  // in, row max, row sum, out
  EXPECT_EQ(aligned, shifted);
  std::vector<double> want(aligned.size());
  for (int64_t r = 0; r < 64; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < 1024; ++j) m = std::max<double>(m, x[r * 1024 + j]);
    for (int64_t j = 0; j < 1024; ++j) s += std::exp(x[r * 1024 + j] - m);
    for (int64_t j = 0; j < 1024; ++j) want[r * 1024 + j] = std::exp(x[r * 1024 + j] - m) / s;
  }
  test::expect_near(std::vector<double>(aligned.begin(), aligned.end()), want, 1e-6);
}

}  // namespace kiln
