#include "backends/opencl/device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "graph/at_exit.h"
#include "graph/env.h"
#include "graph/error.h"
#include "graph/log.h"

namespace kiln::opencl {

namespace {

bool has_extension(const std::string& exts, const char* name) {
  std::istringstream in(exts);
  std::string e;
  while (in >> e)
    if (e == name) return true;
  return false;
}

// "OpenCL 1.2 pocl ..." -> 1.2 as 12; 0 when unreadable.
int parse_version(const std::string& v) {
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "OpenCL %d.%d", &major, &minor) != 2) return 0;
  return major * 10 + minor;
}

std::string gib(cl_ulong bytes) {
  std::ostringstream os;
  os.precision(3);
  os << static_cast<double>(bytes) / (1 << 30) << " GiB";
  return os.str();
}

// Builds a tiny kernel: a device whose compiler cannot build it is listed as unusable, with
// the compiler's log.
void probe(ClDevice& d) {
  const char* src = "__kernel void kiln_probe(__global float* x) { x[get_global_id(0)] += 1.0f; }";
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(d.context, 1, &src, nullptr, &err);
  cl_check(err, "clCreateProgramWithSource (probe)");
  err = clBuildProgram(p, 1, &d.id, d.build_options().c_str(), nullptr, nullptr);
  std::string log = program_build_log(d.id, p);
  clReleaseProgram(p);
  if (err != CL_SUCCESS)
    throw_error("opencl: the probe kernel does not build (", cl_error_name(err), "); build log:\n",
                log);
}

