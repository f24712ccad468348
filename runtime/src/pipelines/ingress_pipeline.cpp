// IngressPipeline: a producer thread feeding a bounded ring of device tensors (see ingress.hpp).
// Built on the public API, plus core's helpers for deadlines, threads and tracing. The transform
// (normalize, or any op) is the options'; this file knows no op.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/deadline.hpp"
#include "core/host_view.hpp"
#include "core/state.hpp"
#include "core/threads.hpp"
#include "core/trace.hpp"
#include "ferry/ingress.hpp"

namespace ferry {

// A device tensor (and the device copy of its uint8 input) that batches take turns to use.
struct IngressBatch::Slot {
  struct Ring;
  std::weak_ptr<Ring> ring;  // weak: the ring holds free slots; a slot outliving it is dropped
  Queue compute;
  Device device;  // to check the points a release names
  Buffer input;
  Buffer output;
  TimelinePoint input_read;     // the last transform that read `input`
  TimelinePoint consumer_done;  // the last consumer of `output`, as released by the app
};

// The free slots, owned by the pipeline: a fixed ring with room for every slot, so that giving
// one back allocates nothing (it happens in destructors and noexcept moves).
struct IngressBatch::Slot::Ring {
  explicit Ring(std::size_t capacity) : slots(capacity) {}

  std::mutex mutex;
  std::condition_variable freed;
  std::vector<std::shared_ptr<Slot>> slots;  // slots[(head + i) % size()], i < count, are free
  std::size_t head = 0;
  std::size_t count = 0;
  bool stopping = false;
  bool taker_waiting = false;  // the producer waits in take() for a slot
  // Called (without this ring's lock) when the producer starts waiting for a slot: next() then
  // learns that nothing comes until the application releases one.
  std::function<void()> on_wait;

  void give_back(std::shared_ptr<Slot> slot) noexcept {
    {
      std::lock_guard lock(mutex);
      if (count == slots.size()) return;  // cannot happen: every slot is in one place at a time
      slots[(head + count) % slots.size()] = std::move(slot);
      ++count;
    }
    freed.notify_all();
  }
  // A free slot, or nullptr once stopping.
  std::shared_ptr<Slot> take() {
    std::unique_lock lock(mutex);
    if (!stopping && count == 0) {
      taker_waiting = true;
      if (on_wait) {
        lock.unlock();
        on_wait();
        lock.lock();
      }
    }
    freed.wait(lock, [&] { return stopping || count > 0; });
    taker_waiting = false;
    if (stopping) return nullptr;
    std::shared_ptr<Slot> slot = std::move(slots[head]);
    head = (head + 1) % slots.size();
    --count;
    return slot;
  }
  void stop() noexcept {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    freed.notify_all();
  }
  // Whether the producer waits for a free slot. With no batch queued (the caller checks), every
  // slot is then with the application: nothing can be produced until it releases one.
  bool starved() {
    std::lock_guard lock(mutex);
    return taker_waiting && count == 0;
  }
};

namespace {

// Records the transform (user code when it is not one of ferry's): an exception it throws becomes
// an error of the call, never the end of the process.
// Calls one of the transform's callbacks (user code on ferry's thread): an exception it throws
// becomes an error of the batch.
template <typename Call>
auto guarded(const IngressTransform& transform, const Call& call) -> decltype(call()) {
  try {
    return call();
  } catch (...) {
    return Status(ErrorCode::internal, "the transform '" + transform.name +
                                           "' threw: " + detail::current_exception_text());
  }
}

Status record_transform(const IngressTransform& transform, CommandList& commands,
                        const BufferRef& input, const BufferRef& output) {
  return guarded(transform, [&] { return transform.record(commands, input, output); });
}

// What an empty batch or pipeline hands out.
const Buffer& empty_buffer() {
  static const Buffer none;
  return none;
}

// Whether memory that `point`'s work uses must still be waited for before reuse: not when the
// point is unset, reached, failed (its work never runs) or its device closed (no work can be
// submitted to reuse it). Any other answer (a failed wait) counts as pending: reusing memory the
// device may still use would be worse than waiting.
bool still_pending(const TimelinePoint& point) {
  if (!point.timeline) return false;
  const Status polled = point.wait(Timeout::zero());
  return !polled.ok() && polled.code() != ErrorCode::timeline_failed &&
         polled.code() != ErrorCode::device_closed;
}

}  // namespace

// ---- IngressBatch ----

IngressBatch::IngressBatch(IngressBatch&&) noexcept = default;
IngressBatch& IngressBatch::operator=(IngressBatch&& other) noexcept {
  if (this != &other) {
    release();
    index_ = other.index_;
    tensor_bytes_ = other.tensor_bytes_;
    ready_ = std::move(other.ready_);
    input_consumed_ = std::move(other.input_consumed_);
    slot_ = std::move(other.slot_);
  }
  return *this;
}
IngressBatch::~IngressBatch() { release(); }

const Buffer& IngressBatch::tensor() const { return slot_ ? slot_->output : empty_buffer(); }

Status IngressBatch::release(const TimelinePoint& consumer_done) {
  if (!slot_) return Status();
  if (consumer_done.timeline && !consumer_done.timeline.belongs_to(slot_->device)) {
    return Status(ErrorCode::invalid_argument,
                  "IngressBatch::release: batch " + std::to_string(index_) +
                      ": the consumer's point is on a timeline of another device; the batch is "
                      "still held");
  }
  std::shared_ptr<Slot> slot = std::move(slot_);
  slot->consumer_done = consumer_done;
  if (auto ring = slot->ring.lock()) ring->give_back(std::move(slot));
  return Status();
}

void IngressBatch::release() noexcept {
  if (!slot_) return;
  // Everything submitted to the compute queue so far, which covers consumers queued there.
  const Timeline progress = slot_->compute.progress();
  std::shared_ptr<Slot> slot = std::move(slot_);
  slot->consumer_done = TimelinePoint{progress, progress.submitted_value()};
  if (auto ring = slot->ring.lock()) ring->give_back(std::move(slot));
}

// ---- IngressPipeline ----

struct IngressPipeline::State {
  Device device;
  IngressOptions options;
  IngressSource source;
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
  std::atomic<std::thread::id> producer_id{};  // set by the producer itself when it starts
  std::mutex join_mutex;                       // one joiner at a time

