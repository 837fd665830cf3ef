#include "backends/cpu/streaming_stores.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "backends/cpu/jit.h"
#include "backends/cpu/row_walk.h"
#include "backends/cpu/tune.h"
#include "backends/host_cache.h"
#include "graph/env.h"
#include "graph/error.h"
#include "graph/hash.h"
#include "graph/immortal.h"

namespace kiln::cpu {

namespace {

bool constant_map(const IndexMap& m) {
  if (m.offset.is_runtime()) return false;
  for (const Dim& s : m.strides)
    if (s.is_runtime()) return false;
  return true;
}

}  // namespace

int64_t streaming_min_bytes() {
  if (std::optional<uint64_t> v = env_count(
          "KILN_NONTEMPORAL_BYTES", "the output bytes past which row kernels' stores may stream"))
    return static_cast<int64_t>(*v);
  int64_t llc = last_level_cache_bytes();
  return llc > 0 ? llc : -1;
}

std::vector<int> streamable_buffers(const Kernel& k) {
  std::vector<int> out;
  if (!k.is_rows() || k.passes.back().reduce) return out;
  int last = k.ndim() - 1;
  for (const Store& s : k.passes.back().stores) {
    const KernelBuffer& b = k.buffers[s.buffer];
    const IndexMap& m = b.map;
    if (!constant_map(m) || !(m.strides[last] == Dim::constant(1))) continue;
    auto aligned = [&](int64_t elements) {
      return elements * static_cast<int64_t>(b.dtype.size()) % kStreamAlign == 0;
    };
    bool ok = aligned(m.offset.value);
    for (int a = 0; a < last; ++a) ok = ok && aligned(m.strides[a].value);
    // Stored by an earlier pass too (then read back by a later one): keep it in cache.
    for (size_t p = 0; p + 1 < k.passes.size(); ++p)
      for (const Store& t : k.passes[p].stores) ok = ok && t.buffer != s.buffer;
    if (ok) out.push_back(s.buffer);
  }
  return out;
}

bool streams_output(const Kernel& k) {
#if !defined(__x86_64__) && !defined(__i386__)
  return false;  // the JIT targets this host, and codegen streams on x86 only: nothing to measure
#endif
  if (!row_walk_fits(k)) return false;
  std::vector<int> streamed = streamable_buffers(k);
  if (streamed.empty()) return false;
  int64_t min = streaming_min_bytes();
  if (min < 0) return false;
  int64_t elements = 1;
  for (const Dim& d : k.domain) elements *= d.value;
  int64_t bytes = 0;
  for (int b : streamed) bytes += elements * static_cast<int64_t>(k.buffers[b].dtype.size());
  return bytes > min && streaming_pays(k);
}

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// The elements past buffer b's base that the walk of kept points [0, n) of k reaches, plus one.
int64_t reach(const Kernel& k, const KernelBuffer& b, int64_t n) {
  int kept = k.ndim() - k.row_axes();
  int64_t last = b.map.offset.value, inner = 1;
  for (int a = k.ndim() - 1; a >= 0; --a) {
    int64_t e = k.domain[a].value;
    int64_t top = a >= kept ? e - 1 : std::min(e - 1, (n - 1) / inner);
    if (a < kept) inner *= e;
    last += top * std::abs(b.map.strides[a].value);
  }
  return last + 1;
}

// k walked over its first rows, ~2x the last-level cache of output (or all of it), with ordinary
// and with streaming stores, on zeroed buffers and zero launch words: the timing does not depend
// on the values (the code has no data-dependent branches).
std::vector<TuneCandidate> walk_candidates(const Kernel& k) {
  int kept = k.ndim() - k.row_axes();
  int64_t points = 1, out_row = 0;
  for (int a = 0; a < kept; ++a) points *= k.domain[a].value;
  int64_t elements = 1;
  for (int a = kept; a < k.ndim(); ++a) elements *= k.domain[a].value;
  for (int b : streamable_buffers(k))
    out_row += elements * static_cast<int64_t>(k.buffers[b].dtype.size());
  int64_t n = std::clamp<int64_t>(2 * last_level_cache_bytes() / std::max<int64_t>(out_row, 1) + 1,
                                  1, points);
  struct Probe {
    std::vector<std::unique_ptr<void, FreeDeleter>> buffers;
    std::vector<void*> ptrs;
    std::vector<int64_t> params;
    std::vector<JitCodePtr> code;
  };
  auto p = std::make_shared<Probe>();
  for (const KernelBuffer& b : k.buffers) {
    int64_t bytes = reach(k, b, n) * static_cast<int64_t>(b.dtype.size());
    size_t size = static_cast<size_t>((bytes + kStreamAlign - 1) / kStreamAlign * kStreamAlign);
    p->buffers.emplace_back(std::aligned_alloc(kStreamAlign, size));
    if (!p->buffers.back())
      throw_error("cpu backend: out of host memory for the streaming-store measurement (", size,
                  " bytes)");
    std::memset(p->buffers.back().get(), 0, size);  // its pages, touched once
    p->ptrs.push_back(p->buffers.back().get());
  }
  p->params.assign(static_cast<size_t>(k.num_params()) + 1, 0);
  std::vector<TuneCandidate> out;
  for (bool streaming : {false, true}) {
    CodegenOptions o;
    o.streaming_stores = streaming;
    p->code.push_back(Jit::instance().get(k, k.hash(), o));
    KernelFn fn = p->code.back()->fn();
    out.push_back({streaming ? "streaming" : "ordinary",
                   [p, fn, n] { fn(p->ptrs.data(), p->params.data(), 0, n); }});
  }
  return out;
}

Tuner& row_stores_tuner() {
  static Immortal<Tuner> t("row_stores",
                           host_cpu_model() + "|llc " + std::to_string(last_level_cache_bytes()) +
                               "|codegen " + std::to_string(kCodegenVersion),
                           "KILN_ROW_STORES");
  return t.get();
}

}  // namespace

