#include "stream_timer.hpp"

#include <cmath>

#include "status.hpp"

namespace ferry::cuda {
namespace {

// How often the anchor is taken again (cudaEventElapsedTime's float milliseconds: 60 ns steps a
// second after the anchor).
constexpr std::int64_t kAnchorEveryNs = 1'000'000'000;
// Pairs kept for reuse beyond those in flight.
constexpr std::size_t kMaxFreePairs = 64;
static_assert(kMaxFreePairs >= StreamTimer::kCollectBatch, "a collected batch is kept for reuse");

void destroy_pair(const StreamTimer::Pair& pair) {
  if (pair.start != nullptr) (void)cudaEventDestroy(pair.start);
  if (pair.end != nullptr) (void)cudaEventDestroy(pair.end);
}

}  // namespace

Status StreamTimer::create(QueueKind kind, backend::ExecutionTimes* times) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&anchor_stream_, cudaStreamNonBlocking));
  FERRY_CUDA_RETURN_IF_ERROR(cudaEventCreate(&anchor_));  // a timing event
  kind_ = kind;
  times_ = times;
  return Status();
}

void StreamTimer::destroy() noexcept {
  for (const Pending& pending : pending_) destroy_pair(pending.pair);
  for (const Pair& pair : free_) destroy_pair(pair);
  pending_.clear();
  free_.clear();
  if (anchor_ != nullptr) (void)cudaEventDestroy(anchor_);
  if (anchor_stream_ != nullptr) (void)cudaStreamDestroy(anchor_stream_);
  anchor_ = nullptr;
  anchor_stream_ = nullptr;
  times_ = nullptr;
}

std::optional<StreamTimer::Pair> StreamTimer::take() {
  if (!active()) return std::nullopt;
  if (!free_.empty()) {
    const Pair pair = free_.back();
    free_.pop_back();
    return pair;
  }
  Pair pair;
  if (cudaEventCreate(&pair.start) != cudaSuccess || cudaEventCreate(&pair.end) != cudaSuccess) {
    destroy_pair(pair);
    (void)cudaGetLastError();
    return std::nullopt;
  }
  return pair;
}

void StreamTimer::give_back(const Pair& pair) {
  if (free_.size() < kMaxFreePairs) {
    free_.push_back(pair);
  } else {
    destroy_pair(pair);
  }
}

void StreamTimer::submitted(const Pair& pair, std::uint64_t id) { pending_.push_back({pair, id}); }

bool StreamTimer::refresh_anchor(std::int64_t now_ns) {
  if (anchored_ && now_ns - anchor_ns_ < kAnchorEveryNs) return true;
  // On an idle stream of its own the event completes as soon as the GPU sees it: its host time is
  // within the round trip, taken as the middle of it.
  const std::int64_t before = detail::trace_now_ns();
  if (cudaEventRecord(anchor_, anchor_stream_) != cudaSuccess ||
      cudaEventSynchronize(anchor_) != cudaSuccess) {
    (void)cudaGetLastError();
    return anchored_;
  }
  anchor_ns_ = before + (detail::trace_now_ns() - before) / 2;
  anchored_ = true;
  return true;
}

void StreamTimer::collect() {
  while (!pending_.empty()) {
    const Pending done = pending_.front();
    const cudaError_t state = cudaEventQuery(done.pair.end);
    if (state == cudaErrorNotReady) break;  // later ones are behind it on the stream
    pending_.pop_front();
    float from_anchor_ms = 0;
    float length_ms = 0;
    // A timing that fails (a device error) is left out of the trace; the submission's own
    // failure is reported through its timeline.
    if (state == cudaSuccess && refresh_anchor(detail::trace_now_ns()) &&
        cudaEventElapsedTime(&from_anchor_ms, anchor_, done.pair.start) == cudaSuccess &&
        cudaEventElapsedTime(&length_ms, done.pair.start, done.pair.end) == cudaSuccess) {
      auto ns = [](float ms) { return static_cast<std::int64_t>(std::llround(double{ms} * 1e6)); };
      const std::int64_t start_ns = anchor_ns_ + ns(from_anchor_ms);
      times_->submission_ran(kind_, done.id, start_ns, start_ns + ns(length_ms));
    }
    (void)cudaGetLastError();
    give_back(done.pair);
  }
}

}  // namespace ferry::cuda
