// EgressPipeline: device results to host workers without idling the GPU.
//
// The application queues work that writes a device output and pushes the output with the
// timeline point at which it is complete. The pipeline copies it on the download queue into
// leases of a pinned (host_readback) staging pool, waiting for that point on the device, never on
// the host; worker threads wait for each copy and run the application's consumer on the host
// bytes; a lease returns to the pool when its consumer is done. Compute of step i+1, download of
// step i and host work on step i-1 overlap.
//
// Bounded: push() blocks while max_pending_steps steps are not yet consumed and while the pool
// is full, so a slow consumer slows the producer; nothing is dropped, overwritten or read before
// its copy completes. Outputs larger than chunk_bytes are split into chunks, each delivered to
// the consumer as its own call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "ferry/device.hpp"
#include "ferry/queue.hpp"
#include "ferry/staging_pool.hpp"
#include "ferry/status.hpp"
#include "ferry/timeline.hpp"

namespace ferry {

// One chunk of a step's output, in host memory, valid during the consumer call.
struct EgressChunk {
  std::uint64_t step = 0;         // the push's step number (0, 1, 2, ... in push order)
  std::uint32_t index = 0;        // chunk number within the step
  std::uint32_t count = 1;        // chunks of the step
  std::uint64_t offset = 0;       // of these bytes within the step's output
  std::uint64_t step_bytes = 0;   // the step's whole output
  std::span<const std::byte> bytes;
};

// Runs on a worker thread. An error is recorded against the step (see ConsumerErrorPolicy); so is
// an exception it throws (caught, as ErrorCode::internal with the exception's message). It may
// call close() on its own pipeline (the close is then deferred, see close()), not push() or
// drain(), which would wait for the consumer itself.
using EgressConsumer = std::function<Status(const EgressChunk& chunk)>;

enum class EgressOrder : std::uint8_t {
  in_order,      // consumer calls run one at a time, in step and chunk order
  as_completed,  // up to `workers` calls run at once, each as soon as its bytes have arrived
};

enum class ConsumerErrorPolicy : std::uint8_t {
  stop,        // the first error stops the pipeline: later chunks are dropped, push() fails
  keep_going,  // errors are recorded and reported by drain(); other steps go on
};

struct EgressOptions {
  std::uint32_t workers = 2;
  std::uint32_t max_pending_steps = 4;     // pushed but not yet fully consumed
  EgressOrder order = EgressOrder::in_order;
  ConsumerErrorPolicy on_error = ConsumerErrorPolicy::stop;
  std::optional<StagingPool> pool;         // host_readback pool; made when absent
  std::uint64_t chunk_bytes = 64ull << 20;  // clamped to the pool's slab size
  Timeout push_timeout = kInfinite;         // per wait inside push()
};

struct EgressStats {
  std::uint64_t steps_pushed = 0;
  std::uint64_t steps_consumed = 0;  // every chunk delivered (successfully or not)
  std::uint64_t chunks_consumed = 0;
  std::uint64_t consumer_errors = 0;
  std::uint64_t chunks_dropped = 0;  // cancelled by close(cancel) or after a stopping error
};

// What push() returns.
struct EgressTicket {
  std::uint64_t step = 0;
  // The download has read the device output: the application may overwrite it from here on.
  TimelinePoint output_read;
};

enum class EgressClose : std::uint8_t {
  drain,   // deliver everything pushed, then stop
  cancel,  // drop chunks not yet handed to a consumer; calls in progress finish
};

class EgressPipeline {
 public:
  // Starts the worker threads; ErrorCode::resource_exhausted when the system cannot start them
  // all (those already started are stopped).
  static Result<EgressPipeline> create(const Device& device, const EgressOptions& options,
                                       EgressConsumer consumer);

  EgressPipeline();
  EgressPipeline(EgressPipeline&&) noexcept;
  EgressPipeline& operator=(EgressPipeline&&) noexcept;  // closes this one first (as destroyed)
  // Delivers every chunk whose download was handed to the device, drops those still held back
  // behind a `ready` point nobody has submitted (nothing could deliver them once the pipeline is
  // gone), and joins the workers. Never waits for work that cannot complete.
  ~EgressPipeline();

  // Hands over bytes [offset, offset + size) of `output`, complete at `ready` (a point on any
  // queue's or the application's timeline). Returns once every chunk's download is submitted.
  // Errors: bad range, closed pipeline, a stopping consumer error (returned as is, with its
  // step), timeout while waiting for room.
  Result<EgressTicket> push(const BufferRef& output, std::uint64_t offset, std::uint64_t size,
                            const TimelinePoint& ready);

  // Waits until every step pushed so far has been consumed. Returns the first consumer or
  // download error seen (with its step), or ok. failed_precondition from a consumer.
  Status drain(Timeout timeout = kInfinite);

  // Stops accepting pushes, then drains or cancels, and joins the workers. Leases go back to
  // the pool as their downloads complete. Returns what drain() would. Idempotent; safe from
  // several threads at once (each returns once the workers are joined). Called from a consumer,
  // it cannot wait for that consumer: it stops the pipeline (pushes fail from then on; cancel
  // drops what is not yet delivered) and returns ok at once; the workers finish on their own and
  // are joined by a later close() or the destructor.
  Status close(EgressClose mode = EgressClose::drain);

  EgressStats stats() const;

  struct State;

 private:
  std::shared_ptr<State> state_;  // shared with the workers, which may outlive a deferred close
};

}  // namespace ferry
