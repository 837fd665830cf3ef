#include "backends/cpu/codegen.h"

#include <llvm/ADT/Triple.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "backends/cpu/streaming_stores.h"
#include "backends/cpu/vector_math.h"
#include "graph/element.h"
#include "graph/error.h"
#include "graph/random.h"

namespace kiln::cpu {

namespace {

using llvm::IRBuilder;
using llvm::Type;

constexpr double kTwoPi = 6.283185307179586476925286766559;

class Codegen {
 public:
  Codegen(const Kernel& k, const std::string& symbol, const CodegenTarget& target,
          const CodegenOptions& options, llvm::LLVMContext& ctx)
      : k_(&k), ctx_(ctx), mod_(std::make_unique<llvm::Module>("kiln_" + symbol, ctx)), b_(ctx) {
    mod_->setTargetTriple(target.triple);
    make_function(symbol, target);
    float_lanes_ = target.features.find("+avx512f") != std::string::npos ? 16
                   : target.features.find("+avx") != std::string::npos   ? 8
                                                                         : 0;
    // sfence (below) is x86's; elsewhere the stores stay ordinary.
    if (options.streaming_stores && llvm::Triple(target.triple).isX86())
      streamed_ = streamable_buffers(k);
  }

  std::unique_ptr<llvm::Module> run() {
    load_arguments();
    point_.assign(k_->ndim(), nullptr);
    for (size_t i = 0; i < k_->passes.size(); ++i) passes_.push_back(k_->pass_kernel(i));
    row_kept_ = k_->ndim() - k_->row_axes();
    if (!passes_.empty()) find_carried();
    if (!streamed_.empty())
      emit_streaming_versions();
    else if (k_->in_place.empty())
      emit_walk();
    else
      emit_versions();
    b_.CreateRetVoid();
    return std::move(mod_);
  }

 private:
  // ---- types and constants -------------------------------------------------------------
  // How a value lives in registers. float16 and bfloat16 values live in float32 registers as
  // float32 values (scalar_ops.h): they are rounded to their type only by a store or a cast.
  Type* reg_type(Dtype d) {
    switch (d.kind) {
      case Dtype::Kind::Bool: return b_.getInt1Ty();
      case Dtype::Kind::Int8:
      case Dtype::Kind::UInt8: return b_.getInt8Ty();
      case Dtype::Kind::Int32:
      case Dtype::Kind::UInt32: return b_.getInt32Ty();
      case Dtype::Kind::Int64:
      case Dtype::Kind::UInt64: return b_.getInt64Ty();
      case Dtype::Kind::Float16:
      case Dtype::Kind::BFloat16:
      case Dtype::Kind::Float32: return b_.getFloatTy();
      case Dtype::Kind::Float64: return b_.getDoubleTy();
    }
    return nullptr;
  }
  // How it lives in memory: bool as a byte, float16 as LLVM half (converted with fpext/fptrunc:
  // F16C on x86), bfloat16 as its 16 bits (converted with integer ops, which every target has).
  Type* mem_type(Dtype d) {
    if (d.is_bool()) return b_.getInt8Ty();
    if (d == float16) return b_.getHalfTy();
    if (d == bfloat16) return b_.getInt16Ty();
    return reg_type(d);
  }
  // The float type a float value's register holds (float32 for the 16-bit types).
  Dtype compute_type(Dtype d) { return d.is_half() ? float32 : d; }
  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  llvm::Value* fconst(Dtype d, double v) { return llvm::ConstantFP::get(reg_type(d), v); }
  llvm::Value* iconst(Dtype d, int64_t v) {  // the low bits of v (ints wrap to their width)
    return llvm::ConstantInt::get(reg_type(d), static_cast<uint64_t>(v), false);
  }

  // A float32 register value rounded to float16 / bfloat16 (round to nearest even), kept in
  // float32; other dtypes unchanged. bfloat16 rounds on the bits as graph/float16.h does.
  llvm::Value* round16(llvm::Value* x, Dtype d) {
    if (d == float16) return b_.CreateFPExt(b_.CreateFPTrunc(x, b_.getHalfTy()), b_.getFloatTy());
    if (d != bfloat16) return x;
    Type* i32 = b_.getInt32Ty();
    llvm::Value* u = b_.CreateBitCast(x, i32);
    llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(u, 16), b_.getInt32(1));
    llvm::Value* up = b_.CreateAdd(u, b_.CreateAdd(lsb, b_.getInt32(0x7fff)));
    llvm::Value* quiet = b_.CreateOr(u, b_.getInt32(0x400000));  // NaN stays NaN
    llvm::Value* r = b_.CreateSelect(b_.CreateFCmpUNO(x, x), quiet, up);
    return b_.CreateBitCast(b_.CreateAnd(r, b_.getInt32(0xffff0000u)), b_.getFloatTy());
  }

