#include "backends/row_passes.h"

#include "backends/kernel_ir.h"

namespace kiln {

std::shared_ptr<const CompiledKernel> compile_passes(const Kernel& k,
                                                     const CompileOne& compile_one) {
  auto pk = std::make_shared<PassKernels>();
  for (size_t i = 0; i < k.passes.size(); ++i) pk->passes.push_back(compile_one(k.pass_kernel(i)));
  return pk;
}

const PassKernels* as_passes(const CompiledKernel& k) {
  return dynamic_cast<const PassKernels*>(&k);
}

EventPtr enqueue_passes(const PassKernels& k, const KernelArgs& args, const EnqueueOne& enqueue) {
  EventPtr last;
  for (const auto& p : k.passes) last = enqueue(*p, args);
  return last;
}

}  // namespace kiln
