// Timeline: a monotonically increasing 64-bit value that queues and the host signal and wait on.
//
// Vulkan uses a timeline semaphore; CUDA emulates one (docs/TIMELINE.md); the CPU backend uses a
// mutex and condition variable. Contract, identical on every backend:
// - A queue may wait for a value before the submission that signals it was made; ferry holds
//   such a submission back (with everything after it on the same queue) until the signal is
//   submitted, so the device never waits on something that might never come.
// - A failure affects only the work that failed (docs/ARCHITECTURE.md, "Failures"). A
//   submission that was accepted and then fails (its wait failed, the backend refused it, the
//   device closed while it was held back) fails the values its signals would have moved the
//   timeline through: from just above the value promised before it, up to its own. Waits on
//   those values return ErrorCode::timeline_failed at once, and submissions waiting on them fail
//   in turn. Every other value is untouched: earlier ones complete, and later signals of the
//   same timeline work as usual.
// - A submission rejected by Queue::submit (an argument error) changes nothing: its values can
//   be signalled by a later submission or the host.
#pragma once

#include <cstdint>
#include <memory>

#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry {

namespace detail {
struct TimelineState;
}

class Device;

class Timeline {
 public:
  Timeline() = default;

  // The value the device (or host) has reached.
  std::uint64_t value() const;
  // The highest value already submitted for signalling (including submissions ferry holds back
  // until their waits are submitted) or signalled by the host.
  std::uint64_t submitted_value() const;
  // The highest value whose signal has been handed to the device (or signalled by the host):
  // values up to it are reached without anything more from the application. Held-back
  // submissions do not count.
  std::uint64_t handed_over_value() const;
  // Blocks until value() >= value. ErrorCode::timeout when the timeout runs out first (a timeout
  // of any length is waited out; kInfinite waits forever); ErrorCode::timeline_failed when the
  // value will never be reached because a submission failed; device_closed when the device
  // closes before the value is submitted, or its close failed the held-back submission that
  // would have signalled it: the same code whenever the wait started, before, during or after
  // the close (and every wait on a closed device's timeline returns device_closed).
  Status wait(std::uint64_t value, Timeout timeout = kInfinite) const;
  // Sets the value from the host. It must exceed every value already submitted for signalling.
  Status signal(std::uint64_t value) const;
  // The most recent failure recorded on this timeline; ok when none.
  Status failure() const;
  // Whether the timeline was made by `device` (a handle to the same open device).
  bool belongs_to(const Device& device) const;

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