  llvm::Value* load_elem(Dtype d, llvm::Value* ptr) {
    llvm::Value* x = b_.CreateLoad(mem_type(d), ptr);
    if (d.is_bool()) return b_.CreateICmpNE(x, b_.getInt8(0));
    if (d == float16) return b_.CreateFPExt(x, b_.getFloatTy());
    if (d == bfloat16)
      return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(x, b_.getInt32Ty()), 16), b_.getFloatTy());
    return x;
  }

  // Stores narrow 16-bit floats from float32 (round to nearest even).
  void store_elem(Dtype d, llvm::Value* v, llvm::Value* ptr) {
    if (d.is_bool()) v = b_.CreateZExt(v, b_.getInt8Ty());
    if (d == float16) v = b_.CreateFPTrunc(v, b_.getHalfTy());
    if (d == bfloat16)
      v = b_.CreateTrunc(b_.CreateLShr(b_.CreateBitCast(round16(v, d), b_.getInt32Ty()), 16),
                         b_.getInt16Ty());
    b_.CreateStore(v, ptr);
  }

  // ---- function skeleton -----------------------------------------------------------------
  void make_function(const std::string& symbol, const CodegenTarget& target) {
    Type* ptr = b_.getInt8PtrTy();
    auto* fty = llvm::FunctionType::get(
        b_.getVoidTy(),
        {ptr->getPointerTo(), b_.getInt64Ty()->getPointerTo(), b_.getInt64Ty(), b_.getInt64Ty()},
        false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, symbol, *mod_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    if (!target.cpu.empty()) fn_->addFnAttr("target-cpu", target.cpu);
    if (!target.features.empty()) fn_->addFnAttr("target-features", target.features);
    // LLVM defaults to 256-bit vectors on AVX-512 CPUs (older parts clocked down on zmm). The
    // math-heavy fused loops here are compute-bound, and on this host zmm measured faster.
    if (target.features.find("+avx512f") != std::string::npos)
      fn_->addFnAttr("prefer-vector-width", "512");
    entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry_);
  }

  llvm::AllocaInst* entry_alloca(Type* t) {
    IRBuilder<> eb(entry_, entry_->begin());
    return eb.CreateAlloca(t);
  }

  // Buffer pointers and every runtime parameter are loaded once, in the entry block.
  void load_arguments() {
    auto args = fn_->arg_begin();
    llvm::Value* bufs = &*args++;
    llvm::Value* params = &*args++;
    begin_ = &*args++;
    end_ = &*args++;
    for (size_t i = 0; i < k_->buffers.size(); ++i) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getInt8PtrTy(), bufs, i);
      buf_ptrs_.push_back(b_.CreateLoad(b_.getInt8PtrTy(), slot));
    }
    for (int p = 0; p < k_->num_params(); ++p) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), params, p);
      params_.push_back(b_.CreateLoad(b_.getInt64Ty(), slot));
    }
    for (const Dim& d : k_->domain) extents_.push_back(dim(d));
  }

  llvm::Value* dim(const Dim& d) { return d.is_runtime() ? params_[d.param] : i64(d.value); }

  // ---- loops -----------------------------------------------------------------------------
  // The innermost loop carries llvm.loop.vectorize.enable so the vectoriser accepts the runtime
  // alias checks a fused kernel with many buffers needs (inputs may alias outputs: donation).
  llvm::MDNode* vectorize_md() {
    llvm::Metadata* enable[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                                llvm::ConstantAsMetadata::get(b_.getTrue())};
    std::vector<llvm::Metadata*> ops{nullptr, llvm::MDNode::get(ctx_, enable)};
    if (loop_width_ > 0) {
      llvm::Metadata* width[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.width"),
                                 llvm::ConstantAsMetadata::get(b_.getInt32(loop_width_))};
      ops.push_back(llvm::MDNode::get(ctx_, width));
    }
    llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
    md->replaceOperandWith(0, md);
    return md;
  }

  // for (i = start; i < stop; ++i) body(i). The counter lives in an alloca that SROA turns
  // into a phi; the O3 pipeline rotates the loop.
  void loop(llvm::Value* start, llvm::Value* stop, bool innermost,
            const std::function<void(llvm::Value*)>& body) {
    llvm::AllocaInst* iv = entry_alloca(b_.getInt64Ty());
    b_.CreateStore(start, iv);
    auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto* inner = llvm::BasicBlock::Create(ctx_, "body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::Value* i = b_.CreateLoad(b_.getInt64Ty(), iv);
    b_.CreateCondBr(b_.CreateICmpSLT(i, stop), inner, exit);
    b_.SetInsertPoint(inner);
    body(i);
    b_.CreateStore(b_.CreateNSWAdd(i, i64(1)), iv);
    llvm::BranchInst* back = b_.CreateBr(header);
    if (innermost) back->setMetadata(llvm::LLVMContext::MD_loop, vectorize_md());
    b_.SetInsertPoint(exit);
  }

  void emit_single_point() {
    auto* body = llvm::BasicBlock::Create(ctx_, "point", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "done", fn_);
    b_.CreateCondBr(b_.CreateICmpSLT(begin_, end_), body, exit);
    b_.SetInsertPoint(body);
    emit_point();
    b_.CreateBr(exit);
    b_.SetInsertPoint(exit);
  }

  // The kept axes the walk goes over: a row kernel's rows (also while one of its passes is
  // being emitted), else the kernel's own.
  int walk_kept() const { return passes_.empty() ? k_->kept_axes() : row_kept_; }

  void emit_walk() {
    if (walk_kept() == 0)
      emit_single_point();
    else
      emit_rows();
  }

  // Kernel::in_place: when the launch binds every pair to one buffer, a walk that reads and
  // writes each pair through the input's pointer (equal loads and stores of one address, which
  // the vectoriser takes without runtime checks); otherwise the ordinary walk.
  void emit_versions() {
    llvm::Value* same = b_.getTrue();
    for (const auto& [in, out] : k_->in_place)
      same = b_.CreateAnd(same, b_.CreateICmpEQ(buf_ptrs_[in], buf_ptrs_[out]));
    auto* one = llvm::BasicBlock::Create(ctx_, "in_place", fn_);
    auto* two = llvm::BasicBlock::Create(ctx_, "separate", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "walked", fn_);
    b_.CreateCondBr(same, one, two);
    b_.SetInsertPoint(one);
    std::vector<llvm::Value*> own = buf_ptrs_;
    for (const auto& [in, out] : k_->in_place) buf_ptrs_[out] = buf_ptrs_[in];
    emit_walk();
    b_.CreateBr(done);
    buf_ptrs_ = own;
    b_.SetInsertPoint(two);
    emit_walk();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // Streaming stores (streaming_stores.h): when every streamed buffer is bound kStreamAlign-
  // aligned, a walk that assumes so (LLVM's alignment-from-assumptions pass carries it to the
  // vectorised stores: each row starts aligned, so its vectors do; mark_streaming_stores then
  // makes them non-temporal), followed by an sfence; otherwise the ordinary walk.
  // Non-temporal stores are weakly ordered: they may reach memory after later ordinary stores,
  // such as the one by which the thread running this chunk signals that it finished (oneTBB's
  // join, an event). The sfence orders them before any later store, so whoever sees the chunk
  // done sees its output.
  void emit_streaming_versions() {
    llvm::Value* aligned = b_.getTrue();
    for (int b : streamed_) {
      llvm::Value* low =
          b_.CreateAnd(b_.CreatePtrToInt(buf_ptrs_[b], b_.getInt64Ty()), i64(kStreamAlign - 1));
      aligned = b_.CreateAnd(aligned, b_.CreateICmpEQ(low, i64(0)));
    }
    auto* stream = llvm::BasicBlock::Create(ctx_, "streaming", fn_);
    auto* plain = llvm::BasicBlock::Create(ctx_, "plain", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "walked", fn_);
    b_.CreateCondBr(aligned, stream, plain);
    b_.SetInsertPoint(stream);
    for (int b : streamed_) {
      llvm::Value* bundle[] = {buf_ptrs_[b], i64(kStreamAlign)};
      b_.CreateAssumption(b_.getTrue(), {llvm::OperandBundleDef("align", bundle)});
    }
    emit_walk();
    b_.CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
    b_.CreateBr(done);
    b_.SetInsertPoint(plain);
    emit_walk();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // Walks [begin, end) of the flattened kept domain one row (a run of the innermost kept axis)
  // at a time: the multi-index is recomputed by division once per row, not per point.
  void emit_rows() {
    int kept = walk_kept();
    llvm::AllocaInst* lin = entry_alloca(b_.getInt64Ty());
    b_.CreateStore(begin_, lin);
    auto* header = llvm::BasicBlock::Create(ctx_, "rows", fn_);
    auto* row = llvm::BasicBlock::Create(ctx_, "row", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "rows_done", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::Value* at = b_.CreateLoad(b_.getInt64Ty(), lin);
    b_.CreateCondBr(b_.CreateICmpSLT(at, end_), row, exit);
    b_.SetInsertPoint(row);
    llvm::Value* rem = at;
    std::vector<llvm::Value*> idx(kept);
    for (int a = kept - 1; a >= 0; --a) {
      if (a == 0) {
        idx[a] = rem;
      } else {
        idx[a] = b_.CreateURem(rem, extents_[a]);
        rem = b_.CreateUDiv(rem, extents_[a]);
      }
    }
    for (int a = 0; a < kept - 1; ++a) point_[a] = idx[a];
    llvm::Value* j0 = idx[kept - 1];
    llvm::Value* n = b_.CreateBinaryIntrinsic(
        llvm::Intrinsic::smin, b_.CreateSub(extents_[kept - 1], j0), b_.CreateSub(end_, at));
    if (column_reduction()) {
      emit_tiled_row(j0, n);
    } else {
      bool elementwise = !k_->reduce && passes_.empty();
      if (elementwise) hoist_gather_rows(kept - 1, j0);
      loop(j0, b_.CreateNSWAdd(j0, n), elementwise, [&](llvm::Value* j) {
        point_[kept - 1] = j;
        emit_point();
      });
      fixed_.clear();
    }
    b_.CreateStore(b_.CreateNSWAdd(at, n), lin);
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
  }

  // One kept point: the whole body, or reduction + epilogue; then the stores. A row kernel's
  // point is a row: every pass in turn, so the row is read from memory once and then from cache.
  void emit_point() {
    if (!passes_.empty()) return emit_row();
    int n = static_cast<int>(k_->body.size());
    if (fixed_.empty()) vals_.assign(k_->body.size(), nullptr);
    if (k_->reduce) {
      emit_reduction();
      for (int i = k_->reduce->value + 1; i < n; ++i) vals_[i] = emit_value(i);
    } else {
      for (int i = 0; i < n; ++i)
        if (fixed_.empty() || !fixed_[i]) vals_[i] = emit_value(i);
    }
    emit_stores();
  }

  // The index of a Gather that does not move along the axes [from, to) (an embedding's id, read
  // once per gathered row) is computed once, before those axes' loops: left inside, its load
  // could not be hoisted by LLVM (a store might write the indices, as far as it can tell), the
  // gathered address would not be affine in the loop counter, and the loop would read the
  // table an element at a time instead of in vectors. Safe: a buffer an output may share
  // memory with is read only at the element written (Kernel IR invariant 5), never through a
  // map constant along the walked row. The values to compute first, or empty when none.
  std::vector<bool> gather_indices_fixed_along(int from, int to) const {
    int n = static_cast<int>(k_->body.size());
    int end = k_->reduce ? k_->reduce->value : n;  // a reduction's prologue
    std::vector<bool> need(n, false), still(n, false), fixed(n, false);
    for (int i = 0; i < end; ++i)
      if (k_->body[i].kind == ValueKind::Gather) need[k_->body[i].a] = true;
    for (int i = 0; i < end; ++i) {
      const Value& v = k_->body[i];
      bool f = v.kind != ValueKind::Random;
      const IndexMap* m = v.kind == ValueKind::Index ? &v.map
                          : v.kind == ValueKind::Load || v.kind == ValueKind::Gather
                              ? &k_->buffers[v.buffer].map
                              : nullptr;
      for (int a = from; m && a < to; ++a) f = f && m->strides[a] == Dim::constant(0);
      for (int op : {v.a, v.b, v.c})
        if (op >= 0) f = f && still[op];
      still[i] = f;
    }
    bool any = false;
    for (int i = end - 1; i >= 0; --i) {
      if (!need[i] || !still[i]) continue;
      fixed[i] = any = true;
      for (int op : {k_->body[i].a, k_->body[i].b, k_->body[i].c})
        if (op >= 0) need[op] = true;
    }
    return any ? fixed : std::vector<bool>{};
  }

  // An element-wise row (the innermost kept axis from `at`): its fixed Gather indices first.
  void hoist_gather_rows(int axis, llvm::Value* at) {
    fixed_ = gather_indices_fixed_along(axis, axis + 1);
    if (fixed_.empty()) return;
    vals_.assign(k_->body.size(), nullptr);
    point_[axis] = at;  // any point of the row: these values do not move along it
    for (size_t i = 0; i < fixed_.size(); ++i)
      if (fixed_[i]) vals_[i] = emit_value(static_cast<int>(i));
  }

  void emit_row() {
    const Kernel* row = k_;
    for (const Kernel& pass : passes_) {
      k_ = &pass;
      cur_pass_ = static_cast<int>(&pass - passes_.data());
      vals_.assign(pass.body.size(), nullptr);
      hoist_row_values();
      if (pass.reduce) {
        emit_reduction();
        for (int i = pass.reduce->value + 1; i < static_cast<int>(pass.body.size()); ++i)
          vals_[i] = emit_value(i);
        emit_stores();
      } else {
        emit_row_map();
      }
      hoisted_.clear();
    }
    k_ = row;
  }

  // ---- values carried from a reduction pass to the map pass ------------------------------
  // A costly value the last reduction pass computes at each point and the map pass computes
  // again (softmax's exp(x - max), summed, then divided) is kept in a row of scratch on the
  // stack and read back instead of recomputed: the same instructions on the same inputs, so
  // the same bits. Only when the scratch stays small (kCarryBytes).
  struct Carried {
    int from, to;  // value index in the reduction pass, in the map pass
    llvm::Value* row = nullptr;
  };
  static constexpr int64_t kCarryBytes = int64_t{64} << 10;

  static bool costly(const Value& v) {
    if (v.kind != ValueKind::Unary) return false;
    switch (v.unary) {
      case UnaryOp::Exp:
      case UnaryOp::Log:
      case UnaryOp::Sin:
      case UnaryOp::Cos:
      case UnaryOp::Tanh:
      case UnaryOp::Erf:
      case UnaryOp::Sigmoid: return true;
      default: return false;
    }
  }

  // Whether value a of pass pa and value b of pass pb compute the same thing at a point.
  bool same_value(const Kernel& pa, int a, const Kernel& pb, int b) const {
    const Value &x = pa.body[a], &y = pb.body[b];
    if (x.kind != y.kind || x.dtype != y.dtype) return false;
    switch (x.kind) {
      case ValueKind::Load: return x.buffer == y.buffer;
      case ValueKind::Constant:
        return x.param == y.param && (x.param >= 0 || x.constant == y.constant);
      case ValueKind::Index: return x.map == y.map;
      case ValueKind::Random:
      case ValueKind::Gather:
      case ValueKind::Reduce: return false;
      default: break;
    }
    if (x.unary != y.unary || x.binary != y.binary) return false;
    for (auto [oa, ob] : {std::pair{x.a, y.a}, {x.b, y.b}, {x.c, y.c}}) {
      if ((oa < 0) != (ob < 0)) return false;
      if (oa >= 0 && !same_value(pa, oa, pb, ob)) return false;
    }
    return true;
  }

  void find_carried() {
    int m = static_cast<int>(passes_.size()) - 1, r = m - 1;
    if (r < 0 || passes_[m].reduce || !passes_[r].reduce) return;
    int64_t row = 1;
    for (int a = row_kept_; a < k_->ndim(); ++a) row *= k_->domain[a].value;
    const Kernel &R = passes_[r], &M = passes_[m];
    int64_t bytes = 0;
    for (int i = 0; i < static_cast<int>(M.body.size()); ++i) {
      if (!costly(M.body[i])) continue;
      for (int k = 0; k < R.reduce->value; ++k) {
        if (!same_value(R, k, M, i)) continue;
        bytes += row * static_cast<int64_t>(reg_bytes(M.body[i].dtype));
        if (bytes > kCarryBytes) return;
        carried_.push_back({k, i});
        break;
      }
    }
    carry_pass_ = r;
    for (Carried& c : carried_) c.row = entry_alloca_n(reg_type(M.body[c.to].dtype), row);
  }

  int reg_bytes(Dtype d) { return static_cast<int>(reg_type(d)->getPrimitiveSizeInBits() / 8); }

  llvm::AllocaInst* entry_alloca_n(Type* t, int64_t n) {
    IRBuilder<> eb(entry_, entry_->begin());
    llvm::AllocaInst* a = eb.CreateAlloca(t, i64(n));
    a->setAlignment(llvm::Align(64));
    return a;
  }

  // The point's place in its row (row-major over the row axes).
  llvm::Value* place_in_row() {
    llvm::Value* j = i64(0);
    for (int a = row_kept_; a < k_->ndim(); ++a)
      j = b_.CreateNSWAdd(b_.CreateNSWMul(j, extents_[a]), point_[a]);
    return j;
  }

  // In the reduction pass: keep the carried values of this point.
  void keep_carried() {
    if (cur_pass_ != carry_pass_) return;
    llvm::Value* j = place_in_row();
    for (const Carried& c : carried_) {
      Type* t = reg_type(k_->body[c.from].dtype);
      b_.CreateStore(vals_[c.from], b_.CreateInBoundsGEP(t, c.row, j));
    }
  }

  // In the map pass: the carried value of value i at this point, or null.
  llvm::Value* carried_value(int i) {
    if (cur_pass_ != carry_pass_ + 1) return nullptr;
    for (const Carried& c : carried_)
      if (c.to == i) {
        Type* t = reg_type(k_->body[i].dtype);
        return b_.CreateLoad(t, b_.CreateInBoundsGEP(t, c.row, place_in_row()));
      }
    return nullptr;
  }

  // A pass without a reduction: every value and store at each point of the row, the innermost
  // axis the vectorised loop. A pass storing float16 or bfloat16 asks for the full float32
  // width: left to itself, LLVM 15 widened the float16 softmax's map loop to 4 lanes (8-byte
  // stores, too narrow to stream) where one conversion per 16 floats does.
  void emit_row_map() {
    for (const Store& s : k_->stores)
      if (k_->buffers[s.buffer].dtype.is_half()) loop_width_ = float_lanes_;
    std::function<void(int)> nest = [&](int axis) {
      if (axis == k_->ndim()) {
        for (int i = 0; i < static_cast<int>(k_->body.size()); ++i) {
          if (hoisted_[i]) continue;
          llvm::Value* kept = carried_value(i);
          vals_[i] = kept ? kept : emit_value(i);
        }
        emit_stores();
        return;
      }
      loop(i64(0), extents_[axis], axis == k_->ndim() - 1, [&](llvm::Value* r) {
        point_[axis] = r;
        nest(axis + 1);
      });
    };
    nest(walk_kept());
    loop_width_ = 0;
  }

  // Values of the pass that do not move along the row (loads of what an earlier pass stored
  // for this row, launch scalars, what is computed from them) are emitted once, before the
  // row's loops: the loops then carry no load the vectoriser would have to check for aliasing
  // with the stores.
  void hoist_row_values() {
    int n = static_cast<int>(k_->body.size()), kept = walk_kept();
    int end = k_->reduce ? k_->reduce->value : n;
    hoisted_.assign(n, false);
    for (int a = kept; a < k_->ndim(); ++a) point_[a] = i64(0);
    for (int i = 0; i < end; ++i) {
      const Value& v = k_->body[i];
      bool fixed = true;
      if (v.kind == ValueKind::Load || v.kind == ValueKind::Gather || v.kind == ValueKind::Index) {
        const IndexMap& m = v.kind == ValueKind::Index ? v.map : k_->buffers[v.buffer].map;
        for (int a = kept; a < k_->ndim(); ++a) fixed = fixed && m.strides[a] == Dim::constant(0);
      } else if (v.kind == ValueKind::Random) {
        fixed = false;
      }
      for (int op : {v.a, v.b, v.c})
        if (op >= 0) fixed = fixed && hoisted_[op];
      if (!fixed) continue;
      hoisted_[i] = true;
      vals_[i] = emit_value(i);
    }
  }

  void emit_stores() {
    for (const Store& s : k_->stores) {
      const KernelBuffer& buf = k_->buffers[s.buffer];
      store_elem(buf.dtype, vals_[s.value], element_ptr(s.buffer));
    }
  }

  // ---- addresses ---------------------------------------------------------------------------
  llvm::Value* address(const IndexMap& m) {
    llvm::Value* a = dim(m.offset);
    for (size_t k = 0; k < m.strides.size(); ++k) {
      const Dim& s = m.strides[k];
      if (s == Dim::constant(0)) continue;
      llvm::Value* term = s == Dim::constant(1) ? point_[k] : b_.CreateNSWMul(point_[k], dim(s));
      a = b_.CreateNSWAdd(a, term);
    }
    return a;
  }

  llvm::Value* element_ptr(int buffer) {
    Type* t = mem_type(k_->buffers[buffer].dtype);
    return b_.CreateInBoundsGEP(t, buf_ptrs_[buffer], address(k_->buffers[buffer].map));
  }

  // A Gather's element: the map's address plus the row its index picks, the index wrapped
  // once (a negative one counts from the end) and clamped into [0, extent-1] (kernel_ir.h), so
  // the load stays inside the buffer whatever the index. A load at a computed address: LLVM
  // may vectorise it as a gather.
  llvm::Value* gathered_ptr(const Value& v) {
    llvm::Value* extent = dim(v.extent);
    llvm::Value* a = vals_[v.a];
    llvm::Value* zero = i64(0);
    llvm::Value* row = b_.CreateSelect(b_.CreateICmpSLT(a, zero), b_.CreateAdd(a, extent), a);
    row = b_.CreateSelect(b_.CreateICmpSLT(row, zero), zero, row);
    llvm::Value* last = b_.CreateSub(extent, i64(1));
    row = b_.CreateSelect(b_.CreateICmpSGT(row, last), last, row);
    llvm::Value* at =
        b_.CreateNSWAdd(address(k_->buffers[v.buffer].map), b_.CreateNSWMul(row, dim(v.step)));
    Type* t = mem_type(k_->buffers[v.buffer].dtype);
    return b_.CreateInBoundsGEP(t, buf_ptrs_[v.buffer], at);
  }

  // ---- values ------------------------------------------------------------------------------
  llvm::Value* emit_value(int i) {
    const Value& v = k_->body[i];
    switch (v.kind) {
      case ValueKind::Load: {
        return load_elem(k_->buffers[v.buffer].dtype, element_ptr(v.buffer));
      }
      case ValueKind::Gather: return load_elem(k_->buffers[v.buffer].dtype, gathered_ptr(v));
      case ValueKind::Constant: return constant(v);
      case ValueKind::Index: return address(v.map);
      case ValueKind::Unary: return unary(v.unary, vals_[v.a], v.dtype);
      case ValueKind::Binary:
        if (v.binary == BinaryOp::Power && is_immediate_two(k_->body[v.b]))  // kernel_ir.h
          return v.dtype.is_float() ? b_.CreateFMul(vals_[v.a], vals_[v.a])
                                    : b_.CreateMul(vals_[v.a], vals_[v.a]);
        return binary(v.binary, vals_[v.a], vals_[v.b], k_->body[v.a].dtype, v.dtype);
      case ValueKind::Select:
        return b_.CreateSelect(to_bool(vals_[v.a], k_->body[v.a].dtype), vals_[v.b], vals_[v.c]);
      case ValueKind::Cast: return cast(vals_[v.a], k_->body[v.a].dtype, v.dtype);
      case ValueKind::Random: return random(v, vals_[v.a], k_->body[v.a].dtype);
      case ValueKind::Reduce: return vals_[i];  // set by emit_reduction
    }
    return nullptr;
  }

  llvm::Value* constant(const Value& v) {
    if (v.param >= 0) return launch_scalar(params_[v.param], v.dtype);
    const Scalar& c = v.constant;
    if (v.dtype.is_float()) {
      double f = c.dtype.is_float() ? c.f : static_cast<double>(c.i);
      f = scalar::round_to(f, v.dtype);
      return fconst(v.dtype, f);
    }
    int64_t i = c.dtype.is_float() ? static_cast<int64_t>(c.f) : c.i;
    if (v.dtype.is_bool()) return b_.getInt1(i != 0);
    return iconst(v.dtype, i);
  }

  static bool is_immediate_two(const Value& v) {
    return v.kind == ValueKind::Constant && v.param < 0 && v.constant.as_double() == 2.0;
  }

  // A params word (launch_word) as a value of dtype d: floats travel as double bits.
  llvm::Value* launch_scalar(llvm::Value* word, Dtype d) {
    if (d.is_bool()) return b_.CreateICmpNE(word, b_.getInt64(0));
    if (!d.is_float()) return b_.CreateTrunc(word, reg_type(d));
    llvm::Value* f = b_.CreateBitCast(word, b_.getDoubleTy());
    return d == float64 ? f : b_.CreateFPTrunc(f, reg_type(d));
  }

  llvm::Value* to_bool(llvm::Value* x, Dtype d) {
    if (d.is_bool()) return x;
    if (d.is_float()) return b_.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0.0));
    return b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
  }

  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::Value* x) {
    return b_.CreateUnaryIntrinsic(id, x);
  }

  llvm::Value* libm(const char* name, std::vector<llvm::Value*> args) {
    std::vector<Type*> types(args.size(), b_.getDoubleTy());
    auto* fty = llvm::FunctionType::get(b_.getDoubleTy(), types, false);
    llvm::FunctionCallee f = mod_->getOrInsertFunction(name, fty);
    return b_.CreateCall(f, args);
  }

  llvm::Value* unary(UnaryOp op, llvm::Value* x, Dtype d) {
    if (d.is_float()) return unary_float(op, x, d);
    // Integers (bools computed as int32 and narrowed back with != 0, as scalar::wrap does).
    llvm::Value* a = d.is_bool() ? b_.CreateZExt(x, b_.getInt32Ty()) : x;
    llvm::Value* zero = llvm::ConstantInt::get(a->getType(), 0);
    llvm::Value* r = a;
    switch (op) {
      case UnaryOp::Negative: r = b_.CreateSub(zero, a); break;
      case UnaryOp::Abs:
        if (!d.is_unsigned())
          r = b_.CreateSelect(b_.CreateICmpSLT(a, zero), b_.CreateSub(zero, a), a);
        break;
      case UnaryOp::LogicalNot: r = b_.CreateZExt(b_.CreateICmpEQ(a, zero), a->getType()); break;
      case UnaryOp::BitwiseInvert:  // ~ of a bool is its negation
        r = d.is_bool() ? b_.CreateZExt(b_.CreateICmpEQ(a, zero), a->getType()) : b_.CreateNot(a);
        break;
      default: break;  // floor/ceil of an integer is the integer
    }
    return d.is_bool() ? b_.CreateICmpNE(r, zero) : r;
  }

  // 16-bit float types compute as float32 (their register type).
  llvm::Value* unary_float(UnaryOp op, llvm::Value* x, Dtype d) {
    bool f32 = reg_type(d)->isFloatTy();
    switch (op) {
      case UnaryOp::Negative: return b_.CreateFNeg(x);
      case UnaryOp::Abs: return intrinsic(llvm::Intrinsic::fabs, x);
      case UnaryOp::Sqrt: return intrinsic(llvm::Intrinsic::sqrt, x);
      case UnaryOp::Rsqrt:
        return f32 ? vmath::rsqrt_f32(b_, x)
                   : b_.CreateFDiv(fconst(d, 1.0), intrinsic(llvm::Intrinsic::sqrt, x));
      case UnaryOp::Floor: return intrinsic(llvm::Intrinsic::floor, x);
      case UnaryOp::Ceil: return intrinsic(llvm::Intrinsic::ceil, x);
      case UnaryOp::LogicalNot:
        return b_.CreateSelect(b_.CreateFCmpOEQ(x, fconst(d, 0)), fconst(d, 1), fconst(d, 0));
      case UnaryOp::Exp: return f32 ? vmath::exp_f32(b_, x) : libm("exp", {x});
      case UnaryOp::Log: return f32 ? vmath::log_f32(b_, x) : libm("log", {x});
      case UnaryOp::Sin: return f32 ? vmath::sin_f32(b_, x) : libm("sin", {x});
      case UnaryOp::Cos: return f32 ? vmath::cos_f32(b_, x) : libm("cos", {x});
      case UnaryOp::Tanh: return f32 ? vmath::tanh_f32(b_, x) : libm("tanh", {x});
      case UnaryOp::Erf: return f32 ? vmath::erf_f32(b_, x) : libm("erf", {x});
      case UnaryOp::Sigmoid:
        if (f32) return vmath::sigmoid_f32(b_, x);
        return b_.CreateFDiv(fconst(d, 1),
                             b_.CreateFAdd(fconst(d, 1), libm("exp", {b_.CreateFNeg(x)})));
      case UnaryOp::BitwiseInvert: break;  // integers only (ops refuse floats)
    }
    return x;
  }

  // `d` is the operand dtype, `out` the result's (bool for comparisons).
  llvm::Value* binary(BinaryOp op, llvm::Value* x, llvm::Value* y, Dtype d, Dtype out) {
    if (d.is_float()) return binary_float(op, x, y, d);
    bool narrow = d.is_bool();
    llvm::Value* a = narrow ? b_.CreateZExt(x, b_.getInt32Ty()) : x;
    llvm::Value* c = narrow ? b_.CreateZExt(y, b_.getInt32Ty()) : y;
    Type* t = a->getType();
    llvm::Value* zero = llvm::ConstantInt::get(t, 0);
    llvm::Value* r = nullptr;
    bool uns = d.is_unsigned();
    using P = llvm::CmpInst::Predicate;
    auto cmp = [&](P sp, P up) { return b_.CreateICmp(uns ? up : sp, a, c); };
    switch (op) {
      case BinaryOp::Add: r = b_.CreateAdd(a, c); break;
      case BinaryOp::Subtract: r = b_.CreateSub(a, c); break;
      case BinaryOp::Multiply: r = b_.CreateMul(a, c); break;
      case BinaryOp::Divide: {
        if (uns) {  // b == 0 gives 0 (scalar_ops)
          llvm::Value* z = b_.CreateICmpEQ(c, zero);
          r = b_.CreateSelect(
              z, zero, b_.CreateUDiv(a, b_.CreateSelect(z, llvm::ConstantInt::get(t, 1), c)));
          break;
        }
        // b == 0 gives 0 (scalar_ops); b == -1 is negation, so INT_MIN / -1 wraps, never traps.
        llvm::Value* minus1 = llvm::ConstantInt::get(t, -1, true);
        llvm::Value* special = b_.CreateOr(b_.CreateICmpEQ(c, zero), b_.CreateICmpEQ(c, minus1));
        llvm::Value* q =
            b_.CreateSDiv(a, b_.CreateSelect(special, llvm::ConstantInt::get(t, 1), c));
        llvm::Value* s = b_.CreateSelect(b_.CreateICmpEQ(c, zero), zero, b_.CreateSub(zero, a));
        r = b_.CreateSelect(special, s, q);
        break;
      }
      case BinaryOp::Power: {
        Type* i64t = b_.getInt64Ty();
        llvm::Value* base = uns ? b_.CreateZExt(a, i64t) : b_.CreateSExt(a, i64t);
        llvm::Value* e = uns ? b_.CreateZExt(c, i64t) : b_.CreateSExt(c, i64t);
        r = b_.CreateTrunc(b_.CreateCall(ipow(), {base, e, b_.getInt1(!uns)}), t);
        break;
      }
      case BinaryOp::Maximum: r = b_.CreateSelect(cmp(P::ICMP_SGT, P::ICMP_UGT), a, c); break;
      case BinaryOp::Minimum: r = b_.CreateSelect(cmp(P::ICMP_SLT, P::ICMP_ULT), a, c); break;
      case BinaryOp::Equal: return b_.CreateICmpEQ(a, c);
      case BinaryOp::NotEqual: return b_.CreateICmpNE(a, c);
      case BinaryOp::Less: return cmp(P::ICMP_SLT, P::ICMP_ULT);
      case BinaryOp::LessEqual: return cmp(P::ICMP_SLE, P::ICMP_ULE);
      case BinaryOp::Greater: return cmp(P::ICMP_SGT, P::ICMP_UGT);
      case BinaryOp::GreaterEqual: return cmp(P::ICMP_SGE, P::ICMP_UGE);
      case BinaryOp::LogicalAnd:
        return b_.CreateAnd(b_.CreateICmpNE(a, zero), b_.CreateICmpNE(c, zero));
      case BinaryOp::LogicalOr:
        return b_.CreateOr(b_.CreateICmpNE(a, zero), b_.CreateICmpNE(c, zero));
      case BinaryOp::FloorDivide:
      case BinaryOp::Remainder: r = floor_div_rem(op == BinaryOp::Remainder, a, c, uns); break;
      case BinaryOp::BitwiseAnd: r = b_.CreateAnd(a, c); break;
      case BinaryOp::BitwiseOr: r = b_.CreateOr(a, c); break;
      case BinaryOp::BitwiseXor: r = b_.CreateXor(a, c); break;
      case BinaryOp::LeftShift:
      case BinaryOp::RightShift:
        r = shift(op == BinaryOp::LeftShift, a, c, d.size() * 8, uns);
        break;
    }
    if (narrow || out.is_bool()) return b_.CreateICmpNE(r, zero);
    return r;
  }

  llvm::Value* binary_float(BinaryOp op, llvm::Value* a, llvm::Value* c, Dtype d) {
    bool f32 = reg_type(d)->isFloatTy();
    switch (op) {
      case BinaryOp::Add: return b_.CreateFAdd(a, c);
      case BinaryOp::Subtract: return b_.CreateFSub(a, c);
      case BinaryOp::Multiply: return b_.CreateFMul(a, c);
      case BinaryOp::Divide: return b_.CreateFDiv(a, c);
      case BinaryOp::Power: return f32 ? vmath::pow_f32(b_, a, c) : libm("pow", {a, c});
      case BinaryOp::Maximum:  // NaN in a or b propagates
        return b_.CreateSelect(b_.CreateOr(b_.CreateFCmpUNO(a, a), b_.CreateFCmpOGT(a, c)), a, c);
      case BinaryOp::Minimum:
        return b_.CreateSelect(b_.CreateOr(b_.CreateFCmpUNO(a, a), b_.CreateFCmpOLT(a, c)), a, c);
      case BinaryOp::Equal: return b_.CreateFCmpOEQ(a, c);
      case BinaryOp::NotEqual: return b_.CreateFCmpUNE(a, c);
      case BinaryOp::Less: return b_.CreateFCmpOLT(a, c);
      case BinaryOp::LessEqual: return b_.CreateFCmpOLE(a, c);
      case BinaryOp::Greater: return b_.CreateFCmpOGT(a, c);
      case BinaryOp::GreaterEqual: return b_.CreateFCmpOGE(a, c);
      case BinaryOp::LogicalAnd: return b_.CreateAnd(to_bool(a, d), to_bool(c, d));
      case BinaryOp::LogicalOr: return b_.CreateOr(to_bool(a, d), to_bool(c, d));
      case BinaryOp::FloorDivide:
      case BinaryOp::Remainder: {  // in double, rounded once (scalar_ops.h)
        Type* dt = b_.getDoubleTy();
        llvm::Value* x = f32 ? b_.CreateFPExt(a, dt) : a;
        llvm::Value* y = f32 ? b_.CreateFPExt(c, dt) : c;
        llvm::Value* q = intrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(x, y));
        llvm::Value* r = op == BinaryOp::FloorDivide ? q : b_.CreateFSub(x, b_.CreateFMul(y, q));
        return f32 ? b_.CreateFPTrunc(r, reg_type(d)) : r;
      }
      default: return a;  // bitwise ops: integers only (ops refuse floats)
    }
    return a;
  }

  // scalar::int_floor_divide / int_remainder: a zero divisor gives 0 and -1 is special-cased
  // (INT_MIN / -1 would trap), so the division instruction never sees either.
  llvm::Value* floor_div_rem(bool rem, llvm::Value* a, llvm::Value* c, bool uns) {
    Type* t = a->getType();
    llvm::Value* zero = llvm::ConstantInt::get(t, 0);
    llvm::Value* one = llvm::ConstantInt::get(t, 1);
    llvm::Value* is0 = b_.CreateICmpEQ(c, zero);
    if (uns) {
      llvm::Value* safe = b_.CreateSelect(is0, one, c);
      return b_.CreateSelect(is0, zero, rem ? b_.CreateURem(a, safe) : b_.CreateUDiv(a, safe));
    }
    llvm::Value* is_m1 = b_.CreateICmpEQ(c, llvm::ConstantInt::get(t, -1, true));
    llvm::Value* special = b_.CreateOr(is0, is_m1);
    llvm::Value* safe = b_.CreateSelect(special, one, c);
    llvm::Value* q = b_.CreateSDiv(a, safe);
    llvm::Value* m = b_.CreateSRem(a, safe);
    // The truncated result is off by one where the remainder's sign differs from the divisor's.
    llvm::Value* off =
        b_.CreateAnd(b_.CreateICmpNE(m, zero), b_.CreateICmpSLT(b_.CreateXor(m, c), zero));
    if (rem) return b_.CreateSelect(special, zero, b_.CreateSelect(off, b_.CreateAdd(m, c), m));
    llvm::Value* fq = b_.CreateSelect(off, b_.CreateSub(q, one), q);
    return b_.CreateSelect(is0, zero, b_.CreateSelect(is_m1, b_.CreateSub(zero, a), fq));
  }

  // scalar::int_shift: the count as unsigned; counts of `width` or more shift every bit out.
  llvm::Value* shift(bool left, llvm::Value* a, llvm::Value* c, uint64_t width, bool uns) {
    Type* t = a->getType();
    llvm::Value* zero = llvm::ConstantInt::get(t, 0);
    llvm::Value* out = b_.CreateICmpUGE(c, llvm::ConstantInt::get(t, width));
    llvm::Value* safe = b_.CreateSelect(out, zero, c);
    if (left) return b_.CreateSelect(out, zero, b_.CreateShl(a, safe));
    if (uns) return b_.CreateSelect(out, zero, b_.CreateLShr(a, safe));
    llvm::Value* fill = b_.CreateAShr(a, t->getIntegerBitWidth() - 1);  // 0 or -1
    return b_.CreateSelect(out, fill, b_.CreateAShr(a, safe));
  }

  // scalar::int_power as an internal function: a loop by squaring, negative exponents per the
  // oracle (1 for base 1, +-1 for base -1, else 0) when the third argument says the exponent is
  // signed. Wrap-around multiplication.
  llvm::Function* ipow() {
    if (ipow_) return ipow_;
    Type* t = b_.getInt64Ty();
    auto* fty = llvm::FunctionType::get(t, {t, t, b_.getInt1Ty()}, false);
    ipow_ = llvm::Function::Create(fty, llvm::Function::InternalLinkage, "kiln_ipow", *mod_);
    ipow_->addFnAttr(llvm::Attribute::NoUnwind);
    IRBuilder<> b(ctx_);
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", ipow_);
    auto* neg = llvm::BasicBlock::Create(ctx_, "neg", ipow_);
    auto* head = llvm::BasicBlock::Create(ctx_, "head", ipow_);
    auto* step = llvm::BasicBlock::Create(ctx_, "step", ipow_);
    auto* done = llvm::BasicBlock::Create(ctx_, "done", ipow_);
    llvm::Value* base = ipow_->getArg(0);
    llvm::Value* e = ipow_->getArg(1);
    b.SetInsertPoint(entry);
    b.CreateCondBr(b.CreateAnd(ipow_->getArg(2), b.CreateICmpSLT(e, b.getInt64(0))), neg, head);
    b.SetInsertPoint(neg);
    llvm::Value* odd = b.CreateICmpNE(b.CreateAnd(e, 1), b.getInt64(0));
    llvm::Value* m1 = b.CreateSelect(odd, b.getInt64(-1), b.getInt64(1));
    llvm::Value* r = b.CreateSelect(b.CreateICmpEQ(base, b.getInt64(-1)), m1, b.getInt64(0));
    b.CreateRet(b.CreateSelect(b.CreateICmpEQ(base, b.getInt64(1)), b.getInt64(1), r));
    b.SetInsertPoint(head);
    llvm::PHINode* acc = b.CreatePHI(t, 2);
    llvm::PHINode* sq = b.CreatePHI(t, 2);
    llvm::PHINode* ex = b.CreatePHI(t, 2);
    acc->addIncoming(b.getInt64(1), entry);
    sq->addIncoming(base, entry);
    ex->addIncoming(e, entry);
    b.CreateCondBr(b.CreateICmpEQ(ex, b.getInt64(0)), done, step);
    b.SetInsertPoint(step);
    llvm::Value* bit = b.CreateICmpNE(b.CreateAnd(ex, 1), b.getInt64(0));
    acc->addIncoming(b.CreateSelect(bit, b.CreateMul(acc, sq), acc), step);
    sq->addIncoming(b.CreateMul(sq, sq), step);
    ex->addIncoming(b.CreateLShr(ex, 1), step);
    b.CreateBr(head);
    b.SetInsertPoint(done);
    b.CreateRet(acc);
    return ipow_;
  }

  // scalar::cast: saturating float->int (NaN -> 0), x->bool is x != 0, 64-bit int->float32
  // through double (the oracle rounds twice), 16-bit floats rounded from float32.
  llvm::Value* cast(llvm::Value* x, Dtype from, Dtype to) {
    if (from == to) return x;
    Type* t = reg_type(to);
    if (to.is_bool()) return to_bool(x, from);
    if (to.is_float()) return round16(cast_to_float(x, from, reg_type(compute_type(to))), to);
    if (from.is_float()) {
      auto id = to.is_unsigned() ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat;
      return b_.CreateIntrinsic(id, {t, x->getType()}, {x});
    }
    if (from.is_bool() || from.is_unsigned()) return b_.CreateZExtOrTrunc(x, t);
    return b_.CreateSExtOrTrunc(x, t);
  }

  // x (of dtype from) as a float or double register value `t`.
  llvm::Value* cast_to_float(llvm::Value* x, Dtype from, Type* t) {
    if (from.is_float()) {
      if (x->getType() == t) return x;
      return t->isFloatTy() ? b_.CreateFPTrunc(x, t) : b_.CreateFPExt(x, t);
    }
    bool uns = from.is_bool() || from.is_unsigned();
    auto to_fp = [&](Type* ft) { return uns ? b_.CreateUIToFP(x, ft) : b_.CreateSIToFP(x, ft); };
    if (from.size() == 8 && t->isFloatTy()) return b_.CreateFPTrunc(to_fp(b_.getDoubleTy()), t);
    return to_fp(t);
  }

  // ---- random ------------------------------------------------------------------------------
  // random::bits(key, c) = mix(key + (c + 1) * golden), mix = SplitMix64's finaliser.
  llvm::Value* bits(llvm::Value* key, llvm::Value* c) {
    llvm::Value* z = b_.CreateAdd(
        key, b_.CreateMul(b_.CreateAdd(c, b_.getInt64(1)), b_.getInt64(0x9e3779b97f4a7c15ULL)));
    z = b_.CreateMul(b_.CreateXor(z, b_.CreateLShr(z, 30)), b_.getInt64(0xbf58476d1ce4e5b9ULL));
    z = b_.CreateMul(b_.CreateXor(z, b_.CreateLShr(z, 27)), b_.getInt64(0x94d049bb133111ebULL));
    return b_.CreateXor(z, b_.CreateLShr(z, 31));
  }

  // random::unit_from_bits in the draw's dtype (exact: its significand digits times 2^-p).
  llvm::Value* unit(llvm::Value* bits, Dtype d) {
    int p = random::unit_digits(d);
    llvm::Value* m = b_.CreateLShr(bits, 64 - p);
    return b_.CreateFMul(b_.CreateUIToFP(m, reg_type(d)), fconst(d, std::ldexp(1.0, -p)));
  }

  llvm::Value* random(const Value& v, llvm::Value* counter, Dtype cd) {
    llvm::Value* c = cast(counter, cd, int64);
    llvm::Value* key = v.b >= 0 ? vals_[v.b] : v.param >= 0 ? params_[v.param] : b_.getInt64(v.key);
    if (v.dist == RandomDist::Bits) return bits(key, c);
    if (v.dist == RandomDist::Uniform) return unit(bits(key, c), v.dtype);
    llvm::Value* c2 = b_.CreateShl(c, 1);
    Dtype ud = random::normal_compute_dtype(v.dtype);
    llvm::Value* u1 = unit(bits(key, c2), ud);
    llvm::Value* u2 = unit(bits(key, b_.CreateOr(c2, b_.getInt64(1))), ud);
    llvm::Value* one_minus = b_.CreateFSub(fconst(v.dtype, 1), u1);  // exact
    if (v.dtype == float64) {                                        // libm, exactly as the oracle
      llvm::Value* r = intrinsic(llvm::Intrinsic::sqrt,
                                 b_.CreateFMul(fconst(v.dtype, -2), libm("log", {one_minus})));
      return b_.CreateFMul(r, libm("cos", {b_.CreateFMul(fconst(v.dtype, kTwoPi), u2)}));
    }
    llvm::Value* r = intrinsic(llvm::Intrinsic::sqrt,
                               b_.CreateFMul(fconst(v.dtype, -2), vmath::log_f32(b_, one_minus)));
    llvm::Value* angle = b_.CreateFMul(llvm::ConstantFP::get(b_.getDoubleTy(), kTwoPi),
                                       b_.CreateFPExt(u2, b_.getDoubleTy()));
    return b_.CreateFMul(r, vmath::cos_f32_of_f64(b_, angle));
  }

  // ---- reduction ---------------------------------------------------------------------------
  // Accumulates over the reduced axes of the current kept point. Float sum/prod accumulate in
  // double with `reassoc` (vectorisable); max/min keep the input type, propagate NaN and
  // vectorise; argmax follows the oracle step by step (NaN wins, first maximum) and stays scalar
  // (LLVM 15 cannot vectorise an index-tracking reduction).
  // Where one kept point's reduction state lives: pointers to the accumulator, the argmax
  // position and (vectorised max/min) the NaN flag, plus the shared step counter.
  struct AccState {
    Type* t;
    llvm::Value *acc, *best_pos, *nan_seen, *pos;
  };

  void emit_reduction() {
    const Reduction& red = *k_->reduce;
    const Value& rv = k_->body[red.value];
    Dtype in = k_->body[rv.a].dtype;
    // A float32 sum accumulates in double, and the vectoriser sizes the loop by the double:
    // half the float32 lanes for everything else the pass computes (softmax's exp). In a row
    // kernel's pass, where that work is the point, the loop takes the full float32 width.
    bool fsum32 = !passes_.empty() && (in == float32 || in.is_half()) &&
                  (red.op == ReduceOp::Sum || red.op == ReduceOp::Prod);
    loop_width_ = fsum32 ? float_lanes_ : 0;
    AccState s = reduction_state(1);
    init_state(s, nullptr);
    int kept = k_->kept_axes();
    // A kernel's own reduction (not a row kernel's pass, which hoists its own): Gather indices
    // fixed along the reduced axes (an embedding bag's row sum) are computed before their loops.
    bool own = passes_.empty();
    if (own) {
      hoisted_ = gather_indices_fixed_along(kept, k_->ndim());
      for (int a = kept; a < k_->ndim() && !hoisted_.empty(); ++a) point_[a] = i64(0);
      for (size_t i = 0; i < hoisted_.size(); ++i)
        if (hoisted_[i]) vals_[i] = emit_value(static_cast<int>(i));
    }
    std::function<void(int)> nest = [&](int axis) {
      if (axis == k_->ndim()) {
        for (int i = 0; i < red.value; ++i)
          if (hoisted_.empty() || !hoisted_[i]) vals_[i] = emit_value(i);
        if (!carried_.empty()) keep_carried();
        reduce_step(red.op, in, vals_[rv.a], s, nullptr, false);
        bump(s.pos);
        return;
      }
      loop(i64(0), extents_[axis], axis == k_->ndim() - 1, [&](llvm::Value* r) {
        point_[axis] = r;
        nest(axis + 1);
      });
    };
    nest(kept);
    if (own) hoisted_.clear();
    loop_width_ = 0;
    for (int a = kept; a < k_->ndim(); ++a) point_[a] = i64(0);  // the epilogue's view
    vals_[red.value] = reduce_result(s, nullptr, false);
  }

  // Column-style reductions (the reduced axes are strided, the innermost kept axis is
  // contiguous): a row is processed in tiles of kTile kept points whose accumulators live in
  // small arrays, and the loop over the tile is innermost. It is then an element-wise update
  // the vectoriser widens, instead of a strided gather per point. Max/min use the oracle's
  // exact step here (no reduction recurrence to vectorise).
  static constexpr int64_t kTile = 256;

  void emit_tiled_row(llvm::Value* j0, llvm::Value* n) {
    const Reduction& red = *k_->reduce;
    const Value& rv = k_->body[red.value];
    Dtype in = k_->body[rv.a].dtype;
    int kept = k_->kept_axes();
    AccState s = reduction_state(kTile);
    vals_.assign(k_->body.size(), nullptr);
    llvm::Value* ntiles = b_.CreateSDiv(b_.CreateAdd(n, i64(kTile - 1)), i64(kTile));
    loop(i64(0), ntiles, false, [&](llvm::Value* ti) {
      llvm::Value* ts = b_.CreateAdd(j0, b_.CreateMul(ti, i64(kTile)));
      llvm::Value* tn = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, i64(kTile),
                                                 b_.CreateSub(b_.CreateAdd(j0, n), ts));
      loop(i64(0), tn, true, [&](llvm::Value* t) { init_state(s, t); });
      b_.CreateStore(i64(0), s.pos);
      std::function<void(int)> nest = [&](int axis) {
        if (axis == k_->ndim()) {
          loop(i64(0), tn, true, [&](llvm::Value* t) {
            point_[kept - 1] = b_.CreateAdd(ts, t);
            for (int i = 0; i < red.value; ++i) vals_[i] = emit_value(i);
            reduce_step(red.op, in, vals_[rv.a], s, t, true);
          });
          bump(s.pos);
          return;
        }
        loop(i64(0), extents_[axis], false, [&](llvm::Value* r) {
          point_[axis] = r;
          nest(axis + 1);
        });
      };
      nest(kept);
      for (int a = kept; a < k_->ndim(); ++a) point_[a] = i64(0);
      loop(i64(0), tn, false, [&](llvm::Value* t) {
        point_[kept - 1] = b_.CreateAdd(ts, t);
        vals_[red.value] = reduce_result(s, t, true);  // prologue Constants stay in vals_
        for (int i = red.value + 1; i < static_cast<int>(k_->body.size()); ++i)
          vals_[i] = emit_value(i);
        emit_stores();
      });
    });
  }

  // True when the tiled walk pays: some prologue load is contiguous along the innermost kept
  // axis and none is contiguous along the innermost reduced axis. Constant strides only.
  // A gathered row read along the reduced axis (an embedding bag's row sum) is such a load.
  bool column_reduction() const {
    if (!k_->reduce || k_->kept_axes() == 0) return false;
    int kin = k_->kept_axes() - 1, rin = k_->ndim() - 1;
    bool kept_unit = false;
    for (int i = 0; i < k_->reduce->value; ++i) {
      const Value& v = k_->body[i];
      if (v.kind != ValueKind::Load && v.kind != ValueKind::Gather) continue;
      const IndexMap& m = k_->buffers[v.buffer].map;
      if (m.strides[rin] == Dim::constant(1) || m.strides[rin].is_runtime()) return false;
      kept_unit = kept_unit || m.strides[kin] == Dim::constant(1);
    }
    return kept_unit;
  }

  // Accumulator storage for `lanes` kept points (arrays when tiled).
  AccState reduction_state(int64_t lanes) {
    const Reduction& red = *k_->reduce;
    Dtype in = k_->body[k_->body[red.value].a].dtype;
    bool fsum = in.is_float() && (red.op == ReduceOp::Sum || red.op == ReduceOp::Prod);
    AccState s;
    s.t = fsum ? b_.getDoubleTy() : reg_type(in);
    IRBuilder<> eb(entry_, entry_->begin());
    s.acc = eb.CreateAlloca(s.t, i64(lanes));
    s.best_pos = eb.CreateAlloca(b_.getInt64Ty(), i64(lanes));
    s.nan_seen = eb.CreateAlloca(b_.getInt1Ty(), i64(lanes));
    s.pos = eb.CreateAlloca(b_.getInt64Ty());
    return s;
  }

  llvm::Value* lane(Type* t, llvm::Value* base, llvm::Value* index) {
    return index ? b_.CreateInBoundsGEP(t, base, index) : base;
  }

  void init_state(const AccState& s, llvm::Value* t) {
    const Reduction& red = *k_->reduce;
    Dtype in = k_->body[k_->body[red.value].a].dtype;
    b_.CreateStore(reduce_init(red.op, in, s.t), lane(s.t, s.acc, t));
    b_.CreateStore(i64(0), lane(b_.getInt64Ty(), s.best_pos, t));
    b_.CreateStore(b_.getFalse(), lane(b_.getInt1Ty(), s.nan_seen, t));
    if (!t) b_.CreateStore(i64(0), s.pos);
  }

  void bump(llvm::Value* counter) {
    b_.CreateStore(b_.CreateNSWAdd(b_.CreateLoad(b_.getInt64Ty(), counter), i64(1)), counter);
  }

  // The Reduce value of one kept point from its final state.
  llvm::Value* reduce_result(const AccState& s, llvm::Value* t, bool exact_minmax) {
    const Reduction& red = *k_->reduce;
    const Value& rv = k_->body[red.value];
    Dtype in = k_->body[rv.a].dtype;
    ReduceOp op = red.op;
    bool fsum = in.is_float() && (op == ReduceOp::Sum || op == ReduceOp::Prod);
    llvm::Value* result = b_.CreateLoad(s.t, lane(s.t, s.acc, t));
    if (op == ReduceOp::Argmax) {
      result = b_.CreateLoad(b_.getInt64Ty(), lane(b_.getInt64Ty(), s.best_pos, t));
      in = int64;
    } else if (fsum) {
      in = float64;  // the double accumulator, rounded once by the cast below
    } else if (op == ReduceOp::Max || op == ReduceOp::Min) {
      // An empty max/min is 0 in the oracle (ops reject it before it gets here).
      if (in.is_float() && !exact_minmax)
        result = b_.CreateSelect(b_.CreateLoad(b_.getInt1Ty(), s.nan_seen),
                                 llvm::ConstantFP::getNaN(s.t), result);
      llvm::Value* empty = b_.CreateICmpEQ(b_.CreateLoad(b_.getInt64Ty(), s.pos), i64(0));
      result = b_.CreateSelect(empty, llvm::Constant::getNullValue(s.t), result);
    }
    // A 16-bit float result stays a float32 value until stored (scalar_ops.h).
    return cast(result, in, rv.dtype.is_half() && in != rv.dtype ? float32 : rv.dtype);
  }

  llvm::Value* reduce_init(ReduceOp op, Dtype in, Type* t) {
    bool one = op == ReduceOp::Prod;
    if (t->isFloatingPointTy()) {
      if (op == ReduceOp::Max || op == ReduceOp::Argmax)
        return llvm::ConstantFP::getInfinity(t, true);
      if (op == ReduceOp::Min) return llvm::ConstantFP::getInfinity(t, false);
      return llvm::ConstantFP::get(t, one ? 1.0 : 0.0);
    }
    if (in.is_bool()) return b_.getInt1(one || op == ReduceOp::Min);
    // The type's smallest and largest values: 0 and all ones unsigned, else 100..0 and 011..1.
    int bits = static_cast<int>(in.size()) * 8;
    int64_t lo = in.is_unsigned() ? 0 : static_cast<int64_t>(uint64_t{1} << (bits - 1));
    int64_t hi = in.is_unsigned() ? -1 : static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
    if (op == ReduceOp::Max || op == ReduceOp::Argmax) return iconst(in, lo);
    if (op == ReduceOp::Min) return iconst(in, hi);
    return iconst(in, one ? 1 : 0);
  }

  // One reduction step for x. `exact_minmax` selects the oracle's compare for float max/min
  // (tiled walk); otherwise they use the vectorisable NaN-aside form.
  void reduce_step(ReduceOp op, Dtype in, llvm::Value* x, const AccState& s, llvm::Value* t,
                   bool exact_minmax) {
    Type* ty = s.t;
    llvm::Value* acc_ptr = lane(ty, s.acc, t);
    llvm::Value* acc = b_.CreateLoad(ty, acc_ptr);
    llvm::Value* next = nullptr;
    if (in.is_float() && (op == ReduceOp::Sum || op == ReduceOp::Prod)) {
      llvm::Value* xd = x->getType() != ty ? b_.CreateFPExt(x, ty) : x;
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc();
      next = op == ReduceOp::Sum ? b_.CreateFAdd(acc, xd) : b_.CreateFMul(acc, xd);
      llvm::cast<llvm::Instruction>(next)->setFastMathFlags(fmf);
    } else if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
      if (in.is_bool())  // wrap to bool after each step: sum is or, prod is and
        next = op == ReduceOp::Sum ? b_.CreateOr(acc, x) : b_.CreateAnd(acc, x);
      else
        next = op == ReduceOp::Sum ? b_.CreateAdd(acc, x) : b_.CreateMul(acc, x);
    } else if (in.is_float() && op != ReduceOp::Argmax && !exact_minmax) {
      // Vectorisable NaN-propagating max/min: NaNs are counted aside and replaced by the
      // identity, so the compare/select never sees one and may carry nnan/nsz, which is what
      // LLVM 15's vectoriser needs to treat it as a min/max reduction. nsz means a tie between
      // -0 and +0 may return either (they compare equal; the oracle returns the first).
      b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt1Ty(), s.nan_seen), b_.CreateFCmpUNO(x, x)),
                     s.nan_seen);
      llvm::Value* xs = b_.CreateSelect(b_.CreateFCmpUNO(x, x), reduce_init(op, in, ty), x);
      llvm::FastMathFlags fmf;
      fmf.setNoNaNs();
      fmf.setNoSignedZeros();
      llvm::Value* cmp =
          op == ReduceOp::Min ? b_.CreateFCmpOLT(xs, acc) : b_.CreateFCmpOGT(xs, acc);
      llvm::cast<llvm::Instruction>(cmp)->setFastMathFlags(fmf);
      next = b_.CreateSelect(cmp, xs, acc);
      llvm::cast<llvm::Instruction>(next)->setFastMathFlags(fmf);
    } else {
      llvm::Value* better = nullptr;
      if (in.is_float()) {
        llvm::Value* cmp =
            op == ReduceOp::Min ? b_.CreateFCmpOLT(x, acc) : b_.CreateFCmpOGT(x, acc);
        better = b_.CreateAnd(b_.CreateFCmpORD(acc, acc), b_.CreateOr(b_.CreateFCmpUNO(x, x), cmp));
      } else if (in.is_bool() || in.is_unsigned()) {
        better = op == ReduceOp::Min ? b_.CreateICmpULT(x, acc) : b_.CreateICmpUGT(x, acc);
      } else {
        better = op == ReduceOp::Min ? b_.CreateICmpSLT(x, acc) : b_.CreateICmpSGT(x, acc);
      }
      next = b_.CreateSelect(better, x, acc);
      if (op == ReduceOp::Argmax) {
        llvm::Value* bp = lane(b_.getInt64Ty(), s.best_pos, t);
        llvm::Value* p = b_.CreateLoad(b_.getInt64Ty(), s.pos);
        b_.CreateStore(b_.CreateSelect(better, p, b_.CreateLoad(b_.getInt64Ty(), bp)), bp);
      }
    }
    b_.CreateStore(next, acc_ptr);
  }

  const Kernel* k_;             // the kernel, or the pass of a row kernel being emitted
  std::vector<Kernel> passes_;  // a row kernel's passes as kernels (pass_kernel)
  std::vector<bool> hoisted_;   // values of the current pass computed once per row
  std::vector<bool> fixed_;     // values computed once per row before its loop (hoist_gather_rows)
  int row_kept_ = 0;            // a row kernel's kept axes
  int float_lanes_ = 0;         // float32 lanes of the target's widest vectors (0: unknown)
  int loop_width_ = 0;          // > 0: the vector width asked of the next innermost loop
  int cur_pass_ = -1;           // the pass being emitted
  int carry_pass_ = -2;         // the reduction pass whose values the map pass reads back
  std::vector<Carried> carried_;
  std::vector<int> streamed_;  // buffers whose element-wise stores may stream
  llvm::LLVMContext& ctx_;
  std::unique_ptr<llvm::Module> mod_;
  IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  llvm::Function* ipow_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  llvm::Value* begin_ = nullptr;
  llvm::Value* end_ = nullptr;
  std::vector<llvm::Value*> buf_ptrs_, params_, extents_, point_, vals_;
};

}  // namespace

std::unique_ptr<llvm::Module> generate_kernel(const Kernel& k, const std::string& symbol,
                                              const CodegenTarget& target,
                                              const CodegenOptions& options,
                                              llvm::LLVMContext& ctx) {
  return Codegen(k, symbol, target, options, ctx).run();
}

}  // namespace kiln::cpu
