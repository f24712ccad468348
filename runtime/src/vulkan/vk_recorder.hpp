// Records one submission's commands into a command buffer, with synchronization2 barriers:
// - first, a global memory barrier ordering everything submitted earlier on the same VkQueue
//   (cross-queue order comes from the submission's semaphore waits);
// - between commands, a barrier only where there is a hazard: a command reads or writes a buffer
//   written earlier in the submission, or writes one read earlier (buffer granularity);
// - last, a barrier making the submission's writes visible to the host (HOST_READ), so that a
//   download into host memory can be read once the submission's signal is seen.
#pragma once

#include <volk.h>

#include <span>

#include "core/backend.hpp"
#include "vulkan/fill_pipeline.hpp"
#include "vulkan/normalize_pipeline.hpp"
#include "vulkan/vk_context.hpp"

namespace ferry::vulkan {

// The device's compute pipelines, for the commands that run a shader.
struct Pipelines {
  const FillPipeline& fill;
  const NormalizePipeline& normalize;
};

// Fails (recording nothing) when a command cannot run on this device, e.g. a normalize where the
// device lacks the shader's features (ErrorCode::unavailable).
Status record_commands(const DeviceContext& context, const Pipelines& pipelines,
                       VkCommandBuffer command_buffer,
                       std::span<const backend::Command> commands);

}  // namespace ferry::vulkan
