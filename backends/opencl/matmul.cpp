#include "backends/opencl/matmul.h"

#include <mutex>

#include "backends/opencl/native_launch.h"
#include "backends/opencl/program_cache.h"
#include "graph/error.h"
#ifdef KILN_HAVE_CLBLAST
#include <clblast.h>
#endif

namespace kiln::opencl {

namespace {

struct MatmulKernel {
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
  std::mutex mu;  // argument state is shared
};

std::string source(Dtype d, bool fp64) {
  std::string s, load = "X", acc, store = "(T)acc";
  if (d == float16 || d == bfloat16) {
    s = "#define T ushort\n";
    load = d == float16 ? "vload_half(0, (__global const half*)&X)" : "as_float((uint)X << 16)";
  } else {
    const char* t = d == float64   ? "double"
                    : d == float32 ? "float"
                    : d == bool_   ? "uchar"
                    : d == int8    ? "char"
                    : d == uint8   ? "uchar"
                    : d == int32   ? "int"
                    : d == uint32  ? "uint"
                    : d == int64   ? "long"
                                   : "ulong";
    s = std::string("#define T ") + t + "\n";
  }
  bool fl = d.is_float();
  acc = fl ? (fp64 ? "double" : "float") : "ulong";
  if (fp64 || d == float64) s = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + s;
  s = "#pragma OPENCL FP_CONTRACT OFF\n" + s;
  s += "__kernel void kiln_matmul(__global const T* a, __global const T* b, __global T* c,\n"
       "    __global const long* offs, long m, long n, long k, long batches,\n"
       "    long sai, long sap, long sbp, long sbj) {\n"
       "  const long total = batches * m * n;\n"
       "  for (long g = get_global_id(0); g < total; g += get_global_size(0)) {\n"
       "    const long bi = g / (m * n), r = g % (m * n), i = r / n, j = r % n;\n"
       "    const long oa = offs[3 * bi] + i * sai, ob = offs[3 * bi + 1] + j * sbj;\n";
  s += "    " + acc + " acc = 0;\n";
  auto ld = [&](const std::string& x) {
    std::string e = load;
    e.replace(e.find('X'), 1, x);
    return fl ? "(" + acc + ")" + e : "(ulong)(long)" + e;
  };
  s += "    for (long p = 0; p < k; ++p) acc += " + ld("a[oa + p * sap]") + " * " +
       ld("b[ob + p * sbp]") + ";\n";
  std::string out = "c[offs[3 * bi + 2] + i * n + j]";
  if (d == float16)
    s += "    vstore_half_rte((float)acc, 0, (__global half*)&" + out + ");\n";
  else if (d == bfloat16)
    s += "    { uint x = as_uint((float)acc);\n"
         "      " +
         out +
         " = (x & 0x7fffffffu) > 0x7f800000u ? (ushort)((x >> 16) | 0x40u)\n"
         "          : (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16); }\n";
  else if (d == bool_)
    s += "    " + out + " = (uchar)(acc != 0);\n";
  else
    s += "    " + out + " = " + store + ";\n";
  s += "  }\n}\n";
  return s;
}

MatmulKernel& kernel_for(ClDevice& dev, Dtype d) {
  return cached_kernels<MatmulKernel>(dev, static_cast<int>(d.kind), [&] {
    if (d == float64 && !dev.fp64)
      throw_error("opencl: matmul of float64 needs the cl_khr_fp64 extension, which ", dev.label(),
                  " lacks");
    auto k = std::make_unique<MatmulKernel>();
    k->program = build_program(dev, source(d, dev.fp64), "matmul").program;
    k->kernel = make_kernel(k->program, "kiln_matmul", "matmul");
    return k;
  });
}

#ifdef KILN_HAVE_CLBLAST
// float32/float64 through CLBlast's tuned GEMM (one call for every batch).
template <typename T>
cl_event clblast_gemm(cl_command_queue q, const MatmulArgs& a, cl_mem ma, cl_mem mb, cl_mem mc) {
  size_t batches = a.c_offsets.size();
  std::vector<size_t> ao(a.a_offsets.begin(), a.a_offsets.end());
  std::vector<size_t> bo(a.b_offsets.begin(), a.b_offsets.end());
  std::vector<size_t> co(a.c_offsets.begin(), a.c_offsets.end());
  std::vector<T> alphas(batches, T{1}), betas(batches, T{0});
  size_t m = static_cast<size_t>(a.m), n = static_cast<size_t>(a.n), k = static_cast<size_t>(a.k);
  cl_event ev = nullptr;
  // A transposed operand is stored as its transpose: A as k x m, B as n x k.
  auto flag = [](bool t) { return t ? clblast::Transpose::kYes : clblast::Transpose::kNo; };
  size_t lda = a.trans_a ? m : k, ldb = a.trans_b ? k : n;
  auto status = clblast::GemmBatched<T>(
      clblast::Layout::kRowMajor, flag(a.trans_a), flag(a.trans_b), m, n, k, alphas.data(), ma,
      ao.data(), lda, mb, bo.data(), ldb, betas.data(), mc, co.data(), n, batches, &q, &ev);
  if (status != clblast::StatusCode::kSuccess)
    throw_error("opencl: CLBlast GemmBatched (", a.m, "x", a.k, " @ ", a.k, "x", a.n, ", ", batches,
                " batches, ", a.dtype, ") failed with status ", static_cast<int>(status));
  return ev;
}
#endif

}  // namespace

std::string matmul_libraries() {
#ifdef KILN_HAVE_CLBLAST
  return "matmul: CLBlast (float32, float64), a plain kernel for other dtypes";
#else
  return "matmul: a plain kernel (CLBlast not built in)";
#endif
}

namespace {

bool uses_clblast(const ClDevice& dev, const MatmulArgs& a) {
#ifdef KILN_HAVE_CLBLAST
  return a.k > 0 && (a.dtype == float32 || (a.dtype == float64 && dev.fp64));
#else
  (void)dev, (void)a;
  return false;
#endif
}

}  // namespace

bool matmul_may_block(const ClDevice& dev, const MatmulArgs& a) { return uses_clblast(dev, a); }

cl_event enqueue_matmul(ClDevice& dev, ClPool& pool, cl_command_queue q, const MatmulArgs& a,
                        std::vector<std::shared_ptr<void>>& keep) {
  size_t batches = a.c_offsets.size();
  if (batches == 0 || a.m == 0 || a.n == 0) return nullptr;
  if (a.a_offsets.size() != batches || a.b_offsets.size() != batches)
    throw_error("opencl: matmul got ", a.a_offsets.size(), "/", a.b_offsets.size(), "/", batches,
                " batch offsets");
  auto* A = dynamic_cast<ClBuffer*>(a.a);
  auto* B = dynamic_cast<ClBuffer*>(a.b);
  auto* C = dynamic_cast<ClBuffer*>(a.c);
  if (!A || !B || !C || &A->cl_device() != &dev || &B->cl_device() != &dev ||
      &C->cl_device() != &dev)
    throw_error("opencl: matmul operands must be buffers on ", dev.label());
#ifdef KILN_HAVE_CLBLAST
  if (uses_clblast(dev, a)) {
    return a.dtype == float32 ? clblast_gemm<float>(q, a, A->mem(), B->mem(), C->mem())
                              : clblast_gemm<double>(q, a, A->mem(), B->mem(), C->mem());
  }
#endif
  auto offs = std::make_shared<std::vector<cl_long>>();
  for (size_t b = 0; b < batches; ++b)
    offs->insert(offs->end(), {a.a_offsets[b], a.b_offsets[b], a.c_offsets[b]});
  auto ob = pool.allocate(offs->size() * sizeof(cl_long));
  cl_check(clEnqueueWriteBuffer(q, ob->mem(), CL_FALSE, 0, offs->size() * sizeof(cl_long),
                                offs->data(), 0, nullptr, nullptr),
           "clEnqueueWriteBuffer (matmul offsets)");
  keep = {offs, ob};
  MatmulKernel& k = kernel_for(dev, a.dtype);
  std::lock_guard<std::mutex> lock(k.mu);
  cl_mem ma = A->mem(), mb = B->mem(), mc = C->mem(), mo = ob->mem();
  cl_long m = a.m, n = a.n, kk = a.k, nb = static_cast<cl_long>(batches);
  // Strides of A along its rows (i) and along k (p), and of B along k and its columns (j): a
  // transposed operand is stored as its transpose and read in place.
  cl_long sai = a.trans_a ? 1 : kk, sap = a.trans_a ? m : 1;
  cl_long sbp = a.trans_b ? 1 : n, sbj = a.trans_b ? kk : 1;
  size_t local = std::min<size_t>(64, dev.max_work_group),
         total = batches * static_cast<size_t>(a.m * a.n);
  size_t global =
      std::min<size_t>((total + local - 1) / local, dev.compute_units * size_t{64}) * local;
  cl_event ev = nullptr;
  launch(q, k.kernel, "matmul", global, local, &ev, ma, mb, mc, mo, m, n, kk, nb, sai, sap, sbp,
         sbj);
  return ev;
}

}  // namespace kiln::opencl
