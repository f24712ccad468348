// The compute pipeline of shaders/fill.comp: one storage buffer bound with push descriptors
// (VK_KHR_push_descriptor: no descriptor pools or sets to allocate per dispatch) and
// FillPushConstants.
#pragma once

#include <volk.h>

#include <span>

#include "core/backend.hpp"
#include "vulkan/compute_program.hpp"
#include "vulkan/vk_context.hpp"

namespace ferry::vulkan {

class FillPipeline {
 public:
  FillPipeline() = default;
  FillPipeline(const FillPipeline&) = delete;
  FillPipeline& operator=(const FillPipeline&) = delete;
  ~FillPipeline() { destroy(); }

  Status create(const DeviceContext& context);
  void destroy() noexcept;

  // Records the dispatches that fill [offset, offset + size) of `buffer` (see fill_plan.hpp).
  // The pipeline must be bound on `command_buffer` already (bind()).
  Status record(VkCommandBuffer command_buffer, VkBuffer buffer, std::uint64_t offset,
                std::uint64_t size, std::uint32_t pattern) const;
  void bind(VkCommandBuffer command_buffer) const;

 private:
  const DeviceContext* context_ = nullptr;
  ComputeProgram program_;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace ferry::vulkan
