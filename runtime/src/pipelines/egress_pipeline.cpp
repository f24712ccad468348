// EgressPipeline: downloads into pooled pinned leases, a bounded queue of chunks, host workers
// running the consumer (see egress.hpp). Built on the public API, plus core's helpers for
// deadlines, starting threads and tracing.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/checked.hpp"
#include "core/deadline.hpp"
#include "core/describe.hpp"
#include "core/state.hpp"
#include "core/threads.hpp"
#include "core/trace.hpp"
#include "ferry/egress.hpp"

namespace ferry {

namespace {

// The pipeline whose worker the current thread is (consumers run there), if any.
thread_local const EgressPipeline::State* current_worker_of = nullptr;

// How often a thread blocked inside the pipeline looks whether it is being closed.
constexpr Timeout kCheckEvery = std::chrono::milliseconds(20);

}  // namespace

struct EgressPipeline::State {
  Device device;
  detail::DeviceTrace* trace = nullptr;  // the device's, when traced
  EgressOptions options;
  EgressConsumer consumer;
  StagingPool pool;
  Queue download_queue;
  std::uint64_t chunk_bytes = 0;

  struct Step {
    std::uint32_t remaining = 0;  // chunks not yet consumed or dropped
    bool failed = false;          // its push failed part way: drop what was queued
  };
  struct Item {
    EgressChunk chunk;
    Lease lease;
    TimelinePoint downloaded;
    std::shared_ptr<Step> step;
  };

  mutable std::mutex mutex;
  std::condition_variable changed;
  std::deque<Item> items;
  std::uint64_t next_step = 0;
  std::uint32_t pending_steps = 0;
  bool closing = false;
  bool cancel = false;
  // Set by the destructor: drop chunks whose downloads are still held back (never handed to the
  // device), since nothing could deliver them once the pipeline is gone.
  bool abandon_held_back = false;
  bool busy = false;  // in_order: a consumer call is running
  std::uint32_t pushing = 0;  // push() calls past their checks: workers wait for their chunks
  Status first_error;
  EgressStats stats;
  std::vector<std::thread> workers;
  bool joining = false;  // a close() is joining the workers
  bool joined = false;   // and has finished

  ~State() {
    // Joinable workers are left only when the last handle went on a worker thread (a consumer
    // dropped the pipeline): the last worker to finish destroys the state.
    for (std::thread& worker : workers) {
      if (!worker.joinable()) continue;
      if (worker.get_id() == std::this_thread::get_id()) {
        worker.detach();
      } else {
        worker.join();
      }
    }
  }

  bool on_worker_thread() const { return current_worker_of == this; }

  bool stopped_by_error() const {
    return options.on_error == ConsumerErrorPolicy::stop && !first_error.ok();
  }

  // Under the lock: one chunk of `step` is done with.
  void finish_chunk(Step& step) {
    if (--step.remaining == 0) {
      --pending_steps;
      ++stats.steps_consumed;
    }
  }

  void record_error(const Status& status) {
    ++stats.consumer_errors;
    if (first_error.ok()) first_error = status;
  }

  Status call_consumer(const EgressChunk& chunk) {
    try {
      return consumer(chunk);
    } catch (...) {
      return Status(ErrorCode::internal, "the consumer threw: " + detail::current_exception_text());
    }
  }

  // Waits for a chunk's download. False when the chunk is to be dropped instead (cancelled, or
  // held back while the pipeline is destroyed); `status` is the wait's error otherwise.
  bool wait_for_download(const TimelinePoint& downloaded, Status& status) {
    for (;;) {
      // Handed to the device: it completes, so wait for it whole (the backend's lowest-latency
      // wait). Held back: wait in slices, to see a cancel meanwhile.
      const bool handed_over = downloaded.timeline.handed_over_value() >= downloaded.value;
      status = downloaded.wait(handed_over ? kInfinite : kCheckEvery);
      if (status.code() != ErrorCode::timeout) return true;
      std::lock_guard lock(mutex);
      if (cancel || abandon_held_back) return false;
    }
  }

