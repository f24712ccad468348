#include "timeline.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "status.hpp"

namespace ferry::cuda {

namespace {

using Clock = std::chrono::steady_clock;

// Check pending signals on publish once this many are queued, so a timeline nobody polls does
// not grow without bound.
constexpr std::size_t kAdvanceOnPublishAbove = 64;
// Events kept for reuse; more are destroyed when they come back.
constexpr std::size_t kMaxFreeEvents = 256;

// Polling schedule for finite waits (infinite ones block in cudaEventSynchronize): yield-spin for
// the first 2 ms, then sleep 50 us doubling up to 1 ms, never past the deadline. Spinning first
// matters: a sleep lasts at least ~50 us on Linux (timer slack), so sleeping from the start made
// every long copy complete tens of microseconds late (16 MiB transfers lost ~8% on the H100).
// Spinning is what the CUDA runtime's own synchronize does by default (cudaDeviceScheduleAuto).
class Backoff {
 public:
  void pause(Clock::time_point deadline) {
    const auto now = Clock::now();
    if (now - start_ < kSpinFor) {
      std::this_thread::yield();
      return;
    }
    const auto left = deadline - now;
    if (left <= Clock::duration::zero()) return;
    std::this_thread::sleep_for(std::min<Clock::duration>(sleep_, left));
    sleep_ = std::min(sleep_ * 2, kMaxSleep);
  }

 private:
  static constexpr std::chrono::milliseconds kSpinFor{2};
  static constexpr std::chrono::microseconds kMaxSleep{1000};
  Clock::time_point start_ = Clock::now();
  std::chrono::microseconds sleep_{50};
};

}  // namespace

CudaTimeline::~CudaTimeline() {
  // Destroying an event whose record is still pending is allowed: CUDA releases it once the
  // device has passed it. Core destroys a timeline only when no thread uses it any more.
  (void)cudaSetDevice(device_);
  for (const auto& signal : pending_) (void)cudaEventDestroy(signal->event);
  for (cudaEvent_t event : free_events_) (void)cudaEventDestroy(event);
  (void)cudaGetLastError();
}

Result<std::uint64_t> CudaTimeline::value() {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  std::lock_guard lock(mutex_);
  FERRY_RETURN_IF_ERROR(advance_locked());
  return reached_locked();
}

Status CudaTimeline::host_signal(std::uint64_t value) {
  // Core guarantees the value exceeds everything submitted; device waits on values up to it
  // become no-ops and value() reports it at once.
  std::lock_guard lock(mutex_);
  host_value_ = std::max(host_value_, value);
  return Status();
}

Status CudaTimeline::host_wait(std::uint64_t target, Timeout timeout) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  const detail::Deadline limit(timeout);
  const bool infinite = limit.infinite();
  const Clock::time_point deadline = limit.at();
  Backoff backoff;
  std::vector<SignalPtr> blocking;
  for (;;) {
    blocking.clear();
    {
      std::lock_guard lock(mutex_);
      FERRY_RETURN_IF_ERROR(advance_locked());
      if (reached_locked() >= target) return Status();
      // Without a deadline, block in the driver on the events that decide `target`: lowest
      // latency (the driver's own spin-then-yield) and no polling. The events are pinned so
      // they are not recycled and re-recorded meanwhile.
      if (infinite && dependencies_locked(target, blocking)) {
        for (const auto& signal : blocking) ++signal->host_waiters;
      }
    }
    if (!blocking.empty()) {
      Status status;
      for (const auto& signal : blocking) {
        const cudaError_t error = cudaEventSynchronize(signal->event);
        if (error != cudaSuccess) {
          status = cuda_status(error, "cudaEventSynchronize (signal of timeline value " +
                                          std::to_string(signal->value) + ")");
          break;
        }
      }
      std::lock_guard lock(mutex_);
      for (const auto& signal : blocking) {
        if (--signal->host_waiters == 0 && signal->retired) recycle_locked(signal->event);
      }
      if (!status.ok()) {
        if (status.code() == ErrorCode::device_lost && lost_.ok()) lost_ = status;
        return status;
      }
      continue;  // re-check: the next advance sees the events complete
    }
    if (Clock::now() >= deadline) {
      std::lock_guard lock(mutex_);
      return Status(ErrorCode::timeout, "CUDA timeline: value " + std::to_string(target) +
                                            " not reached within the timeout (reached " +
                                            std::to_string(reached_locked()) + ")");
    }
    backoff.pause(deadline);
  }
}

