// Golden source listings of the C-family code generators (backends/source/ with the OpenCL C and
// GLSL dialects): every kernel of tests/golden/codegen/kernels.txt, a corpus of the Kernel IR the
// opencl and vulkan differential tests compile (captured with KILN_CODEGEN_CORPUS, see
// backends/source/emitter.h), is generated under a fixed set of device capabilities, and one
// hash per kernel and backend is compared with tests/golden/codegen/{opencl,glsl}.txt. No device
// is needed. A change to generated source fails here; when it is intended, look at the listings
//   KILN_CODEGEN_DUMP_DIR=/tmp/listings build/tests/test_codegen_golden
// (one file per kernel and backend, before and after: diff -r), then regenerate the hashes with
//   KILN_UPDATE_GOLDEN=1 build/tests/test_codegen_golden
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "backends/kernel_text.h"
#include "graph/error.h"
#include "graph/text_reader.h"
#ifdef KILN_GOLDEN_OPENCL
#include "backends/opencl/codegen.h"
#endif
#ifdef KILN_GOLDEN_VULKAN
#include "backends/vulkan/glsl_codegen.h"
#endif

namespace kiln {
namespace {

std::string golden_dir() { return std::string(KILN_SOURCE_DIR) + "/tests/golden/codegen/"; }

std::vector<Kernel> corpus() {
  std::ifstream f(golden_dir() + "kernels.txt");
  std::stringstream text;
  text << f.rdbuf();
  std::string listing = text.str();  // the reader keeps views into it
  TextReader r(listing, "tests/golden/codegen/kernels.txt");
  std::vector<Kernel> ks;
  while (!r.done()) ks.push_back(read_kernel(r));
  return ks;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A generator under one set of capabilities: the source, or the error it raises.
struct Variant {
  std::string name;
  std::function<std::string(const Kernel&)> generate;
};

std::string render(const Kernel& k, const std::vector<Variant>& variants) {
  std::string all;
  for (const Variant& v : variants) {
    all += "//// variant " + v.name + "\n";
    try {
      all += v.generate(k);
    } catch (const Error& e) {
      all += std::string("error: ") + e.what() + "\n";
    }
  }
  return all;
}

// Compares (or, with KILN_UPDATE_GOLDEN, rewrites) one line "index name hash" per kernel.
void check(const std::string& backend, const std::vector<Variant>& variants) {
  std::vector<Kernel> ks = corpus();
  ASSERT_FALSE(ks.empty());
  const char* dump = std::getenv("KILN_CODEGEN_DUMP_DIR");
  if (dump) std::filesystem::create_directories(std::string(dump) + "/" + backend);
  std::ostringstream got;
  for (size_t i = 0; i < ks.size(); ++i) {
    std::string text = render(ks[i], variants);
    char line[160];
    std::snprintf(line, sizeof line, "%04zu %s %016llx\n", i, ks[i].name.c_str(),
                  static_cast<unsigned long long>(fnv1a(text)));
    got << line;
    if (dump) {
      char file[32];
      std::snprintf(file, sizeof file, "/%04zu.txt", i);
      std::ofstream(std::string(dump) + "/" + backend + file) << ks[i].str() << text;
    }
  }
  std::string path = golden_dir() + backend + ".txt";
  if (std::getenv("KILN_UPDATE_GOLDEN")) {
    std::ofstream(path) << got.str();
    return;
  }
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "missing " << path << " (KILN_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << f.rdbuf();
  std::istringstream g(got.str()), w(want.str());
  std::string gl, wl;
  int shown = 0;
  while (std::getline(w, wl)) {
    std::getline(g, gl);
    if (gl != wl && shown++ < 20)
      ADD_FAILURE() << backend << " source changed for kernel " << wl << " (now: " << gl
                    << "); see this file's header to review and update";
  }
  EXPECT_EQ(got.str(), want.str());
}

#ifdef KILN_GOLDEN_OPENCL
TEST(CodegenGolden, OpenclListingsMatch) {
  auto cl = [](bool cpu, bool fp64, bool int64) {
    return [=](const Kernel& k) {
      opencl::DeviceCaps c;
      c.cpu = cpu, c.fp64 = fp64, c.int64 = int64;
      opencl::Generated g = opencl::generate(k, c, "golden");
      std::ostringstream os;
      os << "// params " << g.num_params << " scalars " << g.scalars.size() << " reduction "
         << g.reduction << " split " << g.split << " acc " << g.acc_size << "\n"
         << g.source;
      return os.str();
    };
  };
  check("opencl", {{"cpu", cl(true, true, true)},
                   {"gpu", cl(false, true, true)},
                   {"cpu-nofp64", cl(true, false, true)},
                   {"gpu-nofp64", cl(false, false, true)},
                   {"embedded", cl(false, false, false)}});
}
#endif

#ifdef KILN_GOLDEN_VULKAN
TEST(CodegenGolden, GlslListingsMatch) {
  // cpu: the forms a CPU device takes (texel-buffer loads, subgroup runs of 8 lanes).
  auto vk = [](bool b64, bool wide, bool sub, uint32_t push, bool by_address, bool cpu = false) {
    return [=](const Kernel& k) {
      vulkan::ShaderFeatures f{b64, b64, "golden", by_address};
      f.wide_access = wide, f.subgroups = sub, f.push_bytes = push;
      f.texel_loads = cpu, f.subgroup_runs = cpu, f.subgroup_size = sub ? 8 : 0;
      vulkan::Shader s = vulkan::generate_glsl(k, f);
      std::ostringstream os;
      os << "// local " << s.local_size << " per_group " << s.per_group << " points "
         << s.points_per_invocation << " params " << s.nparams << " slots " << s.float_slots.size()
         << " address " << s.address_slot << " push " << s.push_words << " bindings " << s.bindings
         << " texel " << std::count(s.texel.begin(), s.texel.end(), true) << " max_groups "
         << s.max_groups << "\n"
         << s.glsl;
      return os.str();
    };
  };
  check("glsl", {{"lavapipe", vk(true, true, true, 128, false, true)},
                 {"lavapipe-buffer", vk(true, true, true, 0, false, true)},
                 {"wide", vk(true, true, true, 128, false)},
                 {"narrow", vk(true, false, true, 128, false)},
                 {"tree", vk(true, true, false, 128, false)},
                 {"params-buffer", vk(true, true, true, 0, false)},
                 {"by-address", vk(true, true, true, 128, true)},
                 {"by-address-buffer", vk(true, true, true, 0, true)},
                 {"no64", vk(false, false, true, 128, false)},
                 {"no64-tree-buffer", vk(false, false, false, 0, false)}});
}
#endif

}  // namespace
}  // namespace kiln
