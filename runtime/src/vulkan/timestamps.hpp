// Timing a logical queue's submissions for traces (core/trace.hpp, backend::ExecutionTimes): a
// pair of timestamp queries per submission, written at the start and the end of its command
// buffer, read back once the submission has completed (never a wait: the queue's progress value
// says it has), turned into host time (device_clock.hpp) and reported.
//
// Host time: calibrated timestamps (VK_KHR_/VK_EXT_calibrated_timestamps against
// CLOCK_MONOTONIC, which std::chrono::steady_clock reads), taken again every second; without
// them, the smallest offset that puts no submission's start before its dispatch (the quickest
// start seen is placed at its dispatch). A counter of fewer than 64 bits (timestampValidBits) is
// unwrapped by each submission's dispatch time; a family without timestamps, or a device without
// hostQueryReset, cannot be timed (create says why).
//
// Not thread-safe: its LogicalQueue calls it from submissions and from
// report_execution_times(), which core serializes.
#pragma once

#include <volk.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "core/backend.hpp"
#include "vulkan/context.hpp"
#include "vulkan/device_clock.hpp"

namespace ferry::vulkan {

// The two queries of one submission: `first` at its start, `first + 1` at its end.
struct TimestampPair {
  VkQueryPool pool = VK_NULL_HANDLE;
  std::uint32_t first = 0;
};

class QueueTimer {
 public:
  QueueTimer() = default;
  QueueTimer(const QueueTimer&) = delete;
  QueueTimer& operator=(const QueueTimer&) = delete;
  ~QueueTimer() { destroy(); }

  // ErrorCode::unavailable, saying why, where this queue cannot be timed.
  Status create(const DeviceContext& context, QueueKind kind, std::uint32_t valid_bits,
                backend::ExecutionTimes* times);
  // The device must be idle.
  void destroy() noexcept;
  bool active() const noexcept { return pool_ != VK_NULL_HANDLE; }

  // Queries for a submission, or none when every pair is in flight (it goes untimed).
  std::optional<TimestampPair> take();
  // Queries taken for a submission that was not submitted after all.
  void give_back(const TimestampPair& pair);
  // The submission with `pair` was submitted, as the queue's progress value `progress`, at host
  // time `dispatch_ns`.
  void submitted(const TimestampPair& pair, std::uint64_t progress, std::uint64_t id,
                 std::int64_t dispatch_ns);
  bool has_pending() const noexcept { return !pending_.empty(); }
  // Reads back and reports every timed submission up to the queue's progress value `completed`.
  void collect(std::uint64_t completed);

 private:
  struct Pending {
    std::uint64_t progress = 0;
    std::uint64_t id = 0;
    std::uint32_t first = 0;
    std::int64_t dispatch_ns = 0;
  };
  // With calibrated timestamps: calibrates again when the last calibration is old.
  void refresh_calibration(std::int64_t now_ns);

  const DeviceContext* context_ = nullptr;
  QueueKind kind_ = QueueKind::compute;
  backend::ExecutionTimes* times_ = nullptr;
  VkQueryPool pool_ = VK_NULL_HANDLE;
  std::vector<std::uint32_t> free_;  // first queries of free pairs
  std::deque<Pending> pending_;      // in submission (progress) order
  ClockCalibration clock_;
  bool calibrated_ = false;
};

}  // namespace ferry::vulkan
