// IngressPipeline: streams host batches to device tensors, overlapped and bounded.
//
// For each batch a producer thread asks the application's source for the host bytes, uploads
// them on the upload queue (pageable memory through the staging pool, pinned memory by DMA
// directly), then runs the pipeline's transform on the compute queue into one of `depth` device
// tensors: normalize (uint8 images to float tensors, normalize_transform in ferry/ops/normalize.hpp)
// or any other op. The application takes batches in order with next(); each comes with the
// timeline point at which its tensor is ready, so the application queues its own GPU work behind
// it without a host wait.
//
// With depth 3, batch i+1 uploads while batch i is transformed and the application consumes batch
// i-1. The pipeline is bounded: a tensor is reused only after the application has released the
// batch that used it (and after the GPU work the release names has completed), so a slow
// consumer slows the producer and nothing is overwritten while in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ferry/buffer.hpp"
#include "ferry/device.hpp"
#include "ferry/queue.hpp"
#include "ferry/staging_pool.hpp"
#include "ferry/status.hpp"
#include "ferry/timeline.hpp"
#include "ferry/transfer.hpp"

namespace ferry {

// The step that turns an uploaded batch (input_bytes of device memory) into the batch's tensor
// (output_bytes): recorded once per batch, on the compute queue.
struct IngressTransform {
  std::string name = "transform";  // for messages
  std::uint64_t input_bytes = 0;   // host bytes per batch, uploaded as they are
  std::uint64_t output_bytes = 0;  // bytes of a batch's tensor
  // Records the transform of input[0, input_bytes) into output[0, output_bytes).
  std::function<Status(CommandList& commands, const BufferRef& input, const BufferRef& output)>
      record;
  // Optional, for batches whose size varies (compressed batches: ibp::decode_transform). Called
  // on the producer thread with the batch's host bytes (at most input_bytes of them; a pinned
  // batch's through its host view) before anything of it is uploaded; returns how many of them
  // to upload (1 to input_bytes), or an error that becomes the batch's. `record` is called next,
  // for the same batch, on the same thread. Without it every batch is input_bytes long.
  std::function<Result<std::uint64_t>(std::span<const std::byte> batch)> inspect;
};

// The host bytes of one batch: IngressTransform::input_bytes of them.
class HostBatch {
 public:
  // Ordinary memory: copied into the staging pool (by several threads, overlapped with the
  // DMA). It may be reused as soon as the source callback that returned it is called again.
  // Exactly input_bytes long (1 to input_bytes for a transform with an inspect step): any other
  // length is that batch's error (ErrorCode::out_of_range), never a batch cut to size.
  static HostBatch pageable(std::span<const std::byte> bytes) {
    HostBatch batch;
    batch.bytes_ = bytes;
    return batch;
  }
  // Memory the device reads by DMA (a Lease, a host_upload Buffer, registered memory): uploaded
  // directly, no staging copy. It must stay unchanged until the batch's input_consumed point.
  static HostBatch pinned(const BufferRef& memory, std::uint64_t offset = 0) {
    HostBatch batch;
    batch.pinned_ = memory;
    batch.offset_ = offset;
    return batch;
  }

  std::span<const std::byte> bytes() const { return bytes_; }
  const std::optional<BufferRef>& pinned_memory() const { return pinned_; }
  std::uint64_t pinned_offset() const { return offset_; }

