// A timeline VkSemaphore.
#pragma once

#include <volk.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/backend.hpp"
#include "vulkan/context.hpp"

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
  // The largest value the host has seen reached (by value() or host_wait()), without asking the
  // driver: a lower bound of the semaphore's value.
  std::uint64_t known_reached() const noexcept {
    return known_reached_.load(std::memory_order_relaxed);
  }
  // Called after a submission that signals `value` was accepted by vkQueueSubmit2.
  void note_device_signal(std::uint64_t value) noexcept {
    std::uint64_t seen = last_device_signal_.load(std::memory_order_relaxed);
    while (seen < value &&
           !last_device_signal_.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
    }
  }

 private:
  VulkanTimeline(const DeviceContext& context, VkSemaphore semaphore)
      : context_(context), semaphore_(semaphore) {}

  const DeviceContext& context_;
  VkSemaphore semaphore_ = VK_NULL_HANDLE;
  std::atomic<std::uint64_t> last_device_signal_{0};
  std::atomic<std::uint64_t> known_reached_{0};
  void note_reached(std::uint64_t value) noexcept {
    std::uint64_t seen = known_reached_.load(std::memory_order_relaxed);
    while (seen < value &&
           !known_reached_.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
    }
  }
};

}  // namespace ferry::vulkan
