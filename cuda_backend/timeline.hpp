// Timeline emulation for CUDA, which has no timeline semaphore: a host-side value plus one pooled
// event per submitted signal. Design and reasons: docs/TIMELINE.md, section "CUDA".
//
// Reached value: the largest value v such that v was host-signalled, or v was signalled by a
// submission whose event has completed together with the events of every smaller signalled value
// (signals of one timeline may come from several streams and complete out of order; a value
// counts as reached only when everything signalled up to it is done).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "core/backend.hpp"

namespace ferry::cuda {

class CudaTimeline final : public backend::BackendTimeline {
 public:
  CudaTimeline(int device, std::uint64_t initial) : device_(device), host_value_(initial) {}
  ~CudaTimeline() override;
  CudaTimeline(const CudaTimeline&) = delete;
  CudaTimeline& operator=(const CudaTimeline&) = delete;

  // Safe from any thread, concurrently with submit().
  Result<std::uint64_t> value() override;
  Status host_signal(std::uint64_t value) override;
  Status host_wait(std::uint64_t value, Timeout timeout) override;

  int device() const noexcept { return device_; }

  // For CudaDevice::submit (serialized per device; the caller has made the device current).
  // An event to record after a submission's work (pooled; created with timing disabled).
  Result<cudaEvent_t> acquire_event();
  // Returns an acquired event that will not be published (its submission failed).
  void release_event(cudaEvent_t event);
  // Makes `stream` wait until `value` is reached. `value` must be reached or already published
  // (core's guarantee); anything else is an internal error.
  Status enqueue_wait(cudaStream_t stream, std::uint64_t value);
  // Publishes a recorded event as the signal of `value` (greater than every earlier signal).
  void publish_signal(std::uint64_t value, cudaStream_t stream, cudaEvent_t event);

 private:
  struct Signal {
    std::uint64_t value = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t event = nullptr;
    int host_waiters = 0;  // threads in cudaEventSynchronize on it: not recyclable meanwhile
    bool retired = false;  // completed and dropped from pending_; the last waiter recycles it
  };
  using SignalPtr = std::shared_ptr<Signal>;

  // All below with mutex_ held.
  std::uint64_t reached_locked() const {
    return host_value_ > device_value_ ? host_value_ : device_value_;
  }
  // Pops completed signals from the front of pending_, advancing device_value_.
  Status advance_locked();
  // The signals whose completion means `value` is reached: the first pending signal >= value
  // and, for each other stream, the last pending signal before it on that stream (signals on
  // one stream complete in order). False when no pending signal is >= value.
  bool dependencies_locked(std::uint64_t value, std::vector<SignalPtr>& out) const;
  void retire_locked(const SignalPtr& signal);
  void recycle_locked(cudaEvent_t event);

  const int device_;
  mutable std::mutex mutex_;
  std::uint64_t host_value_;        // initial value or last host_signal
  std::uint64_t device_value_ = 0;  // largest value whose signal and all earlier ones completed
  std::deque<SignalPtr> pending_;   // published, not yet seen complete; ascending values
  std::vector<cudaStream_t> streams_;  // every stream that has signalled this timeline
  std::vector<cudaEvent_t> free_events_;
  Status lost_;                     // first sticky error seen; returned from then on
};

}  // namespace ferry::cuda
