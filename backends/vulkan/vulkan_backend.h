// The Vulkan backend: every physical device the loader reports as vulkan:N; Kernel IR compiled
// to GLSL compute shaders (glsl_codegen.h), SPIR-V through glslang, one compute pipeline per
// kernel; a queue per lane whose submissions are ordered by a timeline semaphore and reported
// to the executor through Events completed on the device's completion thread.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/backend.h"

namespace kiln {

std::shared_ptr<Backend> make_vulkan_backend();

// Warnings and errors VK_LAYER_KHRONOS_validation reported in this process (the layer is enabled
// by KILN_VULKAN_VALIDATION=1); tests fail when it grows.
int64_t vulkan_validation_messages();

}  // namespace kiln