  void work() {
    current_worker_of = this;
    const bool in_order = options.order == EgressOrder::in_order;
    for (;;) {
      Item item;
      bool drop = false;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] {
          return (!items.empty() && !(in_order && busy)) ||
                 (closing && items.empty() && pushing == 0);
        });
        if (items.empty()) return;  // closing, nothing left and nothing more coming
        item = std::move(items.front());
        items.pop_front();
        if (in_order) busy = true;
        drop = cancel || stopped_by_error() || item.step->failed;
      }
      detail::TraceScope traced(trace, "egress chunk");
      traced.arg("step", static_cast<std::int64_t>(item.chunk.step));
      traced.arg("chunk", item.chunk.index);
      Status status;
      if (!drop) drop = !wait_for_download(item.downloaded, status);
      if (!drop) {
        if (status.ok()) {
          item.chunk.bytes = item.lease.data();
          detail::TraceScope consuming(trace, "egress consumer");
          status = call_consumer(item.chunk);
        }
        if (!status.ok()) {
          status.with_context("egress step " + std::to_string(item.chunk.step) + " chunk " +
                              std::to_string(item.chunk.index + 1) + "/" +
                              std::to_string(item.chunk.count));
        }
      }
      item.lease.release();  // back to the pool once the download has completed
      {
        std::lock_guard lock(mutex);
        if (in_order) busy = false;
        if (drop) {
          ++stats.chunks_dropped;
        } else {
          ++stats.chunks_consumed;
          if (!status.ok()) record_error(status);
        }
        finish_chunk(*item.step);
      }
      changed.notify_all();
    }
  }

  // A lease for a chunk, waiting for pool space up to the push timeout, in slices so that a
  // close meanwhile ends the wait (the space may be held by downloads that never run).
  Result<Lease> acquire_lease(std::uint64_t length) {
    const detail::Deadline deadline(options.push_timeout);
    for (;;) {
      Result<Lease> lease = pool.acquire(length, std::min(deadline.remaining(), kCheckEvery));
      if (lease.ok() || lease.status().code() != ErrorCode::timeout || deadline.passed()) {
        return lease;
      }
      std::lock_guard lock(mutex);
      if (closing) {
        return Status(ErrorCode::failed_precondition,
                      "the pipeline was closed while waiting for staging-pool space");
      }
    }
  }

  // Stops the pipeline and joins the workers (from any thread but a worker). Concurrent callers
  // all return once the workers are joined.
  Status shut_down(EgressClose mode, bool abandon) {
    std::vector<std::thread> to_join;
    {
      std::unique_lock lock(mutex);
      closing = true;
      if (mode == EgressClose::cancel) cancel = true;
      if (abandon) abandon_held_back = true;
      if (joining) {
        changed.notify_all();
        changed.wait(lock, [&] { return joined; });
        return first_error;
      }
      joining = true;
      to_join.swap(workers);
    }
    changed.notify_all();
    for (std::thread& worker : to_join) {
      if (worker.joinable()) worker.join();
    }
    std::lock_guard lock(mutex);
    joined = true;
    changed.notify_all();
    return first_error;
  }

  // What the destructor (and a move-assignment over the pipeline) does.
  void abandon() noexcept {
    if (on_worker_thread()) {
      // A consumer dropped its own pipeline: stop it; the workers end on their own and the last
      // one destroys the state.
      {
        std::lock_guard lock(mutex);
        closing = true;
        abandon_held_back = true;
      }
      changed.notify_all();
      return;
    }
    (void)shut_down(EgressClose::drain, true);
  }
};

EgressPipeline::EgressPipeline() = default;
EgressPipeline::EgressPipeline(EgressPipeline&&) noexcept = default;
EgressPipeline& EgressPipeline::operator=(EgressPipeline&& other) noexcept {
  if (this != &other) {
    if (state_) state_->abandon();
    state_ = std::move(other.state_);
  }
  return *this;
}
EgressPipeline::~EgressPipeline() {
  if (state_) state_->abandon();
}

