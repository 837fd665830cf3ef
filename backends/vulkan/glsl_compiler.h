// GLSL -> SPIR-V in-process through glslang's C API (Debian's shaderc is broken, TOOLCHAIN.md).
// glslang's process-wide state is initialised once and kept for the life of the process; compiles
// are serialised (each is ~1 ms, and glslang's symbol-table set-up is not safe to race).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::vulkan {

// Raises kiln::Error with glslang's log (and the numbered source) when the shader does not
// compile; `name` names the kernel in the message. What glslang says about a shader that
// compiles (warnings) goes to the debug log (KILN_LOG=debug).
std::vector<uint32_t> compile_glsl(const std::string& glsl, const std::string& name);

}  // namespace kiln::vulkan