 private:
  std::span<const std::byte> bytes_;
  std::optional<BufferRef> pinned_;
  std::uint64_t offset_ = 0;
};

// Called on the pipeline's producer thread for batches 0, 1, 2, ... in order. Returns the batch,
// std::nullopt at the end of the stream, or an error, which is handed to the application at
// that batch (the stream goes on with the next index). An exception it throws is caught and
// becomes that batch's error (ErrorCode::internal, with the exception's message). It may call
// the pipeline's close() (the pipeline then stops after this call returns), not next().
using IngressSource = std::function<Result<std::optional<HostBatch>>(std::uint64_t index)>;

struct IngressOptions {
  IngressTransform transform;      // e.g. normalize_transform(params) (ferry/ops/normalize.hpp)
  std::uint32_t depth = 3;         // device tensors in flight, including those the app holds (>= 2)
  std::optional<StagingPool> pool; // host_upload pool for pageable batches; made on first need
  TransferOptions transfer;        // chunking and host threads of pageable uploads
};

// One normalized batch. Release it (or let it go out of scope) when done with it.
class IngressBatch {
 public:
  IngressBatch() = default;
  IngressBatch(IngressBatch&&) noexcept;
  IngressBatch& operator=(IngressBatch&&) noexcept;
  IngressBatch(const IngressBatch&) = delete;
  IngressBatch& operator=(const IngressBatch&) = delete;
  ~IngressBatch();

  std::uint64_t index() const { return index_; }
  // The transformed tensor, tensor_bytes() long, at offset 0 of this buffer. Valid until
  // release(). On an empty batch (default-constructed, moved from or released) an empty Buffer,
  // which every call refuses with ErrorCode::released.
  const Buffer& tensor() const;
  // IngressTransform::output_bytes; 0 on an empty batch.
  std::uint64_t tensor_bytes() const { return tensor_bytes_; }
  // The tensor holds the batch from here on (compute queue).
  const TimelinePoint& ready() const { return ready_; }
  // The upload has read the host bytes: pinned source memory may be reused from here on.
  const TimelinePoint& input_consumed() const { return input_consumed_; }

  // Gives the tensor back to the pipeline; the next batch that reuses it waits (on the device)
  // for `consumer_done`, the point at which the application's work reading it completes (a point
  // without a timeline: nothing reads it any more). A point of another device is an error for
  // this call only (ErrorCode::invalid_argument): the batch stays held and can be released
  // again. Without a point: every submission made on the compute queue so far (which covers
  // consumers that run there). Called by the destructor when not called before. Releasing an
  // empty batch does nothing.
  Status release(const TimelinePoint& consumer_done);
  void release() noexcept;

  explicit operator bool() const { return slot_ != nullptr; }

 private:
  friend class IngressPipeline;
  struct Slot;
  std::uint64_t index_ = 0;
  std::uint64_t tensor_bytes_ = 0;
  TimelinePoint ready_;
  TimelinePoint input_consumed_;
  std::shared_ptr<Slot> slot_;
};

class IngressPipeline {
 public:
  // Validates the options (the transform is recorded once, never submitted, so a transform the
  // device cannot run is an error here, not at the first batch) and starts the producer thread
  // (ErrorCode::resource_exhausted when no thread can be started).
  static Result<IngressPipeline> create(const Device& device, const IngressOptions& options,
                                        IngressSource source);

  IngressPipeline();
  IngressPipeline(IngressPipeline&&) noexcept;
  IngressPipeline& operator=(IngressPipeline&&) noexcept;  // closes this one first
  ~IngressPipeline();  // close()

  // The next batch in order; std::nullopt once the source has ended and every batch was taken.
  // An error is the error of that batch (its index is in the message); the next call goes on
  // with the following batch. ErrorCode::timeout when none arrives in time (call again);
  // failed_precondition once closed, when called from the source (it would wait for itself), or
  // when the application holds all `depth` batches, none is queued and the producer waits for a
  // tensor for the next one (none can come until one is released; the end of the stream and a
  // source's error are still reported, as the source is asked before a tensor is taken).
  Result<std::optional<IngressBatch>> next(Timeout timeout = kInfinite);

  // Stops asking the source for batches (waiting for a source call in progress to return) and
  // drops batches not yet taken. Work already submitted completes on the device; batches the
  // application holds stay valid. Idempotent. Called from the source itself, it cannot wait for
  // that call: the pipeline stops once the source returns.
  void close() noexcept;

  // The transform's input and output sizes per batch; 0 on a moved-from pipeline.
  std::uint64_t input_bytes() const;
  std::uint64_t tensor_bytes() const;

  struct State;

 private:
  std::shared_ptr<State> state_;  // shared with the producer thread, which may outlive close()
};

}  // namespace ferry
