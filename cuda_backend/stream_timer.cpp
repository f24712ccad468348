#include "stream_timer.hpp"

#include <algorithm>
#include <cmath>

#include "status.hpp"

namespace ferry::cuda {
namespace {

// How often the anchor is taken again (cudaEventElapsedTime's float milliseconds: 60 ns steps a
// second after the anchor).
constexpr std::int64_t kAnchorEveryNs = 1'000'000'000;
// Polling an anchor's event gives up after this and blocks instead (a busy or slow device).
constexpr std::int64_t kAnchorPollNs = 1'000'000;
// Events kept for reuse beyond those in flight.
constexpr std::size_t kMaxFreeEvents = 128;
static_assert(kMaxFreeEvents >= 2 * StreamTimer::kCollectBatch, "a collected batch is kept");

// A query that found an event not yet complete leaves cudaErrorNotReady as the thread's last
// error; cleared so that the application's own cudaGetLastError checks do not see it (anything
// else there is not ours to clear).
void forget_not_ready() {
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
}

}  // namespace

Status StreamTimer::create(QueueKind kind, backend::ExecutionTimes* times) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&anchor_stream_, cudaStreamNonBlocking));
  for (cudaEvent_t& event : anchor_events_) {
    FERRY_CUDA_RETURN_IF_ERROR(cudaEventCreate(&event));  // timing events
  }
  kind_ = kind;
  times_ = times;
  return Status();
}

void StreamTimer::destroy() noexcept {
  for (const Pending& pending : pending_) {
    give_back_event(pending.marks.start);
    give_back_event(pending.marks.end);
  }
  pending_.clear();
  for (cudaEvent_t event : free_) (void)cudaEventDestroy(event);
  free_.clear();
  for (cudaEvent_t& event : anchor_events_) {
    if (event != nullptr) (void)cudaEventDestroy(event);
    event = nullptr;
  }
  if (anchor_stream_ != nullptr) (void)cudaStreamDestroy(anchor_stream_);
  anchor_ = nullptr;
  anchored_ = false;
  anchor_stream_ = nullptr;
  times_ = nullptr;
  last_end_ns_.reset();
}

cudaEvent_t StreamTimer::take_event() {
  if (!free_.empty()) {
    cudaEvent_t event = free_.back();
    free_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  if (cudaEventCreate(&event) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return event;
}

void StreamTimer::give_back_event(cudaEvent_t event) {
  if (event == nullptr) return;
  if (times_ != nullptr && free_.size() < kMaxFreeEvents) {
    free_.push_back(event);
  } else {
    (void)cudaEventDestroy(event);
  }
}

std::optional<StreamTimer::Marks> StreamTimer::take(bool waits) {
  if (!active()) return std::nullopt;
  // Busy: the newest pending end has not completed, so this submission's commands run right
  // after it. A failed query (a device error) counts as "may be idle".
  const bool busy = !waits && !pending_.empty() &&
                    cudaEventQuery(pending_.back().marks.end) == cudaErrorNotReady;
  forget_not_ready();
  Marks marks;
  marks.end = take_event();
  if (marks.end == nullptr) return std::nullopt;
  if (!busy) {
    marks.start = take_event();
    if (marks.start == nullptr) {
      give_back_event(marks.end);
      return std::nullopt;
    }
  }
  return marks;
}

void StreamTimer::give_back(const Marks& marks) {
  give_back_event(marks.start);
  give_back_event(marks.end);
}

void StreamTimer::submitted(const Marks& marks, std::uint64_t id) {
  pending_.push_back({marks, id});
}

bool StreamTimer::refresh_anchor(std::int64_t now_ns) {
  if (anchored_ && now_ns - anchor_ns_ < kAnchorEveryNs) return true;
  // On an idle stream of its own an event completes as soon as the GPU sees it: its GPU time lies
  // within the host's round trip. Most of a round trip is the launch (several microseconds); the
  // host, polling, sees the completion within about a microsecond. So the anchor's host time is
  // the end of the round trip: the middle put GPU times ~3 us early on the H100, before their
  // own dispatch (docs/PERFORMANCE.md). Of a few round trips, each with its own event, the
  // shortest is kept. The old anchor's event may be recorded again below: it is dropped first.
  anchored_ = false;
  std::int64_t best_rtt = -1;
  for (cudaEvent_t event : anchor_events_) {
    const std::int64_t before = detail::trace_now_ns();
    if (cudaEventRecord(event, anchor_stream_) != cudaSuccess) break;
    cudaError_t state = cudaErrorNotReady;
    while ((state = cudaEventQuery(event)) == cudaErrorNotReady) {
      if (detail::trace_now_ns() - before > kAnchorPollNs) {
        state = cudaEventSynchronize(event);
        break;
      }
    }
    forget_not_ready();
    if (state != cudaSuccess) break;
    const std::int64_t after = detail::trace_now_ns();
    if (best_rtt < 0 || after - before < best_rtt) {
      best_rtt = after - before;
      anchor_ = event;
      anchor_ns_ = after;
      anchored_ = true;
    }
  }
  return anchored_;
}

std::optional<std::int64_t> StreamTimer::host_time(cudaEvent_t event) const {
  float from_anchor_ms = 0;
  if (cudaEventElapsedTime(&from_anchor_ms, anchor_, event) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  return anchor_ns_ + static_cast<std::int64_t>(std::llround(double{from_anchor_ms} * 1e6));
}

void StreamTimer::collect() {
  while (!pending_.empty()) {
    const Pending done = pending_.front();
    const cudaError_t state = cudaEventQuery(done.marks.end);
    if (state == cudaErrorNotReady) {  // later ones are behind it on the stream
      forget_not_ready();
      break;
    }
    pending_.pop_front();
    // A timing that fails (a device error) is left out of the trace; the submission's own
    // failure is reported through its timeline.
    std::optional<std::int64_t> end_ns;
    std::optional<std::int64_t> start_ns;
    if (state == cudaSuccess && refresh_anchor(detail::trace_now_ns())) {
      end_ns = host_time(done.marks.end);
      start_ns = done.marks.start != nullptr ? host_time(done.marks.start) : last_end_ns_;
    }
    (void)cudaGetLastError();
    // A start carried over from the previous submission was put on the clock by an older anchor:
    // never after this end.
    if (start_ns && end_ns) {
      times_->submission_ran(kind_, done.id, std::min(*start_ns, *end_ns), *end_ns);
    }
    last_end_ns_ = end_ns;
    give_back(done.marks);
  }
}

}  // namespace ferry::cuda
