// Timeline: a monotonically increasing 64-bit value that queues and the host signal and wait on.
//
// Vulkan uses a timeline semaphore; CUDA emulates one (docs/TIMELINE.md); the CPU backend uses a
// mutex and condition variable. Contract, identical on every backend:
// - A queue may wait for a value before the submission that signals it was made; ferry holds
//   such a submission back (with everything after it on the same queue) until the signal is
//   submitted, so the device never waits on something that might never come.
// - A submission that fails (rejected arguments, native error) fails the timelines it would have
//   signalled, at the lowest value it would have signalled. Waits on that value or above return
//   ErrorCode::timeline_failed instead of hanging; values signalled before still complete. A
//   failed timeline rejects new signals: make a new one to go on.
#pragma once

#include <cstdint>
#include <memory>

#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry {

namespace detail {
struct TimelineState;
}

class Timeline {
 public:
  Timeline() = default;

  // The value the device (or host) has reached.
  std::uint64_t value() const;
  // The highest value already submitted for signalling (including submissions ferry holds back
  // until their waits are submitted) or signalled by the host.
  std::uint64_t submitted_value() const;
  // Blocks until value() >= value. ErrorCode::timeout when the timeout runs out first;
  // ErrorCode::timeline_failed when the value can no longer be reached.
  Status wait(std::uint64_t value, Timeout timeout = kInfinite) const;
  // Sets the value from the host. It must exceed every value already submitted for signalling.
  Status signal(std::uint64_t value) const;
  // The failure recorded on this timeline; ok when none.
  Status failure() const;

  explicit operator bool() const { return state_ != nullptr; }
  const std::shared_ptr<detail::TimelineState>& state() const { return state_; }
  explicit Timeline(std::shared_ptr<detail::TimelineState> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<detail::TimelineState> state_;
};

// A value on a timeline: what a submission waits for or signals.
struct TimelinePoint {
  Timeline timeline;
  std::uint64_t value = 0;

  Status wait(Timeout timeout = kInfinite) const { return timeline.wait(value, timeout); }
  bool reached() const { return timeline && timeline.value() >= value; }
};

}  // namespace ferry
