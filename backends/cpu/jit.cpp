#include "backends/cpu/jit.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "backends/cpu/codegen.h"
#include "backends/cpu/disk_cache.h"
#include "graph/error.h"

namespace kiln::cpu {

namespace {

std::string error_text(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

template <typename T>
T check(llvm::Expected<T> v, const char* what) {
  if (!v) throw_error("cpu backend: ", what, ": ", error_text(v.takeError()));
  return std::move(*v);
}

void check(llvm::Error e, const char* what) {
  if (e) throw_error("cpu backend: ", what, ": ", error_text(std::move(e)));
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Vectoriser remarks ("loop not vectorized") are expected for kernels with calls or
// NaN-propagating reductions; only errors are worth surfacing, and those arrive as llvm::Error.
void quiet_diagnostics(const llvm::DiagnosticInfo&, void*) {}

// With 512-bit vectors the loop vectoriser follows the 16-wide main loop with an 8-wide
// "epilogue" loop before the scalar remainder: a third copy of the (often long, math-heavy) body
// for the code generator. On the fused gelu that copy cost ~6 of ~27 ms of a cold compile
// (emit_object 16.5 -> 10.5 ms, optimize 11 -> 9.5 ms) while the kernel ran no slower without it:
// rows are long, and at most 15 points per row fall to the scalar loop. LLVM 15 has no per-loop
// hint for this, only the process-wide option, which is left alone if the host program set it.
void disable_epilogue_vectorization() {
  auto& options = llvm::cl::getRegisteredOptions();
  auto it = options.find("enable-epilogue-vectorization");
  if (it != options.end() && it->second->getNumOccurrences() == 0)
    it->second->addOccurrence(0, it->first(), "false");
}

}  // namespace

struct Jit::Impl {
  std::mutex mu;  // one compilation at a time: the TargetMachine is not thread-safe
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::unique_ptr<llvm::TargetMachine> tm;
  CodegenTarget target;
  std::unique_ptr<DiskCache> disk;
  std::unordered_map<uint64_t, KernelFn> memory;
  JitStats stats;
  int64_t dylibs = 0;

  void init() {
    if (lljit) return;
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    disable_epilogue_vectorization();
    auto jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
    jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    tm = check(jtmb.createTargetMachine(), "creating the target machine");
    target.triple = tm->getTargetTriple().str();
    target.cpu = tm->getTargetCPU().str();
    target.features = tm->getTargetFeatureString().str();
    lljit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(),
                  "creating the LLJIT");
    // Float64 kernels call libm (exp, log, ...): resolve from the process.
    lljit->getMainJITDylib().addGenerator(
        check(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                  lljit->getDataLayout().getGlobalPrefix()),
              "adding process symbols"));
    std::string env = "llvm " LLVM_VERSION_STRING "|cpu " + target.cpu + "|features " +
                      target.features + "|codegen " + std::to_string(kCodegenVersion);
    disk = std::make_unique<DiskCache>(env);
  }

  // Kernel IR -> optimised module.
  std::unique_ptr<llvm::Module> optimize(const Kernel& k, const std::string& symbol,
                                         llvm::LLVMContext& ctx) {
    ctx.setDiagnosticHandlerCallBack(quiet_diagnostics);
    std::unique_ptr<llvm::Module> m = generate_kernel(k, symbol, target, ctx);
    m->setDataLayout(tm->createDataLayout());
    std::string err;
    llvm::raw_string_ostream es(err);
    if (llvm::verifyModule(*m, &es))
      throw_error("cpu backend: generated invalid LLVM IR for kernel ", k.name, ": ", es.str(),
                  "\n", k.str());
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(tm.get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*m, mam);
    return m;
  }

  std::vector<char> emit_object(llvm::Module& m, const std::string& name) {
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
      throw_error("cpu backend: the target cannot emit object files (kernel ", name, ")");
    pm.run(m);
    return std::vector<char>(buf.begin(), buf.end());
  }

  // Links an object into a fresh JITDylib (so the same symbol can be loaded again after
  // clear_memory_cache) and returns the kernel's address.
  KernelFn link(const std::vector<char>& object, const std::string& symbol) {
    auto jd_or = lljit->createJITDylib("kiln_" + std::to_string(dylibs++));
    if (!jd_or) throw_error("cpu backend: creating a JITDylib: ", error_text(jd_or.takeError()));
    llvm::orc::JITDylib& jd = *jd_or;
    jd.addToLinkOrder(lljit->getMainJITDylib());
    auto buf =
        llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), symbol);
    check(lljit->addObjectFile(jd, std::move(buf)), "adding an object");
    auto addr = check(lljit->lookup(jd, symbol), "looking up a kernel");
    return addr.toPtr<KernelFn>();
  }

  KernelFn build(const Kernel& k, uint64_t key) {
    std::string symbol = "kiln_k" + hex(key);
    DiskCache::Lookup hit = disk->load(key);
    if (hit.status == DiskCache::Status::Hit) {
      try {
        KernelFn fn = link(hit.object, symbol);
        ++stats.disk_hits;
        return fn;
      } catch (const Error&) {
        ++stats.disk_rejected;  // verified but unloadable: rebuild below
      }
    } else if (hit.status == DiskCache::Status::Rejected) {
      ++stats.disk_rejected;
    }
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = optimize(k, symbol, ctx);
    std::vector<char> object = emit_object(*m, k.name);
    ++stats.compiled;
    disk->store(key, object);
    return link(object, symbol);
  }
};

Jit::Jit() : impl_(std::make_unique<Impl>()) {}
Jit::~Jit() = default;

Jit& Jit::instance() {
  static Jit jit;  // never destroyed before kernels stop running: static, process lifetime
  return jit;
}

KernelFn Jit::get(const Kernel& k, uint64_t key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->init();
  auto it = impl_->memory.find(key);
  if (it != impl_->memory.end()) {
    ++impl_->stats.memory_hits;
    return it->second;
  }
  KernelFn fn = impl_->build(k, key);
  impl_->memory.emplace(key, fn);
  return fn;
}

std::string Jit::optimized_ir(const Kernel& k) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->init();
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = impl_->optimize(k, "kiln_inspect", ctx);
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os, nullptr);
  return os.str();
}

JitStats Jit::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

void Jit::clear_memory_cache() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->memory.clear();
}

std::string host_description() {
  llvm::StringMap<bool> map;
  llvm::sys::getHostCPUFeatures(map);
  std::string notable;
  for (const char* f : {"avx512f", "avx2", "fma", "sse4.2", "neon"})
    if (map.lookup(f)) notable += std::string(notable.empty() ? "" : ", ") + f;
  return "LLVM " LLVM_VERSION_STRING " ORC JIT, " + llvm::sys::getHostCPUName().str() + " (" +
         notable + ")";
}

}  // namespace kiln::cpu
