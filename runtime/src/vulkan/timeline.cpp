#include "vulkan/timeline.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <string>

#include "vulkan/status.hpp"

namespace ferry::vulkan {

Result<VkSemaphore> create_timeline_semaphore(const DeviceContext& context,
                                              std::uint64_t initial_value) {
  VkSemaphoreTypeCreateInfo type_info{};
  type_info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
  type_info.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type_info.initialValue = initial_value;
  VkSemaphoreCreateInfo create_info{};
  create_info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
  create_info.pNext = &type_info;
  VkSemaphore semaphore = VK_NULL_HANDLE;
  FERRY_VK_RETURN_IF_ERROR(
      context.vk.vkCreateSemaphore(context.device, &create_info, nullptr, &semaphore));
  return semaphore;
}

Result<std::unique_ptr<VulkanTimeline>> VulkanTimeline::create(const DeviceContext& context,
                                                               std::uint64_t initial_value) {
  FERRY_ASSIGN_OR_RETURN(VkSemaphore semaphore, create_timeline_semaphore(context, initial_value));
  return std::unique_ptr<VulkanTimeline>(new VulkanTimeline(context, semaphore));
}

VulkanTimeline::~VulkanTimeline() {
  // Core destroys a timeline once the submissions using it have reached their queue's progress
  // value. That is another semaphore of the same batch, and a batch's signal operations are
  // unordered: the implementation may still be signalling this one (lavapipe was seen touching a
  // freed semaphore's mutex). Wait for our own last signal first; normally it is long reached.
  if (const std::uint64_t last = last_device_signal_.load(std::memory_order_relaxed); last > 0) {
    (void)host_wait(last, std::chrono::seconds(10));
  }
  context_.vk.vkDestroySemaphore(context_.device, semaphore_, nullptr);
}

Result<std::uint64_t> VulkanTimeline::value() {
  std::uint64_t value = 0;
  FERRY_VK_RETURN_IF_ERROR(
      context_.vk.vkGetSemaphoreCounterValue(context_.device, semaphore_, &value));
  note_reached(value);
  return value;
}

Status VulkanTimeline::host_signal(std::uint64_t value) {
  VkSemaphoreSignalInfo signal_info{};
  signal_info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO;
  signal_info.semaphore = semaphore_;
  signal_info.value = value;
  FERRY_VK_RETURN_IF_ERROR(context_.vk.vkSignalSemaphore(context_.device, &signal_info));
  note_reached(value);
  return Status();
}

Status VulkanTimeline::host_wait(std::uint64_t value, Timeout timeout) {
  // Poll the counter for the first 2 ms before blocking in the driver: a blocking
  // vkWaitSemaphores woke ~45 us after completion on the H100's driver, which cost 16 MiB copies
  // ~10% and made every small copy take ~50 us. Polling is a memory read there.
  constexpr Timeout kSpinFor = std::chrono::milliseconds(2);
  const auto start = std::chrono::steady_clock::now();
  const Timeout spin = std::min(timeout, kSpinFor);
  for (;;) {
    std::uint64_t reached = 0;
    FERRY_VK_RETURN_IF_ERROR(
        context_.vk.vkGetSemaphoreCounterValue(context_.device, semaphore_, &reached));
    if (reached >= value) {
      note_reached(reached);
      return Status();
    }
    if (std::chrono::steady_clock::now() - start >= spin) break;
    std::this_thread::yield();
  }
  if (timeout != kInfinite) {
    timeout -= std::chrono::duration_cast<Timeout>(std::chrono::steady_clock::now() - start);
    if (timeout < Timeout::zero()) timeout = Timeout::zero();
  }
  VkSemaphoreWaitInfo wait_info{};
  wait_info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  wait_info.semaphoreCount = 1;
  wait_info.pSemaphores = &semaphore_;
  wait_info.pValues = &value;
  // vkWaitSemaphores takes nanoseconds; UINT64_MAX waits forever.
  const std::uint64_t nanoseconds =
      timeout == kInfinite ? UINT64_MAX
                           : static_cast<std::uint64_t>(std::max<Timeout::rep>(timeout.count(), 0));
  const VkResult waited = context_.vk.vkWaitSemaphores(context_.device, &wait_info, nanoseconds);
  if (waited == VK_TIMEOUT) {
    return Status(ErrorCode::timeout, "timeline value " + std::to_string(value) +
                                          " not reached within " + std::to_string(timeout.count()) +
                                          " ns");
  }
  if (waited != VK_SUCCESS) return vk_status(waited, "vkWaitSemaphores");
  note_reached(value);
  return Status();
}

}  // namespace ferry::vulkan
