// The compute pipeline of shaders/normalize.comp: two storage buffers (the uint8 source window and
// the destination window) bound with push descriptors, and NormalizePushConstants.
//
// The shader needs shaderInt64, storageBuffer8BitAccess and storageBuffer16BitAccess. On a device
// without them no pipeline is made, and recording a normalize fails with ErrorCode::unavailable
// naming what is missing; everything else works as before.
#pragma once

#include <volk.h>

#include "core/backend.hpp"
#include "vulkan/vk_context.hpp"

namespace ferry::vulkan {

class NormalizePipeline {
 public:
  NormalizePipeline() = default;
  NormalizePipeline(const NormalizePipeline&) = delete;
  NormalizePipeline& operator=(const NormalizePipeline&) = delete;
  ~NormalizePipeline() { destroy(); }

  // Makes the pipeline when context.normalize_support says the device can run it.
  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // Ok, or ErrorCode::unavailable saying which device features are missing.
  Status check_supported() const;

  // Records the dispatches of one normalize (see normalize_plan.hpp), with a barrier between two
  // dispatches whose windows overlap. The pipeline must be bound on `command_buffer` already
  // (bind()), and check_supported() ok.
  Status record(VkCommandBuffer command_buffer, VkBuffer src, VkBuffer dst,
                const backend::NormalizeCommand& command) const;
  void bind(VkCommandBuffer command_buffer) const;

 private:
  const DeviceContext* context_ = nullptr;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace ferry::vulkan
