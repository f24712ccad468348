// Timing a stream's submissions for traces (core/trace.hpp, backend::ExecutionTimes): a pair of
// timing events per submission, recorded before its first command and after its last, apart
// from the timelines' events (created without timing, which makes them cheaper to record and to
// wait on). Read back once the end event has completed (cudaEventQuery, never a wait), and put on
// the host clock against an anchor: a timing event recorded on a stream of the timer's own and
// synchronized, whose host time is the middle of that round trip; taken again every second, so
// the float milliseconds of cudaEventElapsedTime stay precise. Submissions collect in batches
// (collect_batch): querying every earlier pair on each submission cost ~9 us of CPU per small
// transfer on the H100 (docs/PERFORMANCE.md, "Tracing cost").
//
// Not thread-safe: its device calls it from submissions and from report_execution_times(), which
// core serializes.
#pragma once

#include <cuda_runtime_api.h>

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

  // Events recorded around one submission.
  struct Pair {
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
  };
  // A free pair (made when none is), or none when making one fails (it goes untimed).
  std::optional<Pair> take();
  void give_back(const Pair& pair);
  // The submission `id` was enqueued with `pair` around its commands.
  void submitted(const Pair& pair, std::uint64_t id);
  // Reports the submissions whose end event has completed, in order.
  void collect();
  // collect() once kCollectBatch submissions are pending: the submitting thread pays for the
  // queries (cudaEventQuery, two cudaEventElapsedTime) once per batch instead of per submission.
  void collect_batch() {
    if (pending_.size() >= kCollectBatch) collect();
  }
  static constexpr std::size_t kCollectBatch = 32;

 private:
  struct Pending {
    Pair pair;
    std::uint64_t id = 0;
  };
  // A fresh anchor when the last is old (or there is none); false when none can be had.
  bool refresh_anchor(std::int64_t now_ns);

  QueueKind kind_ = QueueKind::compute;
  backend::ExecutionTimes* times_ = nullptr;
  cudaStream_t anchor_stream_ = nullptr;
  cudaEvent_t anchor_ = nullptr;
  std::int64_t anchor_ns_ = 0;
  bool anchored_ = false;
  std::vector<Pair> free_;
  std::deque<Pending> pending_;
};

}  // namespace ferry::cuda
