// IngressPipeline: a producer thread feeding a bounded ring of device tensors (see ingress.hpp).
// Built on the public API only: uploads, normalize commands and timeline waits.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "ferry/ingress.hpp"

namespace ferry {

// A device tensor (and the device copy of its uint8 input) that batches take turns to use.
struct IngressBatch::Slot {
  struct Ring;
  std::weak_ptr<Ring> ring;  // weak: the ring holds free slots; a slot outliving it is dropped
  Queue compute;
  Buffer input;
  Buffer output;
  TimelinePoint input_read;     // the last normalize that read `input`
  TimelinePoint consumer_done;  // the last consumer of `output`, as released by the app
};

// The free slots, owned by the pipeline.
struct IngressBatch::Slot::Ring {
  std::mutex mutex;
  std::condition_variable freed;
  std::deque<std::shared_ptr<Slot>> free;
  bool stopping = false;

  void give_back(std::shared_ptr<Slot> slot) {
    {
      std::lock_guard lock(mutex);
      free.push_back(std::move(slot));
    }
    freed.notify_all();
  }
  // A free slot, or nullptr once stopping.
  std::shared_ptr<Slot> take() {
    std::unique_lock lock(mutex);
    freed.wait(lock, [&] { return stopping || !free.empty(); });
    if (stopping) return nullptr;
    auto slot = std::move(free.front());
    free.pop_front();
    return slot;
  }
  void stop() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    freed.notify_all();
  }
};

// ---- IngressBatch ----

IngressBatch::IngressBatch(IngressBatch&&) noexcept = default;
IngressBatch& IngressBatch::operator=(IngressBatch&& other) noexcept {
  if (this != &other) {
    release();
    index_ = other.index_;
    shape_ = other.shape_;
    ready_ = std::move(other.ready_);
    input_consumed_ = std::move(other.input_consumed_);
    slot_ = std::move(other.slot_);
  }
  return *this;
}
IngressBatch::~IngressBatch() { release(); }

const Buffer& IngressBatch::tensor() const { return slot_->output; }

void IngressBatch::release(const TimelinePoint& consumer_done) {
  if (!slot_) return;
  std::shared_ptr<Slot> slot = std::move(slot_);
  slot->consumer_done = consumer_done;
  if (auto ring = slot->ring.lock()) ring->give_back(std::move(slot));
}

void IngressBatch::release() {
  if (!slot_) return;
  // Everything submitted to the compute queue so far, which covers consumers queued there.
  const Timeline progress = slot_->compute.progress();
  release(TimelinePoint{progress, progress.submitted_value()});
}

// ---- IngressPipeline ----

struct IngressPipeline::State {
  Device device;
  IngressOptions options;
  IngressSource source;
  NormalizeShape shape;
  StagingPool pool;
  Queue upload_queue;
  Queue compute_queue;
  std::shared_ptr<IngressBatch::Slot::Ring> ring;

  // Produced batches, in order, waiting for next().
  struct Entry {
    Status error;  // of this batch; ok when `batch` holds it
    IngressBatch batch;
    bool end = false;
  };
  std::mutex mutex;
  std::condition_variable produced;
  std::deque<Entry> entries;
  bool producer_done = false;
  bool closed = false;
  std::thread producer;

  void push(Entry entry) {
    {
      std::lock_guard lock(mutex);
      if (closed) return;  // dropped: its slot goes back to the ring with the batch
      entries.push_back(std::move(entry));
    }
    produced.notify_all();
  }

  // A point to wait for before reusing memory: none when it is unset, already reached, or can
  // never be reached (its work failed and so never touches the memory).
  static bool still_pending(const TimelinePoint& point) {
    if (!point.timeline) return false;
    return point.wait(Timeout::zero()).code() == ErrorCode::timeout;
  }

  // Waits on the host for `point`, waking regularly to see whether the pipeline is closing.
  // False when closing; a failed point counts as done (its work never runs).
  bool wait_for_device(const TimelinePoint& point) {
    while (still_pending(point)) {
      {
        std::lock_guard lock(mutex);
        if (closed) return false;
      }
      (void)point.wait(std::chrono::milliseconds(20));
    }
    return true;
  }

  // Uploads and normalizes one batch into `slot`.
  Result<IngressBatch> submit_batch(std::uint64_t index, const HostBatch& host,
                                    const std::shared_ptr<IngressBatch::Slot>& slot) {
    const std::uint64_t bytes = shape.input_bytes;
    SubmitSync upload_sync;
    if (still_pending(slot->input_read)) upload_sync.wait.push_back(slot->input_read);
    TimelinePoint uploaded;
    if (host.pinned_memory()) {
      CommandList copy;
      FERRY_RETURN_IF_ERROR(copy.copy(*host.pinned_memory(), host.pinned_offset(), slot->input, 0,
                                      bytes));
      FERRY_ASSIGN_OR_RETURN(uploaded, upload_queue.submit(std::move(copy), upload_sync));
    } else {
      if (host.bytes().size() < bytes) {
        return Status(ErrorCode::out_of_range,
                      "the source gave " + std::to_string(host.bytes().size()) +
                          " bytes; the batch layout needs " + std::to_string(bytes));
      }
      if (!pool) {
        // Pinned-only streams never pay for staging memory.
        StagingPoolOptions pool_options;
        pool_options.kind = MemoryKind::host_upload;
        pool_options.slab_bytes = 16ull << 20;
        pool_options.max_slabs = 4;
        pool_options.reserved_slabs = 1;
        FERRY_ASSIGN_OR_RETURN(pool, device.create_staging_pool(pool_options));
      }
      FERRY_ASSIGN_OR_RETURN(uploaded, upload(upload_queue, pool, host.bytes().first(bytes),
                                              slot->input, 0, upload_sync, options.transfer));
    }
    CommandList normalize;
    FERRY_RETURN_IF_ERROR(normalize.normalize(slot->input, 0, slot->output, 0, options.normalize));
    SubmitSync compute_sync;
    compute_sync.wait.push_back(uploaded);
    if (still_pending(slot->consumer_done)) compute_sync.wait.push_back(slot->consumer_done);
    FERRY_ASSIGN_OR_RETURN(TimelinePoint ready,
                           compute_queue.submit(std::move(normalize), compute_sync));
    slot->input_read = ready;
    slot->consumer_done = {};
    IngressBatch batch;
    batch.index_ = index;
    batch.shape_ = shape;
    batch.ready_ = ready;
    batch.input_consumed_ = uploaded;
    batch.slot_ = slot;
    return batch;
  }