  ~State() {
    // Only the producer's own exit (it holds the state) can leave it joinable here: when the
    // source dropped the last pipeline handle, say. Nobody else can join it then.
    if (producer.joinable()) {
      if (on_producer_thread()) {
        producer.detach();
      } else {
        producer.join();
      }
    }
  }

  bool on_producer_thread() const { return std::this_thread::get_id() == producer_id.load(); }

  void push(Entry entry) {
    {
      std::lock_guard lock(mutex);
      if (closed) return;  // dropped: its slot goes back to the ring with the batch
      entries.push_back(std::move(entry));
    }
    produced.notify_all();
  }

  // Waits on the host for `point`, waking regularly to see whether the pipeline is closing.
  // False when closing; a failed point counts as done (its work never runs).
  bool wait_for_device(const TimelinePoint& point) {
    while (still_pending(point)) {
      {
        std::lock_guard lock(mutex);
        if (closed) return false;
      }
      const Status waited = point.wait(std::chrono::milliseconds(20));
      if (!waited.ok() && waited.code() != ErrorCode::timeout &&
          waited.code() != ErrorCode::timeline_failed) {
        // A failed wait (the device lost, an injected fault): do not spin on it.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return true;
  }

  // Asks the source for batch `index`; an exception it throws becomes the batch's error.
  Result<std::optional<HostBatch>> ask_source(std::uint64_t index) {
    try {
      return source(index);
    } catch (...) {
      return Status(ErrorCode::internal, "the source threw: " + detail::current_exception_text());
    }
  }

  // How many of the batch's bytes to upload: input_bytes, or what the transform's inspect says.
  // Ordinary memory is exact, never cut to size: input_bytes of it (at most that many with an
  // inspect step), so that a source handing over the wrong thing (another dtype, another shape)
  // gets an error for that batch instead of its first bytes being used.
  Result<std::uint64_t> batch_bytes(const HostBatch& host) {
    const IngressTransform& transform = options.transform;
    if (!host.pinned_memory()) {
      const std::uint64_t given = host.bytes().size();
      if (transform.inspect ? given > transform.input_bytes || given == 0
                            : given != transform.input_bytes) {
        return Status(ErrorCode::out_of_range,
                      "the source gave " + std::to_string(given) + " bytes; the batch layout needs " +
                          (transform.inspect ? "1 to " : "exactly ") +
                          std::to_string(transform.input_bytes));
      }
    }
    if (!transform.inspect) return transform.input_bytes;
    std::span<const std::byte> view = host.bytes();
    if (const std::optional<BufferRef>& pinned = host.pinned_memory()) {
      // A pinned batch is a place in a larger buffer: the bytes from it on, at most input_bytes.
      FERRY_ASSIGN_OR_RETURN(view, detail::host_view(*pinned, host.pinned_offset()));
      view = view.first(std::min<std::uint64_t>(view.size(), transform.input_bytes));
    }
    Result<std::uint64_t> bytes = guarded(transform, [&] { return transform.inspect(view); });
    if (bytes.ok() && (*bytes == 0 || *bytes > view.size())) {
      return Status(ErrorCode::internal, "the transform '" + transform.name + "' asked for " +
                                             std::to_string(*bytes) + " of the batch's " +
                                             std::to_string(view.size()) + " bytes");
    }
    return bytes;
  }

  // Uploads and transforms one batch into `slot`.
  Result<IngressBatch> submit_batch(std::uint64_t index, const HostBatch& host,
                                    const std::shared_ptr<IngressBatch::Slot>& slot) {
    FERRY_ASSIGN_OR_RETURN(const std::uint64_t bytes, batch_bytes(host));
    SubmitSync upload_sync;
    if (still_pending(slot->input_read)) upload_sync.wait.push_back(slot->input_read);
    TimelinePoint uploaded;
    if (host.pinned_memory()) {
      CommandList copy;
      FERRY_RETURN_IF_ERROR(copy.copy(*host.pinned_memory(), host.pinned_offset(), slot->input, 0,
                                      bytes));
      FERRY_ASSIGN_OR_RETURN(uploaded, upload_queue.submit(std::move(copy), upload_sync));
    } else {
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
    CommandList transform;
    FERRY_RETURN_IF_ERROR(
        record_transform(options.transform, transform, slot->input, slot->output));
    SubmitSync compute_sync;
    compute_sync.wait.push_back(uploaded);
    if (still_pending(slot->consumer_done)) compute_sync.wait.push_back(slot->consumer_done);
    FERRY_ASSIGN_OR_RETURN(TimelinePoint ready,
                           compute_queue.submit(std::move(transform), compute_sync));
    slot->input_read = ready;
    slot->consumer_done = {};
    IngressBatch batch;
    batch.index_ = index;
    batch.tensor_bytes_ = options.transform.output_bytes;
    batch.ready_ = ready;
    batch.input_consumed_ = uploaded;
    batch.slot_ = slot;
    return batch;
  }

  void produce() {
    producer_id.store(std::this_thread::get_id());
    detail::DeviceTrace* const trace = detail::trace_of(device);
    for (std::uint64_t index = 0;; ++index) {
      detail::TraceScope traced(trace, "ingress batch");
      traced.arg("batch", static_cast<std::int64_t>(index));
      // The source first, then a slot: the end of the stream (and a source's error) is known
      // without a free slot, so an application holding every batch still sees the end.
      Result<std::optional<HostBatch>> host = [&] {
        detail::TraceScope asking(trace, "ingress source");
        return ask_source(index);
      }();
      Entry entry;
      if (host.ok() && !host->has_value()) {
        entry.end = true;
        push(std::move(entry));
        break;
      }
      if (!host.ok()) {
        entry.error = std::move(host).status().with_context("ingress batch " + std::to_string(index));
        push(std::move(entry));
        continue;
      }
      std::shared_ptr<IngressBatch::Slot> slot;
      {
        detail::TraceScope waiting(trace, "ingress: wait for a free slot");
        slot = ring->take();
        if (!slot) break;  // closing
        // Run at most `depth` batches ahead of the device: the slot's previous transform must
        // have run. (Releases name device points, so without this the host could queue work
        // without bound.)
        if (!wait_for_device(slot->input_read)) break;  // closing
      }
      {
        Result<IngressBatch> batch = submit_batch(index, **host, slot);
        if (batch.ok()) {
          entry.batch = std::move(batch).value();
        } else {
          entry.error = batch.status();
        }
      }
      if (!entry.error.ok()) {
        entry.error.with_context("ingress batch " + std::to_string(index));
        // A consumer point that is no longer pending (reached, or failed) is not waited for
        // again, so one failed batch cannot fail every later use of the slot.
        if (!still_pending(slot->consumer_done)) slot->consumer_done = {};
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

  // Stops the producer and joins it, unless called on it (from the source): it then ends once
  // the source returns, and a later close() or the destructor joins it.
  void stop() noexcept {
    std::deque<Entry> dropped;
    {
      std::lock_guard lock(mutex);
      closed = true;
      dropped.swap(entries);
    }
    produced.notify_all();
    ring->stop();
    if (on_producer_thread()) return;
    std::lock_guard lock(join_mutex);
    if (producer.joinable()) producer.join();
    // `dropped` goes out of scope here: its batches give their slots back to the ring.
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
  const IngressTransform& transform = options.transform;
  if (!transform.record || transform.input_bytes == 0 || transform.output_bytes == 0) {
    return Status(ErrorCode::invalid_argument,
                  std::string(kCall) + ": the transform '" + transform.name +
                      "' needs a record function and input and output sizes > 0 (got " +
                      std::to_string(transform.input_bytes) + " and " +
                      std::to_string(transform.output_bytes) + ")");
  }
  auto state = std::make_shared<State>();
  state->device = device;
  state->options = options;
  state->source = std::move(source);
  if (options.pool) state->pool = *options.pool;  // else made for the first pageable batch
  state->upload_queue = device.queue(QueueKind::upload);
  state->compute_queue = device.queue(QueueKind::compute);
  state->ring = std::make_shared<IngressBatch::Slot::Ring>(options.depth);
  // Weak: the ring lives in slots that may outlive the state.
  state->ring->on_wait = [weak = std::weak_ptr<State>(state)] {
    if (const auto alive = weak.lock()) {
      { std::lock_guard lock(alive->mutex); }
      alive->produced.notify_all();
    }
  };
  for (std::uint32_t i = 0; i < options.depth; ++i) {
    auto slot = std::make_shared<IngressBatch::Slot>();
    slot->ring = state->ring;
    slot->compute = state->compute_queue;
    slot->device = device;
    FERRY_ASSIGN_OR_RETURN(slot->input, device.create_buffer(transform.input_bytes));
    FERRY_ASSIGN_OR_RETURN(slot->output, device.create_buffer(transform.output_bytes));
    if (i == 0) {
      // Recording (never submitting) one batch's transform checks its parameters and asks the
      // backend now whether it can run it (Vulkan's storage-buffer window, say), instead of
      // failing the first batch.
      CommandList probe;
      Status recordable = record_transform(transform, probe, slot->input, slot->output);
      if (!recordable.ok()) return recordable.with_context(std::string(kCall) + ": " + transform.name);
    }
    state->ring->give_back(std::move(slot));
  }
  FERRY_ASSIGN_OR_RETURN(state->producer,
                         detail::start_thread("the ingress pipeline's producer thread",
                                              [state] { state->produce(); },
                                              device.state()->core->host_cpus));
  IngressPipeline pipeline;
  pipeline.state_ = std::move(state);
  return pipeline;
}

Result<std::optional<IngressBatch>> IngressPipeline::next(Timeout timeout) {
  if (!state_) return Status(ErrorCode::released, "IngressPipeline::next: the pipeline was moved from");
  // The source may drop the pipeline's last handle while this call waits: the state lives on
  // until the call returns.
  const std::shared_ptr<State> keep = state_;
  State& s = *keep;
  if (s.on_producer_thread()) {
    return Status(ErrorCode::failed_precondition,
                  "IngressPipeline::next: called from the source, it would wait for itself");
  }
  const detail::Deadline deadline(timeout);
  std::unique_lock lock(s.mutex);
  // Every tensor with the application, nothing queued and the producer waiting for a slot: no
  // batch can come until one is released, so say so instead of waiting forever. (The end of
  // the stream or a source's error still comes first: the source is asked before a slot.)
  bool starved = false;
  const bool available = deadline.wait(s.produced, lock, [&] {
    if (s.closed || !s.entries.empty() || s.producer_done) return true;
    starved = s.ring->starved();
    return starved;
  });
  if (!available) return Status(ErrorCode::timeout, "IngressPipeline::next: no batch within the timeout");
  if (starved && !s.closed && s.entries.empty() && !s.producer_done) {
    return Status(ErrorCode::failed_precondition,
                  "IngressPipeline::next: the application holds all " +
                      std::to_string(s.options.depth) +
                      " of the pipeline's tensors (depth); release a batch before asking for "
                      "the next");
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

void IngressPipeline::close() noexcept {
  if (state_) state_->stop();
}

std::uint64_t IngressPipeline::input_bytes() const {
  return state_ ? state_->options.transform.input_bytes : 0;
}

std::uint64_t IngressPipeline::tensor_bytes() const {
  return state_ ? state_->options.transform.output_bytes : 0;
}

}  // namespace ferry
