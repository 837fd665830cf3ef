#include "backends/vulkan/glsl_compiler.h"

#include <glslang/Include/glslang_c_interface.h>
#include <glslang/Public/resource_limits_c.h>

#include <memory>
#include <mutex>
#include <sstream>

#include "graph/error.h"
#include "graph/log.h"

namespace kiln::vulkan {

namespace {

std::mutex& compiler_mutex() {
  static std::mutex mu;
  return mu;
}

void ensure_initialised() {
  // Never finalised: the process keeps one compiler (creating one costs ~70 ms).
  static const bool ok = glslang_initialize_process() != 0;
  if (!ok) throw_error("vulkan: glslang failed to initialise");
}

std::string numbered(const std::string& src) {
  std::istringstream in(src);
  std::ostringstream out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) out << n << ": " << line << "\n";
  return out.str();
}

struct ShaderDeleter {
  void operator()(glslang_shader_t* s) const { glslang_shader_delete(s); }
};
struct ProgramDeleter {
  void operator()(glslang_program_t* p) const { glslang_program_delete(p); }
};

// glslang writes nothing itself: what it says about a shader that compiles (warnings) is in
// its info logs, which the debug log shows.
void log_success(const std::string& name, glslang_shader_t* shader, glslang_program_t* program) {
  std::string said;
  for (const char* part :
       {glslang_shader_get_info_log(shader), glslang_program_get_info_log(program),
        glslang_program_SPIRV_get_messages(program)})
    if (part && *part) said += part;
  size_t end = said.find_last_not_of(" \t\r\n");
  said = end == std::string::npos ? "" : said.substr(0, end + 1);
  logging::debug("vulkan: compiled kernel ", name, " with glslang",
                 said.empty() ? std::string(", nothing in its logs") : ", its logs:\n" + said);
}

}  // namespace

std::vector<uint32_t> compile_glsl(const std::string& glsl, const std::string& name) {
  std::lock_guard<std::mutex> lock(compiler_mutex());
  ensure_initialised();
  glslang_input_t input{};
  input.language = GLSLANG_SOURCE_GLSL;
  input.stage = GLSLANG_STAGE_COMPUTE;
  input.client = GLSLANG_CLIENT_VULKAN;
  input.client_version = GLSLANG_TARGET_VULKAN_1_1;
  input.target_language = GLSLANG_TARGET_SPV;
  input.target_language_version = GLSLANG_TARGET_SPV_1_3;
  input.code = glsl.c_str();
  input.default_version = 450;
  input.default_profile = GLSLANG_NO_PROFILE;
  input.messages =
      static_cast<glslang_messages_t>(GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT);
  input.resource = glslang_default_resource();
  std::unique_ptr<glslang_shader_t, ShaderDeleter> shader(glslang_shader_create(&input));
  auto fail = [&](const char* stage, const char* log) {
    throw_error("vulkan: kernel ", name, " failed to compile (", stage, "): ", log,
                "\nGLSL source:\n", numbered(glsl));
  };
  if (!glslang_shader_preprocess(shader.get(), &input))
    fail("glslang preprocess", glslang_shader_get_info_log(shader.get()));
  if (!glslang_shader_parse(shader.get(), &input))
    fail("glslang parse", glslang_shader_get_info_log(shader.get()));
  std::unique_ptr<glslang_program_t, ProgramDeleter> program(glslang_program_create());
  glslang_program_add_shader(program.get(), shader.get());
  if (!glslang_program_link(program.get(), input.messages))
    fail("glslang link", glslang_program_get_info_log(program.get()));
  glslang_program_SPIRV_generate(program.get(), GLSLANG_STAGE_COMPUTE);
  size_t words = glslang_program_SPIRV_get_size(program.get());
  std::vector<uint32_t> spirv(words);
  glslang_program_SPIRV_get(program.get(), spirv.data());
  if (words == 0) fail("SPIR-V generation", "no code generated");
  if (logging::enabled(logging::Level::debug)) log_success(name, shader.get(), program.get());
  return spirv;
}

}  // namespace kiln::vulkan
