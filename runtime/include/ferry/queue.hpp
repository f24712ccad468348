// Queue and CommandList: record copies and ops (ferry/ops/: fill, normalize, binary_quantize),
// submit them with timeline waits and signals.
//
// Commands of one submission run in the order recorded, each seeing the results of the ones
// before it. Submissions on one queue run as if one after another in submission order, like a
// CUDA stream: each sees what the ones before it wrote, and completes after them (copies of
// disjoint memory may overlap on the device); across queues, order comes only from timeline
// waits. Everything a submission uses (buffers, leases) stays alive until it completes, even if
// the user drops its handles right after submitting.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ferry/buffer.hpp"
#include "ferry/staging_pool.hpp"
#include "ferry/status.hpp"
#include "ferry/timeline.hpp"
#include "ferry/types.hpp"

namespace ferry {

namespace detail {
struct DeviceCore;
struct DeviceState;
struct RecordedCommand;
struct OpRecorder;
}  // namespace detail

// Names memory for a command: a whole Buffer, or a Lease (a range of a staging pool's slab).
// Offsets given to commands are relative to the start of the buffer or lease.
class BufferRef {
 public:
  // Names nothing: every call that needs memory refuses it (ErrorCode::released). For optional
  // bindings, such as ibp_decode's indices outside a gather.
  BufferRef() = default;
  BufferRef(const Buffer& buffer);  // NOLINT: implicit by design
  BufferRef(const Lease& lease);    // NOLINT

  std::shared_ptr<detail::BufferState> buffer;  // null when released
  std::shared_ptr<detail::LeaseState> lease;    // set when naming a lease
  std::uint64_t base = 0;                       // offset of the range within the buffer
  std::uint64_t size = 0;
  const char* what = "buffer";                  // for error messages
};

// Commands recorded to run as one submission. Record many small transfers into one list rather
// than submitting each: a submission costs ~4-9 us of CPU on the H100, a copy within one ~1-4 us
// (docs/PERFORMANCE.md, "per-call CPU cost").
class CommandList {
 public:
  CommandList();
  CommandList(CommandList&&) noexcept;
  CommandList& operator=(CommandList&&) noexcept;
  ~CommandList();

  // Copies `size` bytes. Either side may be device memory, a host buffer or a lease.
  // Errors (nothing recorded): size 0, a range outside either side, overlap within one buffer,
  // released memory, memory from another device.
  Status copy(const BufferRef& src, std::uint64_t src_offset, const BufferRef& dst,
              std::uint64_t dst_offset, std::uint64_t size);

  bool empty() const noexcept;
  std::size_t size() const noexcept;

  // Internal: the recorded commands and what they keep alive.
  std::vector<detail::RecordedCommand>& commands() { return *commands_; }
  const std::shared_ptr<detail::DeviceCore>& device() const { return device_; }

 private:
  friend struct detail::OpRecorder;  // ops record through core (runtime/src/core/op_record.hpp)

  std::unique_ptr<std::vector<detail::RecordedCommand>> commands_;
  std::shared_ptr<detail::DeviceCore> device_;  // set by the first command
};

struct SubmitSync {
  std::vector<TimelinePoint> wait;    // the submission starts after each is reached
  std::vector<TimelinePoint> signal;  // each is set once the submission has completed
};

class Queue {
 public:
  Queue() = default;
  Queue(std::shared_ptr<detail::DeviceState> device, QueueKind kind)
      : device_(std::move(device)), kind_(kind) {}

  QueueKind kind() const noexcept { return kind_; }

  // Submits the commands. Returns the point on this queue's own progress timeline at which the
  // submission completes (also usable in other submissions' waits). Op commands (fill,
  // normalize, binary_quantize) need the compute queue. Errors come in two kinds (see
  // timeline.hpp):
  // - rejected (an argument error, a wait on a value that will never be reached, a closed
  //   device): nothing was submitted and no timeline changed;
  // - accepted, then refused by the backend: the signals in sync.signal fail (their waiters get
  //   ErrorCode::timeline_failed), and nothing else does: the queue runs later submissions.
  // A submission held back on a wait that later fails fails the same way, when it is released.
  // Signal values of a timeline must increase in submission order (across all queues). A
  // timeline signalled from several queues reaches a value when that value's signal has
  // completed; use a timeline per producer when consumers need every earlier signal done too.
  Result<TimelinePoint> submit(CommandList&& commands, const SubmitSync& sync = {}) const;

  // The queue's progress timeline: every submission on this queue signals its next value.
  Timeline progress() const;
  // Waits until every submission made so far on this queue has completed or failed (ok either
  // way: a failure was reported to the work that failed). ErrorCode::timeout while submissions
  // are still held back on timeline values nobody has submitted when the timeout runs out.
  Status wait_idle(Timeout timeout = kInfinite) const;

  explicit operator bool() const { return device_ != nullptr; }
  const std::shared_ptr<detail::DeviceState>& state() const { return device_; }

 private:
  std::shared_ptr<detail::DeviceState> device_;
  QueueKind kind_ = QueueKind::compute;
};

}  // namespace ferry
