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
#include "core/deadline.hpp"
#include "core/trace.hpp"
#include "ferry/device.hpp"
#include "ferry/queue.hpp"
#include "ferry/staging_pool.hpp"
#include "ferry/status.hpp"
#include "ferry/timeline.hpp"

namespace ferry::detail {

struct DeviceState;
struct PoolState;

struct DeviceCore {
  // Null unless tracing (DeviceOptions::trace_path): every trace point is one branch on it.
  // Declared first so it outlives the backend, whose threads may still report to it.
  std::unique_ptr<DeviceTrace> trace;
  // Declared next, so it is destroyed after everything else of the device but the trace.
  std::unique_ptr<backend::BackendDevice> impl;
  DeviceInfo info;
  // The CPUs of the device's NUMA node where its host-side work is placed there
  // (DeviceOptions::numa_placement); empty: no placement.
  std::vector<int> host_cpus;

  // Guards all submission bookkeeping: timelines' promised/submitted/failed, every queue's
  // held-back and in-flight lists, `closing` and `closed`. Backend submit() runs under it.
  std::mutex mutex;
  // Notified whenever a timeline's submitted value or failures change, a held-back submission
  // leaves its queue, or the device starts or ends closing.
  std::condition_variable changed;
  // Device::close() has begun: no new work (submissions, host signals, objects) is accepted, and
  // held-back submissions were failed. Work in flight still completes and can be waited for.
  bool closing = false;
  // Device::close() has ended: every later call on the device or its objects fails.
  bool closed = false;
  // Lets a host signal flush held-back submissions; expired once no Device/Queue handle is left.
  std::weak_ptr<DeviceState> runtime;

  Status closed_error(const char* call) const;
};

// Values of a timeline that will never be reached: the range a failed submission (or a failed
// chunked transfer) would have moved the timeline through.
struct FailedRange {
  std::uint64_t first = 0;  // the range is [first, last]; `last` is its key in the map
  Status status;
};

struct TimelineState {
  std::shared_ptr<DeviceCore> device;
  std::unique_ptr<backend::BackendTimeline> impl;
  const char* label = "timeline";  // "timeline" or the queue progress name, for messages

  // Guarded by device->mutex.
  std::uint64_t promised = 0;   // highest value an accepted submission or host signal will set
  std::uint64_t submitted = 0;  // highest value handed to the backend (or host-signalled)
  std::map<std::uint64_t, FailedRange> failed;  // by last value; disjoint, below `promised`
  Status last_failure;                          // the most recent one, for Timeline::failure()

  // The failure of `value`, or nullptr when it is not in a failed range.
  const Status* failure_of(std::uint64_t value) const {
    if (failed.empty()) return nullptr;
    const auto it = failed.lower_bound(value);
    return it != failed.end() && it->second.first <= value ? &it->second.status : nullptr;
  }
  // Records that the values in (floor, value] will never be reached.
  void fail_range(std::uint64_t floor, std::uint64_t value, const Status& status);
  // What a wait for `value`, failed with `failure`, returns: device_closed when Device::close
  // failed it (held-back work), timeline_failed for any other failure. The same whenever the
  // wait started, before or after the close (a closed device's objects say device_closed too).
  Status wait_error(std::uint64_t value, const std::string& call, const Status& failure) const;
};

struct BufferState {
  std::shared_ptr<DeviceCore> device;  // declared first: outlives impl
  // Wrapped memory (wrap_native_memory): its owner, released only after impl (which may
  // unregister the memory) is gone.
  std::shared_ptr<void> owner;
  std::unique_ptr<backend::BackendBuffer> impl;
  std::uint64_t size = 0;
  MemoryKind kind = MemoryKind::device;
};

struct PoolState;

// Free byte ranges of a slab: offset -> size, coalesced.
using FreeRanges = std::map<std::uint64_t, std::uint64_t>;

struct Slab {
  std::shared_ptr<BufferState> buffer;
  FreeRanges free_ranges;
  std::uint64_t used = 0;
};

struct LeaseState {
  std::shared_ptr<PoolState> pool;
  Slab* slab = nullptr;  // a slab with live leases is never trimmed
  std::shared_ptr<BufferState> buffer;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;      // as requested
  std::uint64_t reserved = 0;  // rounded to kStagingAlignment
  // A node for the slab's free-range map, allocated with the lease, so that giving the range
  // back allocates nothing: it happens in destructors and in noexcept Lease::release().
  FreeRanges::node_type spare;

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
  // The trace's counter of stats.bytes_in_use; null unless tracing.
  const char* trace_counter = nullptr;