  void produce() {
    for (std::uint64_t index = 0;; ++index) {
      std::shared_ptr<IngressBatch::Slot> slot = ring->take();
      if (!slot) break;  // closing
      // Run at most `depth` batches ahead of the device: the slot's previous normalize must
      // have run. (Releases name device points, so without this the host could queue work
      // without bound.)
      if (!wait_for_device(slot->input_read)) break;  // closing
      Result<std::optional<HostBatch>> host = source(index);
      Entry entry;
      if (!host.ok()) {
        entry.error = host.status();
      } else if (!host->has_value()) {
        ring->give_back(std::move(slot));
        entry.end = true;
        push(std::move(entry));
        break;
      } else {
        Result<IngressBatch> batch = submit_batch(index, **host, slot);
        if (batch.ok()) {
          entry.batch = std::move(batch).value();
        } else {
          entry.error = batch.status();
        }
      }
      if (!entry.error.ok()) {
        entry.error.with_context("ingress batch " + std::to_string(index));
        ring->give_back(std::move(slot));
      }
      push(std::move(entry));
    }
    {
      std::lock_guard lock(mutex);
      producer_done = true;
    }
    produced.notify_all();
  }
};

IngressPipeline::IngressPipeline() = default;
IngressPipeline::IngressPipeline(IngressPipeline&&) noexcept = default;
IngressPipeline& IngressPipeline::operator=(IngressPipeline&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
  }
  return *this;
}
IngressPipeline::~IngressPipeline() { close(); }

Result<IngressPipeline> IngressPipeline::create(const Device& device,
                                                const IngressOptions& options,
                                                IngressSource source) {
  static constexpr const char* kCall = "IngressPipeline::create";
  if (!device) return Status(ErrorCode::invalid_argument, std::string(kCall) + ": no device");
  if (!source) return Status(ErrorCode::invalid_argument, std::string(kCall) + ": no source");
  if (options.depth < 2) {
    return Status(ErrorCode::invalid_argument,
                  std::string(kCall) + ": depth must be >= 2 (got " +
                      std::to_string(options.depth) + ")");
  }
  auto state = std::make_unique<State>();
  state->device = device;
  state->options = options;
  state->source = std::move(source);
  FERRY_ASSIGN_OR_RETURN(state->shape, resolve_normalize(options.normalize));
  FERRY_RETURN_IF_ERROR(normalize_factors(options.normalize).status());
  if (options.pool) state->pool = *options.pool;  // else made for the first pageable batch
  state->upload_queue = device.queue(QueueKind::upload);
  state->compute_queue = device.queue(QueueKind::compute);
  state->ring = std::make_shared<IngressBatch::Slot::Ring>();
  for (std::uint32_t i = 0; i < options.depth; ++i) {
    auto slot = std::make_shared<IngressBatch::Slot>();
    slot->ring = state->ring;
    slot->compute = state->compute_queue;
    FERRY_ASSIGN_OR_RETURN(slot->input, device.create_buffer(state->shape.input_bytes));
    FERRY_ASSIGN_OR_RETURN(slot->output, device.create_buffer(state->shape.output_bytes));
    state->ring->free.push_back(std::move(slot));
  }
  State* raw = state.get();
  state->producer = std::thread([raw] { raw->produce(); });
  IngressPipeline pipeline;
  pipeline.state_ = std::move(state);
  return pipeline;
}

Result<std::optional<IngressBatch>> IngressPipeline::next(Timeout timeout) {
  if (!state_) return Status(ErrorCode::released, "IngressPipeline::next: the pipeline was moved from");
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  auto available = [&] { return s.closed || !s.entries.empty() || s.producer_done; };
  if (timeout == kInfinite) {
    s.produced.wait(lock, available);
  } else if (!s.produced.wait_for(lock, timeout, available)) {
    return Status(ErrorCode::timeout, "IngressPipeline::next: no batch within the timeout");
  }
  if (s.closed) {
    return Status(ErrorCode::failed_precondition, "IngressPipeline::next: the pipeline is closed");
  }
  // Ended: the end marker stays queued, so later calls end too.
  if (s.entries.empty() || s.entries.front().end) return std::optional<IngressBatch>();
  State::Entry entry = std::move(s.entries.front());
  s.entries.pop_front();
  lock.unlock();
  if (!entry.error.ok()) return entry.error;
  return std::optional<IngressBatch>(std::move(entry.batch));
}

void IngressPipeline::close() {
  if (!state_) return;
  State& s = *state_;
  std::deque<State::Entry> dropped;
  {
    std::lock_guard lock(s.mutex);
    if (s.closed) return;
    s.closed = true;
    dropped.swap(s.entries);
  }
  s.produced.notify_all();
  s.ring->stop();
  if (s.producer.joinable()) s.producer.join();
  // `dropped` goes out of scope here: its batches give their slots back to the ring.
}

const NormalizeShape& IngressPipeline::shape() const { return state_->shape; }

}  // namespace ferry
