// Core's internal state behind the public handles. Ownership, chosen so there is no cycle:
//   Device / Queue handles -> DeviceState (queues, held-back and in-flight submissions)
//   DeviceState, Buffer, Timeline, pool, lease -> DeviceCore (backend device, lock)
// In-flight submissions retain buffers and leases, which retain only the DeviceCore; when the
// last Device/Queue handle goes, DeviceState drains its queues and lets everything go.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "ferry/device.hpp"
#include "ferry/queue.hpp"
#include "ferry/staging_pool.hpp"
#include "ferry/status.hpp"
#include "ferry/timeline.hpp"

namespace ferry::detail {

struct DeviceState;

struct DeviceCore {
  // Declared first so it is destroyed last.
  std::unique_ptr<backend::BackendDevice> impl;
  DeviceInfo info;

  // Guards all submission bookkeeping: timelines' promised/submitted/failure, every queue's
  // held-back and in-flight lists, and `closed`. Backend submit() runs under it.
  std::mutex mutex;
  // Notified whenever a timeline's submitted value or failure changes.
  std::condition_variable changed;
  bool closed = false;
  // Lets a host signal flush held-back submissions; expired once no Device/Queue handle is left.
  std::weak_ptr<DeviceState> runtime;

  Status closed_error(const char* call) const;
};

struct TimelineState {
  std::shared_ptr<DeviceCore> device;
  std::unique_ptr<backend::BackendTimeline> impl;
  const char* label = "timeline";  // "timeline" or the queue progress name, for messages

  // Guarded by device->mutex.
  std::uint64_t promised = 0;   // highest value an accepted submission or host signal will set
  std::uint64_t submitted = 0;  // highest value handed to the backend (or host-signalled)
  std::optional<std::uint64_t> failed_at;  // lowest value that will never be signalled
  Status failure;

  bool fails(std::uint64_t value) const { return failed_at && value >= *failed_at; }
};

struct BufferState {
  std::shared_ptr<DeviceCore> device;  // declared first: outlives impl
  std::unique_ptr<backend::BackendBuffer> impl;
  std::uint64_t size = 0;
  MemoryKind kind = MemoryKind::device;
};

struct PoolState;

struct Slab {
  std::shared_ptr<BufferState> buffer;
  std::map<std::uint64_t, std::uint64_t> free_ranges;  // offset -> size, coalesced
  std::uint64_t used = 0;
};

struct LeaseState {
  std::shared_ptr<PoolState> pool;
  Slab* slab = nullptr;  // a slab with live leases is never trimmed
  std::shared_ptr<BufferState> buffer;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;      // as requested
  std::uint64_t reserved = 0;  // rounded to kStagingAlignment

  ~LeaseState();
};

struct PoolState : std::enable_shared_from_this<PoolState> {
  std::shared_ptr<DeviceCore> device;
  std::weak_ptr<DeviceState> runtime;  // to wait for in-flight submissions holding leases
  StagingPoolOptions options;

  std::mutex mutex;
  std::condition_variable released;  // a lease range came back
  std::vector<std::unique_ptr<Slab>> slabs;
  StagingPoolStats stats;

  void give_back(Slab* slab, std::uint64_t offset, std::uint64_t size);
};

// One recorded command with what it keeps alive.
struct RecordedCommand {
  backend::Command command;
  std::array<std::shared_ptr<BufferState>, 2> buffers;
  std::array<std::shared_ptr<LeaseState>, 2> leases;
  bool needs_compute = false;
  const char* name = "copy";
};

struct Submission {
  std::vector<RecordedCommand> commands;
  std::vector<TimelinePoint> waits;
  std::vector<TimelinePoint> signals;
  std::uint64_t progress_value = 0;
  Status failure;  // set when a wait's timeline failed while held back
};

struct QueueState {
  QueueKind kind = QueueKind::compute;
  std::shared_ptr<TimelineState> progress;
  std::uint64_t next_progress = 1;
  std::deque<Submission> held;       // accepted, waiting for their waits to be submitted
  std::deque<Submission> in_flight;  // handed to the backend, not yet retired
};

struct DeviceState {
  std::shared_ptr<DeviceCore> core;
  std::array<QueueState, kQueueKindCount> queues;

  ~DeviceState();

  QueueState& queue(QueueKind kind) { return queues[static_cast<int>(kind)]; }

  // All below with core->mutex held.
  Status accept(QueueState& queue, Submission&& submission);
  void flush_held();
  Status dispatch(QueueState& queue, Submission&& submission);

  // Moves completed in-flight submissions to `done`, to be destroyed once the lock is released.
  void collect_completed(std::vector<Submission>& done);

  // Without the lock: drops the resources of completed submissions.
  void retire();
  // The progress point of the oldest in-flight submission holding a lease of `pool`, if any.
  std::optional<TimelinePoint> oldest_using(const PoolState* pool);
};

// Fails `timeline` from `value` on (core->mutex held). Held-back submissions waiting on it fail
// at the next flush_held().
void fail_timeline(TimelineState& timeline, std::uint64_t value, const Status& status);
// Fails the signal of a submission that was never sent (core->mutex held), from `value` or, if
// higher, just past what accepted submissions already promised.
void fail_unsent_signal(TimelineState& timeline, std::uint64_t value, const Status& status);
// Takes the lock; for callers outside submission (e.g. a chunked transfer that gave up).
void fail_points(const std::vector<TimelinePoint>& points, const Status& status);

// A timeout turned into a point in time, so several waits can share one budget.
class Deadline {
 public:
  explicit Deadline(Timeout timeout)
      : infinite_(timeout == kInfinite),
        at_(infinite_ ? std::chrono::steady_clock::time_point::max()
                      : std::chrono::steady_clock::now() + timeout) {}
  bool infinite() const { return infinite_; }
  bool passed() const { return !infinite_ && std::chrono::steady_clock::now() >= at_; }
  Timeout remaining() const {
    if (infinite_) return kInfinite;
    auto left = at_ - std::chrono::steady_clock::now();
    return left.count() > 0 ? std::chrono::duration_cast<Timeout>(left) : Timeout(0);
  }
  std::chrono::steady_clock::time_point at() const { return at_; }

 private:
  bool infinite_;
  std::chrono::steady_clock::time_point at_;
};

}  // namespace ferry::detail