  // Returns a lease's range to its slab; allocates nothing (`node` is reused) and never throws.
  void give_back(Slab* slab, std::uint64_t offset, std::uint64_t size,
                 FreeRanges::node_type&& node) noexcept;
  // Puts stats.bytes_in_use on the trace's counter, when tracing (under `mutex`).
  void trace_bytes_in_use() noexcept;
};

// One recorded command with what it keeps alive until its submission completes: every buffer
// and lease it uses, however many.
struct RecordedCommand {
  backend::Command command;
  std::vector<std::shared_ptr<BufferState>> buffers;
  std::vector<std::shared_ptr<LeaseState>> leases;
  bool needs_compute = false;
  const char* name = "copy";
};

struct Submission {
  std::vector<RecordedCommand> commands;
  std::vector<TimelinePoint> waits;
  std::vector<TimelinePoint> signals;
  // For each signal, its timeline's promised value when this submission was accepted: if the
  // submission fails, it fails (floor, value] of that timeline, and nothing else of it.
  std::vector<std::uint64_t> signal_floors;
  std::uint64_t progress_value = 0;
  Status failure;  // why it failed (a wait failed while held back, the backend refused it)
  // A failed submission in flight: whether its progress value was still handed to the backend
  // (an empty submission behind whatever of it may have run), so it retires in queue order.
  bool fenced = true;
};

struct QueueState {
  QueueKind kind = QueueKind::compute;
  std::shared_ptr<TimelineState> progress;
  std::uint64_t next_progress = 1;
  std::deque<Submission> held;       // accepted, waiting for their waits to be submitted
  std::deque<Submission> in_flight;  // handed to the backend, not yet retired
};

struct DeviceState : std::enable_shared_from_this<DeviceState> {
  std::shared_ptr<DeviceCore> core;
  std::array<QueueState, kQueueKindCount> queues;

  // Device memory ops ask for per command (multi-pass kernels), made on first use and reused:
  // slabs of device memory sub-allocated like a staging pool's, a lease per command, back when
  // its submission completes (acquire_scratch). Here rather than in DeviceCore, which the pool
  // points to: it goes with the last handle, and no op can ask for scratch without one.
  struct ScratchOptions {
    std::uint64_t slab_bytes = 0;
    std::uint32_t max_slabs = 0;
  } scratch_options;
  std::mutex scratch_mutex;  // guards `scratch` being made
  std::shared_ptr<PoolState> scratch;

  ~DeviceState();

  QueueState& queue(QueueKind kind) { return queues[static_cast<int>(kind)]; }

  // All below with core->mutex held.
  Status accept(QueueState& queue, Submission&& submission);
  void flush_held();
  // Hands a submission to the backend. One that fails (its own failure, or the backend's) fails
  // its signals and its progress value only: the queue goes on with the next submission.
  Status dispatch(QueueState& queue, Submission&& submission);
  // Fails every held-back submission with `status` (closing, or the last handle gone).
  void fail_held(const Status& status);

  // Moves completed in-flight submissions to `done`, to be destroyed once the lock is released.
  void collect_completed(std::vector<Submission>& done);

  // Without the lock: drops the resources of completed submissions.
  void retire();
  // The progress point of the oldest in-flight submission holding a lease of `pool`, if any.
  std::optional<TimelinePoint> oldest_using(const PoolState* pool);
  // Without the lock: waits until every submission accepted on `queue` up to now has completed
  // or failed (ok either way: failures are reported to the work that failed). Errors: timeout,
  // the backend's (device lost), device_closed when `stop_at_close` and the device closes.
  Status wait_queue_idle(QueueState& queue, const Deadline& deadline, bool stop_at_close);
};

// A pool on `device` (any memory kind: core's own pools may be device memory), checked as
// Device::create_staging_pool checks its options; `call` names the caller in messages.
Result<std::shared_ptr<PoolState>> create_pool(const std::shared_ptr<DeviceState>& device,
                                               const StagingPoolOptions& options,
                                               const char* call);
// A lease of `bytes` of the device's scratch memory for one command. Waits for submissions in
// flight that hold scratch; ErrorCode::resource_exhausted when the request is larger than a
// slab, or when everything is held by recorded commands not yet submitted (waiting would never
// end).
Result<Lease> acquire_scratch(DeviceState& device, std::uint64_t bytes, const char* call);

// Fails (floor, value] of each point's timeline that nothing accepted has promised yet (taking
// the lock); for a composite operation, such as a chunked transfer, that gave up after part of
// it was submitted: whoever waits for its signals gets the error instead of hanging.
void fail_points(const std::vector<TimelinePoint>& points, const Status& status);

}  // namespace ferry::detail