bool streaming_pays(const Kernel& k) {
  return row_stores_tuner().choose("rows/" + hex64(k.hash()), {"ordinary", "streaming"},
                                   [&] { return walk_candidates(k); }) == "streaming";
}

void mark_streaming_stores(llvm::Module& m) {
  const llvm::DataLayout& dl = m.getDataLayout();
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    // The assumes of the streaming walk: pointer -> the assume.
    std::vector<std::pair<const llvm::Value*, const llvm::AssumeInst*>> assumed;
    for (llvm::Instruction& i : llvm::instructions(f))
      if (auto* a = llvm::dyn_cast<llvm::AssumeInst>(&i))
        for (unsigned b = 0; b < a->getNumOperandBundles(); ++b) {
          llvm::OperandBundleUse u = a->getOperandBundleAt(b);
          auto* align =
              u.Inputs.size() == 2 ? llvm::dyn_cast<llvm::ConstantInt>(u.Inputs[1]) : nullptr;
          if (u.getTagName() == "align" && align && align->getZExtValue() == kStreamAlign)
            assumed.emplace_back(u.Inputs[0].get(), a);
        }
    if (assumed.empty()) continue;
    llvm::DominatorTree dom(f);
    llvm::MDNode* one =
        llvm::MDNode::get(m.getContext(), {llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(
                                              llvm::Type::getInt32Ty(m.getContext()), 1))});
    for (llvm::Instruction& i : llvm::instructions(f)) {
      auto* st = llvm::dyn_cast<llvm::StoreInst>(&i);
      if (!st) continue;
      llvm::Type* t = st->getValueOperand()->getType();
      uint64_t size = dl.getTypeStoreSize(t).getFixedSize();
      if (!t->isVectorTy() || size < 16 || (size & (size - 1)) != 0 ||
          st->getAlign().value() < size)
        continue;
      const llvm::Value* base = llvm::getUnderlyingObject(st->getPointerOperand());
      for (const auto& [ptr, assume] : assumed)
        if (ptr == base && dom.dominates(assume, st)) {
          st->setMetadata(llvm::LLVMContext::MD_nontemporal, one);
          break;
        }
    }
  }
}

}  // namespace kiln::cpu