void describe(ClDevice& d) {
  d.name = device_string(d.id, CL_DEVICE_NAME);
  d.vendor = device_string(d.id, CL_DEVICE_VENDOR);
  d.driver = device_string(d.id, CL_DRIVER_VERSION);
  d.version = device_string(d.id, CL_DEVICE_VERSION);
  d.platform_name = platform_string(d.platform, CL_PLATFORM_NAME);
  d.platform_version = platform_string(d.platform, CL_PLATFORM_VERSION);
  d.compute_units = device_value<cl_uint>(d.id, CL_DEVICE_MAX_COMPUTE_UNITS);
  d.memory = device_value<cl_ulong>(d.id, CL_DEVICE_GLOBAL_MEM_SIZE);
  d.max_alloc = device_value<cl_ulong>(d.id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  d.cache = device_value<cl_ulong>(d.id, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE);
  d.max_work_group = device_value<size_t>(d.id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  std::string exts = device_string(d.id, CL_DEVICE_EXTENSIONS);
  const char* hide = std::getenv("KILN_OPENCL_HIDE_FP64");
  d.fp64 = has_extension(exts, "cl_khr_fp64") && !(hide && std::strcmp(hide, "1") == 0);
  std::string profile = device_string(d.id, CL_DEVICE_PROFILE);
  d.int64 = profile == "FULL_PROFILE" || has_extension(exts, "cles_khr_int64");
  auto fp = device_value<cl_device_fp_config>(d.id, CL_DEVICE_SINGLE_FP_CONFIG);
  d.correct_divide_sqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
  const char* gpu = std::getenv("KILN_OPENCL_GPU_LAYOUT");  // tests the GPU layout on PoCL
  d.cpu = (device_value<cl_device_type>(d.id, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_CPU) != 0 &&
          !(gpu && std::strcmp(gpu, "1") == 0);
}

void open(ClDevice& d) {
  if (parse_version(d.version) < 12) {
    d.reason = "device " + d.name + " is " + d.version + "; Kiln needs OpenCL 1.2 or newer";
    return;
  }
  if (!device_value<cl_bool>(d.id, CL_DEVICE_COMPILER_AVAILABLE)) {
    d.reason = "device " + d.name + " has no OpenCL C compiler";
    return;
  }
  cl_int err = CL_SUCCESS;
  d.context = clCreateContext(nullptr, 1, &d.id, nullptr, nullptr, &err);
  cl_check(err, "clCreateContext");
  d.transfer = clCreateCommandQueue(d.context, d.id, 0, &err);
  cl_check(err, "clCreateCommandQueue");
  probe(d);
  d.available = true;
  arm_exit_finish();  // the driver is loaded and open: finish its queues before its finalisers
}

}  // namespace

// Devices live as long as the process: releasing a context from a static destructor can run
// after the driver has shut down, so the context and transfer queue are left to process exit.
ClDevice::~ClDevice() = default;

std::string ClDevice::label() const {
  return "opencl:" + std::to_string(index) + " (" + name + ")";
}

std::string ClDevice::description() const {
  std::ostringstream os;
  // "OpenCL 3.0 PoCL HSTR: ..." -> "OpenCL 3.0": the rest is driver detail.
  std::string v = version.substr(0, version.find(' ', version.find(' ') + 1));
  os << name << " (" << platform_name << ", " << vendor << ", " << v << ", driver " << driver
     << "), " << compute_units << " compute units, " << gib(memory) << " (max buffer "
     << gib(max_alloc) << "), fp64 " << (fp64 ? "yes" : "no") << ", int64 "
     << (int64 ? "yes" : "no");
  return os.str();
}

std::string ClDevice::build_options() const {
  std::string o = "-cl-std=CL1.2";
  if (correct_divide_sqrt) o += " -cl-fp32-correctly-rounded-divide-sqrt";
  // PoCL's clang writes "N warnings generated." to the process's stderr whenever a build has
  // warnings, and PoCL 3.1 refuses every option that would drop only that line
  // (-fno-caret-diagnostics, also through POCL_EXTRA_BUILD_FLAGS). -w keeps warnings out of
  // stderr and the build log alike; errors still reach the log, and so kiln::Error. Under
  // KILN_LOG=debug warnings are wanted: built without -w, the debug log shows them (and clang
  // its summary line). The options are part of identity(), so such builds get their own cache
  // entries and a debug run compiles, and so logs, each kernel once.
  if (!logging::enabled(logging::Level::debug)) o += " -w";
  return o;
}

std::string ClDevice::identity() const {
  return platform_name + "|" + platform_version + "|" + name + "|" + vendor + "|" + driver + "|" +
         version + "|" + build_options() + (fp64 ? "|fp64" : "|nofp64");
}

std::vector<std::unique_ptr<ClDevice>> discover() {
  std::vector<std::unique_ptr<ClDevice>> out;
  auto unusable = [&](const std::string& why) {
    auto d = std::make_unique<ClDevice>();
    d->reason = why;
    out.push_back(std::move(d));
    return std::move(out);
  };
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &np);
  if (err != CL_SUCCESS || np == 0)
    return unusable("no OpenCL platform found (" + cl_error_name(err) +
                    "): install an ICD, e.g. Debian's pocl-opencl-icd or a GPU vendor's driver");
  std::vector<cl_platform_id> platforms(np);
  cl_check(clGetPlatformIDs(np, platforms.data(), nullptr), "clGetPlatformIDs");
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> ids(nd);
    cl_check(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids.data(), nullptr), "clGetDeviceIDs");
    for (cl_device_id id : ids) {
      auto d = std::make_unique<ClDevice>();
      d->index = static_cast<int>(out.size());
      d->platform = p;
      d->id = id;
      try {
        describe(*d);
        open(*d);
      } catch (const std::exception& e) {
        d->available = false;
        d->reason = d->name + ": " + e.what();
      }
      out.push_back(std::move(d));
    }
  }
  if (out.empty()) return unusable("the OpenCL platforms report no devices");
  return out;
}

size_t local_size(const ClDevice& dev, cl_kernel kernel) {
  size_t wg = 1;
  cl_check(
      clGetKernelWorkGroupInfo(kernel, dev.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, nullptr),
      "clGetKernelWorkGroupInfo");
  // KILN_OPENCL_LOCAL_SIZE replaces the cap of 256 (measurements on a device).
  static const size_t cap = [] {
    uint64_t n = env_count("KILN_OPENCL_LOCAL_SIZE", "the largest work-group size").value_or(256);
    if (n == 0)
      throw_error(
          "KILN_OPENCL_LOCAL_SIZE is 0: the largest work-group size is at least 1 "
          "(unset: 256)");
    return static_cast<size_t>(n);
  }();
  size_t limit = std::max<size_t>(1, std::min({wg, dev.max_work_group, cap})), p = 1;
  while (p * 2 <= limit) p *= 2;
  return p;
}

}  // namespace kiln::opencl