Result<EgressPipeline> EgressPipeline::create(const Device& device, const EgressOptions& options,
                                              EgressConsumer consumer) {
  static constexpr const char* kCall = "EgressPipeline::create";
  auto invalid = [](const std::string& what) {
    return Status(ErrorCode::invalid_argument, std::string(kCall) + ": " + what);
  };
  if (!device) return invalid("no device");
  if (!consumer) return invalid("no consumer");
  if (options.workers == 0) return invalid("workers must be >= 1");
  if (options.max_pending_steps == 0) return invalid("max_pending_steps must be >= 1");
  if (options.chunk_bytes == 0) return invalid("chunk_bytes must be > 0");
  if (options.pool && options.pool->options().kind != MemoryKind::host_readback) {
    return invalid("the pool must be a host_readback pool");
  }
  auto state = std::make_shared<State>();
  state->device = device;
  state->trace = detail::trace_of(device);
  state->options = options;
  state->consumer = std::move(consumer);
  if (options.pool) {
    state->pool = *options.pool;
  } else {
    StagingPoolOptions pool_options;
    pool_options.kind = MemoryKind::host_readback;
    pool_options.slab_bytes = 64ull << 20;
    pool_options.max_slabs = 8;
    pool_options.reserved_slabs = 1;
    FERRY_ASSIGN_OR_RETURN(state->pool, device.create_staging_pool(pool_options));
  }
  state->chunk_bytes = std::min(options.chunk_bytes, state->pool.options().slab_bytes);
  state->download_queue = device.queue(QueueKind::download);
  for (std::uint32_t i = 0; i < options.workers; ++i) {
    Result<std::thread> worker = detail::start_thread(
        "egress worker " + std::to_string(i + 1) + " of " + std::to_string(options.workers),
        [state] { state->work(); }, device.state()->core->host_cpus);
    if (!worker.ok()) {
      (void)state->shut_down(EgressClose::cancel, true);  // stops those already started
      return worker.status().with_context(kCall);
    }
    std::lock_guard lock(state->mutex);
    state->workers.push_back(std::move(worker).value());
  }
  EgressPipeline pipeline;
  pipeline.state_ = std::move(state);
  return pipeline;
}

