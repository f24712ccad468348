#include "vulkan/queue.hpp"

#include "vulkan/status.hpp"
#include "vulkan/timeline.hpp"

namespace ferry::vulkan {

Status LogicalQueue::create(const DeviceContext& context, const QueueAssignment& assignment) {
  context_ = &context;
  assignment_ = assignment;
  const VolkDeviceTable& vk = context.vk;
  vk.vkGetDeviceQueue(context.device, assignment.family, assignment.index, &queue_);

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  // Command buffers are re-recorded one by one (vkBeginCommandBuffer resets them implicitly).
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT |
                    VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool_info.queueFamilyIndex = assignment.family;
  FERRY_VK_RETURN_IF_ERROR(vk.vkCreateCommandPool(context.device, &pool_info, nullptr, &pool_));
  return Status();
}

void LogicalQueue::destroy() noexcept {
  if (context_ == nullptr) return;
  const VolkDeviceTable& vk = context_->vk;
  // Destroying the pool frees its command buffers.
  if (pool_ != VK_NULL_HANDLE) vk.vkDestroyCommandPool(context_->device, pool_, nullptr);
  timer_.destroy();
  pool_ = VK_NULL_HANDLE;
  progress_semaphore_ = VK_NULL_HANDLE;  // core's timeline: destroyed by core
  in_flight_.clear();
  free_.clear();
  context_ = nullptr;
}

Result<VkCommandBuffer> LogicalQueue::acquire_command_buffer() {
  const VolkDeviceTable& vk = context_->vk;
  if (free_.empty() && !in_flight_.empty()) {
    std::uint64_t completed = 0;
    FERRY_VK_RETURN_IF_ERROR(
        vk.vkGetSemaphoreCounterValue(context_->device, progress_semaphore_, &completed));
    while (!in_flight_.empty() && in_flight_.front().progress <= completed) {
      free_.push_back(in_flight_.front().command_buffer);
      in_flight_.pop_front();
    }
  }
  if (!free_.empty()) {
    VkCommandBuffer command_buffer = free_.back();
    free_.pop_back();
    return command_buffer;
  }
  VkCommandBufferAllocateInfo allocate_info{};
  allocate_info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocate_info.commandPool = pool_;
  allocate_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate_info.commandBufferCount = 1;
  VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  FERRY_VK_RETURN_IF_ERROR(
      vk.vkAllocateCommandBuffers(context_->device, &allocate_info, &command_buffer));
  return command_buffer;
}

void LogicalQueue::release_unsubmitted(VkCommandBuffer command_buffer) {
  if (command_buffer != VK_NULL_HANDLE) free_.push_back(command_buffer);
}

Status LogicalQueue::collect_times() {
  if (!timer_.has_pending()) return Status();
  std::uint64_t completed = 0;
  FERRY_VK_RETURN_IF_ERROR(
      context_->vk.vkGetSemaphoreCounterValue(context_->device, progress_semaphore_, &completed));
  timer_.collect(completed);
  return Status();
}

Status LogicalQueue::submit(VkCommandBuffer command_buffer,
                            std::span<const backend::TimelineValue> waits,
                            std::span<const backend::TimelineValue> signals,
                            const std::optional<TimestampPair>& timed, std::uint64_t id,
                            const std::optional<backend::TimelineValue>& order_wait) {
  auto semaphore_info = [](const backend::TimelineValue& point) {
    VkSemaphoreSubmitInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO;
    // Core only passes timelines of this device, all VulkanTimelines.
    info.semaphore = static_cast<const VulkanTimeline*>(point.timeline)->handle();
    info.value = point.value;
    info.stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
    return info;
  };
  std::vector<VkSemaphoreSubmitInfo> wait_infos;
  wait_infos.reserve(waits.size() + 1);
  for (const backend::TimelineValue& wait : waits) wait_infos.push_back(semaphore_info(wait));
  if (order_wait) wait_infos.push_back(semaphore_info(*order_wait));
  std::vector<VkSemaphoreSubmitInfo> signal_infos;
  signal_infos.reserve(signals.size());
  for (const backend::TimelineValue& signal : signals) signal_infos.push_back(semaphore_info(signal));
  // The queue's progress value (backend::Submission: the last signal).
  const VkSemaphoreSubmitInfo& progress = signal_infos.back();

  VkCommandBufferSubmitInfo command_info{};
  command_info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO;
  command_info.commandBuffer = command_buffer;

  VkSubmitInfo2 submit_info{};
  submit_info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO_2;
  submit_info.waitSemaphoreInfoCount = static_cast<std::uint32_t>(wait_infos.size());
  submit_info.pWaitSemaphoreInfos = wait_infos.data();
  submit_info.commandBufferInfoCount = command_buffer != VK_NULL_HANDLE ? 1 : 0;
  submit_info.pCommandBufferInfos = &command_info;
  submit_info.signalSemaphoreInfoCount = static_cast<std::uint32_t>(signal_infos.size());
  submit_info.pSignalSemaphoreInfos = signal_infos.data();

  const std::int64_t dispatch_ns = timed ? detail::trace_now_ns() : 0;
  const VkResult submitted = context_->vk.vkQueueSubmit2(queue_, 1, &submit_info, VK_NULL_HANDLE);
  if (submitted != VK_SUCCESS) {
    // A failed vkQueueSubmit2 leaves the command buffer and the semaphores untouched.
    release_unsubmitted(command_buffer);
    release_timestamps(timed);
    return vk_status(submitted, "vkQueueSubmit2");
  }
  progress_semaphore_ = progress.semaphore;
  if (timed) timer_.submitted(*timed, progress.value, id, dispatch_ns);
  for (const backend::TimelineValue& signal : signals) {
    static_cast<VulkanTimeline*>(signal.timeline)->note_device_signal(signal.value);
  }
  if (command_buffer != VK_NULL_HANDLE) in_flight_.push_back({progress.value, command_buffer});
  return Status();
}

}  // namespace ferry::vulkan