Result<cudaEvent_t> CudaTimeline::acquire_event() {
  {
    std::lock_guard lock(mutex_);
    if (!free_events_.empty()) {
      cudaEvent_t event = free_events_.back();
      free_events_.pop_back();
      return event;
    }
  }
  cudaEvent_t event = nullptr;
  FERRY_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void CudaTimeline::release_event(cudaEvent_t event) {
  std::lock_guard lock(mutex_);
  recycle_locked(event);
}

Status CudaTimeline::enqueue_wait(cudaStream_t stream, std::uint64_t value) {
  std::lock_guard lock(mutex_);
  if (!lost_.ok()) return lost_;
  if (reached_locked() >= value) return Status();
  std::vector<SignalPtr> dependencies;
  if (!dependencies_locked(value, dependencies)) {
    return Status(ErrorCode::internal,
                  "CUDA timeline: a queue waits for value " + std::to_string(value) +
                      ", but no signal of it or above was submitted (reached " +
                      std::to_string(reached_locked()) + ")");
  }
  // Under the lock, so none of these events can be recycled and re-recorded before the stream
  // has captured its current record.
  for (const auto& signal : dependencies) {
    if (signal->stream == stream) continue;  // stream order already covers it
    FERRY_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, signal->event, 0));
  }
  return Status();
}

void CudaTimeline::publish_signal(std::uint64_t value, cudaStream_t stream, cudaEvent_t event) {
  auto signal = std::make_shared<Signal>();
  signal->value = value;
  signal->stream = stream;
  signal->event = event;
  std::lock_guard lock(mutex_);
  // Core hands signals over in increasing order; inserting in order keeps this correct anyway.
  const auto position =
      std::upper_bound(pending_.begin(), pending_.end(), value,
                       [](std::uint64_t v, const SignalPtr& s) { return v < s->value; });
  pending_.insert(position, std::move(signal));
  if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) {
    streams_.push_back(stream);
  }
  if (pending_.size() > kAdvanceOnPublishAbove) {
    (void)advance_locked();  // an error here is reported by the next value() or wait
  }
}

Status CudaTimeline::advance_locked() {
  if (!lost_.ok()) return lost_;
  while (!pending_.empty()) {
    const SignalPtr front = pending_.front();
    const cudaError_t error = cudaEventQuery(front->event);
    if (error == cudaErrorNotReady) {
      // "Not ready" is not a failure; make sure it is not left as the thread's last error for
      // the application's own cudaGetLastError checks (anything else there is not ours to clear).
      if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
      break;
    }
    if (error != cudaSuccess) {
      Status status = cuda_status(error, "cudaEventQuery (signal of timeline value " +
                                             std::to_string(front->value) + ")");
      if (status.code() == ErrorCode::device_lost) lost_ = status;
      return status;
    }
    device_value_ = std::max(device_value_, front->value);
    pending_.pop_front();
    retire_locked(front);
  }
  return Status();
}

bool CudaTimeline::dependencies_locked(std::uint64_t value, std::vector<SignalPtr>& out) const {
  const auto first = std::lower_bound(
      pending_.begin(), pending_.end(), value,
      [](const SignalPtr& s, std::uint64_t v) { return s->value < v; });
  if (first == pending_.end()) return false;
  out.push_back(*first);
  auto seen = [&out](cudaStream_t stream) {
    return std::any_of(out.begin(), out.end(),
                       [stream](const SignalPtr& s) { return s->stream == stream; });
  };
  for (auto it = first; it != pending_.begin() && out.size() < streams_.size();) {
    --it;
    if (!seen((*it)->stream)) out.push_back(*it);
  }
  return true;
}

void CudaTimeline::retire_locked(const SignalPtr& signal) {
  signal->retired = true;
  if (signal->host_waiters == 0) recycle_locked(signal->event);
}

void CudaTimeline::recycle_locked(cudaEvent_t event) {
  if (free_events_.size() < kMaxFreeEvents) {
    free_events_.push_back(event);
  } else {
    (void)cudaEventDestroy(event);
  }
}

}  // namespace ferry::cuda
