#include "backends/opencl/codegen.h"

#include <string>
#include <utility>

#include "backends/opencl/dialect_opencl.h"
#include "backends/source/emitter.h"
#include "backends/source/workgroup_layout.h"
#include "graph/error.h"

namespace kiln::opencl {

namespace {

bool uses(const Kernel& k, bool (*pred)(Dtype)) {
  for (const KernelBuffer& b : k.buffers)
    if (pred(b.dtype)) return true;
  for (const Value& v : k.body)
    if (pred(v.dtype)) return true;
  return false;
}

}  // namespace

Generated generate(const Kernel& k, const DeviceCaps& caps, const std::string& device_name) {
  if (!caps.fp64 && uses(k, [](Dtype d) { return d == float64; }))
    throw_error("opencl: kernel ", k.name, " needs float64, but device ", device_name,
                " lacks the cl_khr_fp64 extension (valid: float32/float16/bfloat16 on this "
                "device, or a device whose `kiln devices` line says fp64 yes)");
  if (!caps.int64 && (uses(k, [](Dtype d) { return d == int64 || d == uint64; }) || k.reduce))
    throw_error("opencl: kernel ", k.name, " needs 64-bit integers, but device ", device_name,
                " lacks them (OpenCL embedded profile without cles_khr_int64)");
  source::record_for_corpus(k);
  OpenclDialect d(caps);
  source::Program p = source::workgroup_program(k, d, {caps.cpu, caps.fp64});
  Generated g;
  g.source = std::move(p.source);
  g.num_params = p.num_params;
  for (int i : p.scalar_values) g.scalars.push_back({k.body[i].param, k.body[i].dtype});
  g.reduction = p.reduction;
  g.split = p.split;
  g.acc_size = p.acc_size;
  g.map_points = p.map_points;
  return g;
}

}  // namespace kiln::opencl
