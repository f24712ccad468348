// One of ferry's logical queues (compute, upload, download) on a native VkQueue. Logical queues
// may share a VkQueue (lavapipe has one); core serializes submit() per device, which is all the
// external synchronization a shared VkQueue and the command pool need.
//
// Command buffers are recycled: a submission's last signal is its queue's progress value (core
// adds it, one higher per submission), and a command buffer is reused once that value is reached.
// (A semaphore of the queue's own for this cost one more signal per vkQueueSubmit2.)
#pragma once

#include <volk.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "core/backend.hpp"
#include "vulkan/context.hpp"
#include "vulkan/timestamps.hpp"

namespace ferry::vulkan {

class LogicalQueue {
 public:
  LogicalQueue() = default;
  LogicalQueue(const LogicalQueue&) = delete;
  LogicalQueue& operator=(const LogicalQueue&) = delete;
  ~LogicalQueue() { destroy(); }

  Status create(const DeviceContext& context, const QueueAssignment& assignment);
  // The device must be idle.
  void destroy() noexcept;

  // A command buffer to record into: a finished one reused, or a new one.
  Result<VkCommandBuffer> acquire_command_buffer();
  // Gives back a command buffer that will not be submitted (recording failed).
  void release_unsubmitted(VkCommandBuffer command_buffer);

  // Submits `command_buffer` (VK_NULL_HANDLE: nothing to run, only the waits and signals).
  // Waits and signals act at ALL_COMMANDS. On error nothing was submitted and the command buffer
  // is back in the free list. `timed`: the command buffer writes these timestamps, for the
  // submission `id` (the timer reports it once it has completed).
  // `order_wait`: one more wait, on a progress value of this VkQueue (queue_hazards.hpp).
  Status submit(VkCommandBuffer command_buffer, std::span<const backend::TimelineValue> waits,
                std::span<const backend::TimelineValue> signals,
                const std::optional<TimestampPair>& timed = std::nullopt, std::uint64_t id = 0,
                const std::optional<backend::TimelineValue>& order_wait = std::nullopt);

  // Tracing: times this queue's submissions from now on; unavailable, saying why, where the
  // queue cannot be timed.
  Status enable_timing(QueueKind kind, std::uint32_t timestamp_valid_bits,
                       backend::ExecutionTimes* times) {
    return timer_.create(*context_, kind, timestamp_valid_bits, times);
  }
  // Timestamps for a submission to record, where timed (and a pair is free).
  std::optional<TimestampPair> timestamps() { return timer_.take(); }
  void release_timestamps(const std::optional<TimestampPair>& timed) {
    if (timed) timer_.give_back(*timed);
  }
  // Reports the times of the timed submissions that have completed.
  Status collect_times();

  const QueueAssignment& assignment() const noexcept { return assignment_; }
  VkQueue native() const noexcept { return queue_; }

 private:
  struct InFlight {
    std::uint64_t progress = 0;
    VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  };

  const DeviceContext* context_ = nullptr;
  QueueAssignment assignment_;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  // The semaphore of the queue's progress timeline (the last signal of every submission).
  VkSemaphore progress_semaphore_ = VK_NULL_HANDLE;
  std::deque<InFlight> in_flight_;
  std::vector<VkCommandBuffer> free_;
  QueueTimer timer_;  // inactive unless tracing
};

}  // namespace ferry::vulkan