Result<EgressTicket> EgressPipeline::push(const BufferRef& output, std::uint64_t offset,
                                          std::uint64_t size, const TimelinePoint& ready) {
  static constexpr const char* kCall = "EgressPipeline::push";
  if (!state_) return Status(ErrorCode::released, std::string(kCall) + ": the pipeline was moved from");
  // A consumer may drop the pipeline's last handle while this call runs: the state lives on
  // until the call returns.
  const std::shared_ptr<State> keep = state_;
  State& s = *keep;
  if (s.on_worker_thread()) {
    return Status(ErrorCode::failed_precondition,
                  std::string(kCall) + ": called from the pipeline's own consumer, it could wait "
                                       "for that consumer to return");
  }
  if (size == 0) return Status(ErrorCode::invalid_argument, std::string(kCall) + ": size must be > 0");
  if (!output.buffer) {
    return Status(ErrorCode::released, std::string(kCall) + ": the output was released");
  }
  if (!detail::range_within(offset, size, output.size)) {
    return Status(ErrorCode::out_of_range,
                  std::string(kCall) + ": range " + detail::describe_range(offset, size) +
                      " is outside the " + std::to_string(output.size) + "-byte " + output.what);
  }
  const std::uint64_t count64 = detail::pieces_of(size, s.chunk_bytes);
  if (count64 > 0xffffffffull) {
    return Status(ErrorCode::invalid_argument,
                  std::string(kCall) + ": " + std::to_string(size) + " bytes make " +
                      std::to_string(count64) + " chunks of " + std::to_string(s.chunk_bytes) +
                      " bytes, more than 2^32 - 1");
  }
  const auto count = static_cast<std::uint32_t>(count64);

  auto step = std::make_shared<State::Step>();
  std::uint64_t step_number = 0;
  {
    std::unique_lock lock(s.mutex);
    const detail::Deadline deadline(s.options.push_timeout);
    const bool room = deadline.wait(s.changed, lock, [&] {
      return s.closing || s.stopped_by_error() || s.pending_steps < s.options.max_pending_steps;
    });
    if (!room) {
      return Status(ErrorCode::timeout, std::string(kCall) + ": " +
                                            std::to_string(s.pending_steps) +
                                            " steps still pending after the push timeout");
    }
    if (s.closing) {
      return Status(ErrorCode::failed_precondition, std::string(kCall) + ": the pipeline is closed");
    }
    if (s.stopped_by_error()) return s.first_error;
    step_number = s.next_step++;
    ++s.pushing;
    step->remaining = count;
    ++s.pending_steps;
    ++s.stats.steps_pushed;
  }

  // Ends this push for close(): the workers may stop once nothing more is coming.
  struct PushGuard {
    State& s;
    ~PushGuard() {
      {
        std::lock_guard lock(s.mutex);
        --s.pushing;
      }
      s.changed.notify_all();
    }
  } guard{s};

  EgressTicket ticket;
  ticket.step = step_number;
  for (std::uint32_t c = 0; c < count; ++c) {
    const std::uint64_t begin = std::uint64_t{c} * s.chunk_bytes;
    const std::uint64_t length = std::min(s.chunk_bytes, size - begin);
    auto submit_chunk = [&]() -> Status {
      detail::TraceScope traced(s.trace, "egress push chunk");
      traced.arg("step", static_cast<std::int64_t>(step_number));
      traced.arg("chunk", c);
      FERRY_ASSIGN_OR_RETURN(Lease lease, s.acquire_lease(length));
      CommandList copy;
      FERRY_RETURN_IF_ERROR(copy.copy(output, offset + begin, lease, 0, length));
      SubmitSync sync;
      // Later chunks follow the first in the download queue's order.
      if (c == 0 && ready.timeline) sync.wait.push_back(ready);
      FERRY_ASSIGN_OR_RETURN(TimelinePoint downloaded,
                             s.download_queue.submit(std::move(copy), sync));
      ticket.output_read = downloaded;
      State::Item item;
      item.chunk.step = step_number;
      item.chunk.index = c;
      item.chunk.count = count;
      item.chunk.offset = begin;
      item.chunk.step_bytes = size;
      item.lease = std::move(lease);
      item.downloaded = downloaded;
      item.step = step;
      {
        std::lock_guard lock(s.mutex);
        s.items.push_back(std::move(item));
      }
      s.changed.notify_all();
      return Status();
    };
    if (Status status = submit_chunk(); !status.ok()) {
      status.with_context(std::string(kCall) + ": step " + std::to_string(step_number) +
                          " chunk " + std::to_string(c + 1) + "/" + std::to_string(count));
      {
        // Chunks already queued are dropped by the workers; those never queued are done now.
        std::lock_guard lock(s.mutex);
        step->failed = true;
        for (std::uint32_t rest = c; rest < count; ++rest) s.finish_chunk(*step);
      }
      s.changed.notify_all();
      return status;
    }
  }
  return ticket;
}

Status EgressPipeline::drain(Timeout timeout) {
  if (!state_) return Status(ErrorCode::released, "EgressPipeline::drain: the pipeline was moved from");
  // A consumer may drop the pipeline's last handle while this call runs: the state lives on
  // until the call returns.
  const std::shared_ptr<State> keep = state_;
  State& s = *keep;
  if (s.on_worker_thread()) {
    return Status(ErrorCode::failed_precondition,
                  "EgressPipeline::drain: called from the pipeline's own consumer, it would wait "
                  "for that consumer to return");
  }
  const detail::Deadline deadline(timeout);
  std::unique_lock lock(s.mutex);
  if (!deadline.wait(s.changed, lock, [&] { return s.pending_steps == 0; })) {
    return Status(ErrorCode::timeout, "EgressPipeline::drain: " + std::to_string(s.pending_steps) +
                                          " steps still pending");
  }
  return s.first_error;
}

Status EgressPipeline::close(EgressClose mode) {
  if (!state_) return Status();
  // A consumer may drop the pipeline's last handle while this call runs: the state lives on
  // until the call returns.
  const std::shared_ptr<State> keep = state_;
  State& s = *keep;
  if (s.on_worker_thread()) {
    // Deferred: the consumer calling us is still running on a worker.
    {
      std::lock_guard lock(s.mutex);
      s.closing = true;
      if (mode == EgressClose::cancel) s.cancel = true;
    }
    s.changed.notify_all();
    return Status();
  }
  return s.shut_down(mode, false);
}

EgressStats EgressPipeline::stats() const {
  if (!state_) return {};
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

}  // namespace ferry
