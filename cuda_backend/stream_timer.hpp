// Timing a stream's submissions for traces (core/trace.hpp, backend::ExecutionTimes), with timing
// events apart from the timelines' events (created without timing, which makes them cheaper to
// record and to wait on). Each submission gets one timing event after its last command. Its start
// is the end of the submission before it on the stream when the stream was busy at dispatch (the
// previous end event not yet complete: the commands run right after it); only when the stream
// may have been idle, or the submission waits on timelines, is a second event recorded before its
// first command. Timing costs the submitting thread several microseconds per small transfer on
// the H100 (docs/PERFORMANCE.md, "Tracing cost"), so a busy stream records one event, not two.
//
// Events are read back once the end event has completed (cudaEventQuery, never a wait), and put
// on the host clock against an anchor: a timing event recorded on a stream of the timer's own and
// polled, whose host time is when the host saw it complete (the shortest of four round trips);
// taken again every second, so the float milliseconds of cudaEventElapsedTime stay precise.
// Submissions collect in batches (collect_batch): querying every earlier one on each submission
// cost ~9 us of CPU per small transfer.
//
// Not thread-safe: its device calls it from submissions and from report_execution_times(), which
// core serializes.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "core/backend.hpp"

namespace ferry::cuda {

class StreamTimer {
 public:
  StreamTimer() = default;
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;
  ~StreamTimer() { destroy(); }

  Status create(QueueKind kind, backend::ExecutionTimes* times);
  // With the device current; the stream's work must be done.
  void destroy() noexcept;
  bool active() const noexcept { return times_ != nullptr; }

  // The events recorded around one submission: `start` only where it is needed (null otherwise).
  struct Marks {
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
  };
  // Events for the next submission (made when none are free), or none when making them fails
  // (it goes untimed). `waits`: whether the submission waits on timelines before its commands.
  std::optional<Marks> take(bool waits);
  void give_back(const Marks& marks);
  // The submission `id` was enqueued with `marks` around its commands.
  void submitted(const Marks& marks, std::uint64_t id);
  // Reports the submissions whose end event has completed, in order.
  void collect();
  // collect() once kCollectBatch submissions are pending: the submitting thread pays for the
  // queries (cudaEventQuery, cudaEventElapsedTime) once per batch instead of per submission.
  void collect_batch() {
    if (pending_.size() >= kCollectBatch) collect();
  }
  static constexpr std::size_t kCollectBatch = 32;

 private:
  struct Pending {
    Marks marks;
    std::uint64_t id = 0;
  };
  // A fresh anchor when the last is old (or there is none); false when none can be had.
  bool refresh_anchor(std::int64_t now_ns);
  cudaEvent_t take_event();
  void give_back_event(cudaEvent_t event);
  // Host nanoseconds of a completed event, or nothing when it cannot be timed.
  std::optional<std::int64_t> host_time(cudaEvent_t event) const;

  QueueKind kind_ = QueueKind::compute;
  backend::ExecutionTimes* times_ = nullptr;
  cudaStream_t anchor_stream_ = nullptr;
  std::array<cudaEvent_t, 4> anchor_events_ = {};  // one per try (refresh_anchor)
  cudaEvent_t anchor_ = nullptr;                    // the best try's, when anchored_
  std::int64_t anchor_ns_ = 0;
  bool anchored_ = false;
  std::vector<cudaEvent_t> free_;
  std::deque<Pending> pending_;
  // The end of the last collected submission (a later one without a start event begins there),
  // or nothing when it could not be timed.
  std::optional<std::int64_t> last_end_ns_;
};

}  // namespace ferry::cuda
