// A timeline VkSemaphore.
#pragma once

#include <volk.h>

#include <cstdint>
#include <memory>

#include "core/backend.hpp"
#include "vulkan/vk_context.hpp"

namespace ferry::vulkan {

// Creates a VK_SEMAPHORE_TYPE_TIMELINE semaphore; the caller destroys it.
Result<VkSemaphore> create_timeline_semaphore(const DeviceContext& context,
                                              std::uint64_t initial_value);

class VulkanTimeline final : public backend::BackendTimeline {
 public:
  static Result<std::unique_ptr<VulkanTimeline>> create(const DeviceContext& context,
                                                        std::uint64_t initial_value);

  VulkanTimeline(const VulkanTimeline&) = delete;
  VulkanTimeline& operator=(const VulkanTimeline&) = delete;
  ~VulkanTimeline() override;

  Result<std::uint64_t> value() override;
  Status host_signal(std::uint64_t value) override;
  Status host_wait(std::uint64_t value, Timeout timeout) override;

  VkSemaphore handle() const noexcept { return semaphore_; }

 private:
  VulkanTimeline(const DeviceContext& context, VkSemaphore semaphore)
      : context_(context), semaphore_(semaphore) {}

  const DeviceContext& context_;
  VkSemaphore semaphore_ = VK_NULL_HANDLE;
};

}  // namespace ferry::vulkan
