// Timeline: host-side contract on top of the backend's native timeline.
#include <string>

#include "core/faults.hpp"
#include "core/state.hpp"
#include "ferry/device.hpp"
#include "ferry/timeline.hpp"

namespace ferry {

namespace detail {

Status TimelineState::wait_error(std::uint64_t value, const std::string& call,
                                 const Status& failure) const {
  const ErrorCode code = failure.code() == ErrorCode::device_closed ? ErrorCode::device_closed
                                                                     : ErrorCode::timeline_failed;
  return Status(code, call + ": value " + std::to_string(value) + " of the " + label +
                          " will never be reached: " + failure.message());
}

}  // namespace detail

std::uint64_t Timeline::value() const {
  if (!state_) return 0;
  auto reached = state_->impl->value();
  return reached.ok() ? *reached : 0;
}

std::uint64_t Timeline::submitted_value() const {
  if (!state_) return 0;
  std::lock_guard lock(state_->device->mutex);
  return state_->promised;  // includes submissions ferry is holding back
}

std::uint64_t Timeline::handed_over_value() const {
  if (!state_) return 0;
  std::lock_guard lock(state_->device->mutex);
  return state_->submitted;
}

Status Timeline::failure() const {
  if (!state_) return Status(ErrorCode::released, "Timeline::failure: no timeline");
  std::lock_guard lock(state_->device->mutex);
  return state_->last_failure;
}

bool Timeline::belongs_to(const Device& device) const {
  return state_ && device.state() && state_->device == device.state()->core;
}

Status Timeline::wait(std::uint64_t value, Timeout timeout) const {
  if (!state_) return Status(ErrorCode::released, "Timeline::wait: no timeline");
  auto& core = *state_->device;
  detail::TraceScope traced(core.trace.get(), "Timeline::wait");
  traced.arg("value", static_cast<std::int64_t>(value));
  const detail::Deadline deadline(timeout);
  {
    // Phase 1: until a signal of `value` has been handed to the backend (or the host), or never
    // can be. Waiting here rather than in the backend lets a failure or a close wake us.
    std::unique_lock lock(core.mutex);
    if (core.closed) return core.closed_error("Timeline::wait");
    auto settled = [&] {
      return core.closed || state_->failure_of(value) != nullptr || state_->submitted >= value ||
             (core.closing && value > state_->promised);
    };
    if (!deadline.wait(core.changed, lock, settled)) {
      return Status(ErrorCode::timeout,
                    "Timeline::wait: value " + std::to_string(value) + " of the " +
                        state_->label + " was not reached within the timeout (highest submitted: " +
                        std::to_string(state_->promised) + ")");
    }
    if (const Status* failure = state_->failure_of(value)) {
      return state_->wait_error(value, "Timeline::wait", *failure);
    }
    if (state_->submitted < value) return core.closed_error("Timeline::wait");
  }
  // Phase 2: the signal is on its way; wait for the device.
  FERRY_RETURN_IF_ERROR(detail::injected_fault(
      FaultSite::wait, "Timeline::wait for value " + std::to_string(value)));
  Status status = state_->impl->host_wait(value, deadline.remaining());
  if (status.code() == ErrorCode::timeout) {
    return Status(ErrorCode::timeout, "Timeline::wait: value " + std::to_string(value) + " of the " +
                                          state_->label +
                                          " was submitted but not reached within the timeout");
  }
  return status;
}

Status Timeline::signal(std::uint64_t value) const {
  if (!state_) return Status(ErrorCode::released, "Timeline::signal: no timeline");
  auto& core = *state_->device;
  std::shared_ptr<detail::DeviceState> runtime;  // released after the lock: it may be the last
  {
    std::lock_guard lock(core.mutex);
    if (core.closing) return core.closed_error("Timeline::signal");
    if (value <= state_->promised) {
      return Status(ErrorCode::invalid_argument,
                    "Timeline::signal: value " + std::to_string(value) + " must exceed " +
                        std::to_string(state_->promised) +
                        ", the highest value already submitted for this timeline");
    }
    FERRY_RETURN_IF_ERROR(state_->impl->host_signal(value));
    state_->promised = state_->submitted = value;
    runtime = core.runtime.lock();
    if (runtime) runtime->flush_held();
  }
  core.changed.notify_all();
  return Status();
}

}  // namespace ferry
