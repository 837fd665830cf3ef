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
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backends/cpu/codegen.h"
#include "backends/cpu/disk_cache.h"
#include "backends/cpu/streaming_stores.h"
#include "graph/error.h"
#include "graph/hash.h"

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

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
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

struct Jit::Impl : std::enable_shared_from_this<Impl> {
  // Guards everything below; never held while LLVM optimises, emits or links, so different
  // kernels compile concurrently (each with its own LLVMContext and TargetMachine; the LLJIT's
  // ExecutionSession is thread-safe).
  mutable std::mutex mu;
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::optional<llvm::orc::JITTargetMachineBuilder> jtmb;
  std::vector<std::unique_ptr<llvm::TargetMachine>> idle_tms;  // TargetMachines are not shared
  CodegenTarget target;
  std::unique_ptr<DiskCache> disk;
  KernelCache cache{kernel_cache_budget_from_env()};
  std::unordered_map<uint64_t, std::shared_future<JitCodePtr>> building;  // by key
  JitStats stats;
  int64_t loaded = 0;  // JitCode objects alive
  std::atomic<int64_t> dylibs{0};

  void init() {
    if (lljit) return;
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    disable_epilogue_vectorization();
    jtmb = check(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    auto tm = check(jtmb->createTargetMachine(), "creating the target machine");
    target.triple = tm->getTargetTriple().str();
    target.cpu = tm->getTargetCPU().str();
    target.features = tm->getTargetFeatureString().str();
    idle_tms.push_back(std::move(tm));
    lljit = check(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create(),
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

  // A TargetMachine for one compile on this thread, returned with give_back.
  std::unique_ptr<llvm::TargetMachine> take_tm() {
    std::lock_guard<std::mutex> lock(mu);
    if (idle_tms.empty()) return check(jtmb->createTargetMachine(), "creating a target machine");
    auto tm = std::move(idle_tms.back());
    idle_tms.pop_back();
    return tm;
  }
  void give_back(std::unique_ptr<llvm::TargetMachine> tm) {
    std::lock_guard<std::mutex> lock(mu);
    idle_tms.push_back(std::move(tm));
  }

  // Kernel IR -> optimised module.
  std::unique_ptr<llvm::Module> optimize(const Kernel& k, const CodegenOptions& options,
                                         const std::string& symbol, llvm::TargetMachine& tm,
                                         llvm::LLVMContext& ctx) {
    auto t0 = Clock::now();
    ctx.setDiagnosticHandlerCallBack(quiet_diagnostics);
    std::unique_ptr<llvm::Module> m = generate_kernel(k, symbol, target, options, ctx);
    m->setDataLayout(tm.createDataLayout());
    std::string err;
    llvm::raw_string_ostream es(err);
    if (llvm::verifyModule(*m, &es))
      throw_error("cpu backend: generated invalid LLVM IR for kernel ", k.name, ": ", es.str(),
                  "\n", k.str());
    auto t1 = Clock::now();
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(&tm, pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*m, mam);
    mark_streaming_stores(*m);
    add_time(&JitStats::codegen_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
    add_time(&JitStats::optimize_ms, ms_since(t1));
    return m;
  }

  std::vector<char> emit_object(llvm::Module& m, llvm::TargetMachine& tm, const std::string& name,
                                llvm::CodeGenFileType type = llvm::CGFT_ObjectFile) {
    auto t0 = Clock::now();
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm.addPassesToEmitFile(pm, os, nullptr, type))
      throw_error("cpu backend: the target cannot emit ",
                  type == llvm::CGFT_ObjectFile ? "object files" : "assembly", " (kernel ", name,
                  ")");
    pm.run(m);
    add_time(&JitStats::emit_ms, ms_since(t0));
    return std::vector<char>(buf.begin(), buf.end());
  }

  // Kernel IR -> object file, on a TargetMachine of this thread's own.
  std::vector<char> compile(const Kernel& k, const CodegenOptions& options,
                            const std::string& symbol,
                            llvm::CodeGenFileType type = llvm::CGFT_ObjectFile) {
    std::unique_ptr<llvm::TargetMachine> tm = take_tm();
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = optimize(k, options, symbol, *tm, ctx);
    std::vector<char> object = emit_object(*m, *tm, k.name, type);
    give_back(std::move(tm));
    return object;
  }

  // Links an object into a JITDylib of its own, under a ResourceTracker of its own, and returns
  // the handle whose last owner frees both. (A JITDylib per load lets the same symbol be
  // loaded again while an evicted copy is still running somewhere.)
  JitCodePtr link(const std::vector<char>& object, const std::string& symbol, uint64_t key,
                  const std::string& text) {
    auto t0 = Clock::now();
    llvm::orc::ExecutionSession& es = lljit->getExecutionSession();
    llvm::orc::JITDylib& jd = es.createBareJITDylib("kiln_" + std::to_string(dylibs++));
    jd.addToLinkOrder(lljit->getMainJITDylib());
    llvm::orc::ResourceTrackerSP rt = jd.createResourceTracker();
    auto unload = [&es, &jd, rt] {
      llvm::consumeError(rt->remove());  // frees the code; failing leaks it, nothing worse
      llvm::consumeError(es.removeJITDylib(jd));
    };
    try {
      auto buf = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()),
                                                      symbol);
      check(lljit->addObjectFile(rt, std::move(buf)), "adding an object");
      auto addr = check(lljit->lookup(jd, symbol), "looking up a kernel");
      auto release = [self = shared_from_this(), unload, key] {
        unload();
        std::lock_guard<std::mutex> lock(self->mu);
        --self->loaded;
        ++self->stats.freed;
        self->cache.forget(key);
      };
      int64_t bytes = static_cast<int64_t>(object.size()) + kLoadedKernelOverhead;
      auto code = std::make_shared<const JitCode>(addr.toPtr<KernelFn>(), bytes, text, release);
      std::lock_guard<std::mutex> lock(mu);
      ++loaded;
      stats.link_ms += ms_since(t0);
      return code;
    } catch (...) {
      unload();
      throw;
    }
  }

  enum class Source { Disk, Compiled };

  // Loads `key` from disk or compiles it; counts what happened in `stats` (under the lock).
  JitCodePtr build(const Kernel& k, const CodegenOptions& options, uint64_t key,
                   const std::string& text) {
    std::string symbol = "kiln_k" + hex64(key);
    auto t0 = Clock::now();
    DiskCache::Lookup hit = disk->load(key, text);
    add_time(&JitStats::disk_ms, ms_since(t0));
    bool rejected = hit.status == DiskCache::Status::Rejected;
    if (hit.status == DiskCache::Status::Hit) {
      try {
        JitCodePtr code = link(hit.object, symbol, key, text);
        count(Source::Disk, false);
        return code;
      } catch (const Error&) {
        rejected = true;  // verified but unloadable: rebuild below
      }
    }
    std::vector<char> object = compile(k, options, symbol);
    disk->store_later(key, object, text);
    JitCodePtr code = link(object, symbol, key, text);
    count(Source::Compiled, rejected);
    return code;
  }

  void add_time(double JitStats::*phase, double ms) {
    std::lock_guard<std::mutex> lock(mu);
    stats.*phase += ms;
  }

  void count(Source source, bool rejected) {
    std::lock_guard<std::mutex> lock(mu);
    ++(source == Source::Disk ? stats.disk_hits : stats.compiled);
    if (rejected) ++stats.disk_rejected;
  }
};

Jit::Jit() : impl_(std::make_shared<Impl>()) {}

// Kernels still held elsewhere keep the Impl (and the LLJIT) alive until they go.
Jit::~Jit() {
  std::vector<JitCodePtr> dropped;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->cache.clear(dropped);
  impl_->building.clear();
  if (impl_->disk) impl_->disk->flush();  // the Impl may outlive this: write entries now
}

Jit& Jit::instance() {
  static Jit jit;
  return jit;
}

JitCodePtr Jit::get(const Kernel& k, uint64_t key, const CodegenOptions& options) {
  std::string tag = options.tag();
  std::string text = k.canonical() + tag;
  if (!tag.empty()) key = fnv1a(tag.data(), tag.size(), key);
  JitCodePtr code = get(k, options, key, text);
  if (code->kernel() == text) return code;
  // Two kernels with one hash: the second lives under a hash of its full text instead. Should
  // that collide as well, it is compiled for this caller alone.
  uint64_t other = fnv1a(text.data(), text.size(), 0x6a09e667f3bcc909ULL);
  code = get(k, options, other, text);
  if (code->kernel() == text) return code;
  return impl_->build(k, options, other ^ 0x9e3779b97f4a7c15ULL, text);
}

JitCodePtr Jit::get(const Kernel& k, const CodegenOptions& options, uint64_t key,
                    const std::string& text) {
  Impl& im = *impl_;
  std::vector<JitCodePtr> dropped;  // destroyed after the lock is released (freeing locks)
  std::unique_lock<std::mutex> lock(im.mu);
  im.init();
  if (JitCodePtr code = im.cache.find(key, dropped)) {
    ++im.stats.memory_hits;
    lock.unlock();
    return code;
  }
  if (auto it = im.building.find(key); it != im.building.end()) {
    std::shared_future<JitCodePtr> pending = it->second;  // another thread is building it
    lock.unlock();
    JitCodePtr code = pending.get();  // rethrows its error
    std::lock_guard<std::mutex> relock(im.mu);
    ++im.stats.memory_hits;
    return code;
  }
  std::promise<JitCodePtr> done;
  im.building.emplace(key, done.get_future().share());
  lock.unlock();
  JitCodePtr code;
  try {
    code = im.build(k, options, key, text);
  } catch (...) {
    lock.lock();
    im.building.erase(key);
    lock.unlock();
    done.set_exception(std::current_exception());
    throw;
  }
  lock.lock();
  im.building.erase(key);
  im.cache.insert(key, code, dropped);
  lock.unlock();
  done.set_value(code);
  return code;
}

std::string Jit::optimized_ir(const Kernel& k, const CodegenOptions& options) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->init();
  }
  std::unique_ptr<llvm::TargetMachine> tm = impl_->take_tm();
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = impl_->optimize(k, options, "kiln_inspect", *tm, ctx);
  impl_->give_back(std::move(tm));
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os, nullptr);
  return os.str();
}

std::string Jit::assembly(const Kernel& k, const CodegenOptions& options) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->init();
  }
  std::vector<char> text = impl_->compile(k, options, "kiln_inspect", llvm::CGFT_AssemblyFile);
  return std::string(text.begin(), text.end());
}

JitStats Jit::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  JitStats s = impl_->stats;
  s.evicted = impl_->cache.evictions();
  s.cached_kernels = impl_->cache.entries();
  s.cached_bytes = impl_->cache.bytes();
  s.budget_bytes = impl_->cache.budget();
  s.loaded_kernels = impl_->loaded;
  return s;
}

void Jit::set_cache_budget(int64_t bytes) {
  std::vector<JitCodePtr> dropped;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->cache.set_budget(std::max<int64_t>(bytes, 0), dropped);
}

void Jit::flush_disk_cache() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  DiskCache* disk = impl_->disk.get();
  lock.unlock();
  if (disk) disk->flush();
}

void Jit::clear_memory_cache() {
  std::vector<JitCodePtr> dropped;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->cache.clear(dropped);
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
