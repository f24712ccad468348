// Chunked copies between pageable host memory and device buffers through a staging pool.
#include "ferry/transfer.hpp"

#include <algorithm>
#include <deque>
#include <string>

#include "core/host_workers.hpp"
#include "core/state.hpp"

namespace ferry {
namespace {

struct Plan {
  std::uint64_t chunk = 0;
  std::uint64_t count = 0;
  unsigned threads = 1;
};

// The caller's waits and signals, checked before anything is submitted, so that an argument
// error leaves every timeline as it was (as Queue::submit does).
Status validate_sync(const Queue& queue, const SubmitSync& sync, const char* call) {
  for (const TimelinePoint& point : sync.wait) {
    if (!point.timeline) return Status(ErrorCode::invalid_argument, std::string(call) + ": a wait names no timeline");
    if (point.timeline.state()->device != queue.state()->core) {
      return Status(ErrorCode::invalid_argument,
                    std::string(call) + ": a wait names a timeline of another device");
    }
  }
  for (const TimelinePoint& point : sync.signal) {
    if (!point.timeline) return Status(ErrorCode::invalid_argument, std::string(call) + ": a signal names no timeline");
    if (point.timeline.state()->device != queue.state()->core) {
      return Status(ErrorCode::invalid_argument,
                    std::string(call) + ": a signal names a timeline of another device");
    }
    if (point.value <= point.timeline.submitted_value()) {
      return Status(ErrorCode::invalid_argument,
                    std::string(call) + ": signal value " + std::to_string(point.value) +
                        " must exceed " + std::to_string(point.timeline.submitted_value()) +
                        ", the highest value already submitted for that timeline");
    }
  }
  return Status();
}

std::string chunk_context(const char* call, std::uint64_t index, std::uint64_t count) {
  return std::string(call) + ": chunk " + std::to_string(index + 1) + " of " + std::to_string(count);
}

// Everything upload() and download() check before submitting anything: a failure here leaves
// every timeline as it was.
Status validate(const Queue& queue, const StagingPool& pool, const BufferRef& device_side,
                std::uint64_t offset, std::uint64_t bytes, MemoryKind pool_kind,
                const SubmitSync& sync, const char* call, const char* role) {
  if (!queue) return Status(ErrorCode::released, std::string(call) + ": no queue");
  if (!pool) return Status(ErrorCode::released, std::string(call) + ": no staging pool");
  if (bytes == 0) return Status(ErrorCode::invalid_argument, std::string(call) + ": size must be > 0");
  if (pool.options().kind != pool_kind) {
    return Status(ErrorCode::invalid_argument,
                  std::string(call) + ": needs a " + std::string(to_string(pool_kind)) +
                      " staging pool, got a " + std::string(to_string(pool.options().kind)) + " one");
  }
  if (!device_side.buffer) {
    return Status(ErrorCode::released,
                  std::string(call) + ": the device-side " + device_side.what + " was released");
  }
  if (pool.state()->device != device_side.buffer->device) {
    return Status(ErrorCode::invalid_argument,
                  std::string(call) + ": the staging pool and the buffer belong to different devices");
  }
  if (!detail::range_within(offset, bytes, device_side.size)) {
    return Status(ErrorCode::out_of_range, std::string(call) + ": " + role + " range " +
                                               detail::describe_range(offset, bytes) +
                                               " is outside the " +
                                               std::to_string(device_side.size) + "-byte " +
                                               device_side.what);
  }
  return validate_sync(queue, sync, call);
}

Plan plan(const StagingPool& pool, std::uint64_t bytes, const TransferOptions& options) {
  Plan p;
  // slab_bytes is a multiple of kStagingAlignment (> 0), so the clamp's bounds are ordered.
  const std::uint64_t slab = std::max(pool.options().slab_bytes, kStagingAlignment);
  p.chunk = std::clamp<std::uint64_t>(options.chunk_bytes, kStagingAlignment, slab);
  // At least kMinChunks chunks (of at least kMinChunk bytes) so the host memcpy of one overlaps
  // the DMA of another even for transfers of a few chunk sizes.
  constexpr std::uint64_t kMinChunks = 4;
  constexpr std::uint64_t kMinChunk = 2ull << 20;
  const std::uint64_t spread = detail::pieces_of(bytes, kMinChunks);
  if (spread < p.chunk) {
    p.chunk = std::max(std::min(p.chunk, kMinChunk),
                       detail::pieces_of(spread, kStagingAlignment) * kStagingAlignment);
  }
  p.count = detail::pieces_of(bytes, p.chunk);
  const unsigned available = detail::host_worker_count() + 1;
  p.threads = options.host_threads == 0 ? available : std::min(options.host_threads, available);
  return p;
}

}  // namespace

Result<TimelinePoint> upload(const Queue& queue, const StagingPool& pool,
                             std::span<const std::byte> src, const BufferRef& dst,
                             std::uint64_t dst_offset, const SubmitSync& sync,
                             const TransferOptions& options) {
  static constexpr const char* kCall = "ferry::upload";
  FERRY_RETURN_IF_ERROR(validate(queue, pool, dst, dst_offset, src.size(), MemoryKind::host_upload,
                                 sync, kCall, "destination"));
  const Plan p = plan(pool, src.size(), options);
  detail::DeviceTrace* const trace = queue.state()->core->trace.get();
  detail::TraceScope traced(trace, "ferry::upload");
  traced.arg("bytes", static_cast<std::int64_t>(src.size()));
  traced.arg("chunks", static_cast<std::int64_t>(p.count));
  TimelinePoint last;
  for (std::uint64_t i = 0; i < p.count; ++i) {
    const std::uint64_t begin = i * p.chunk;
    const std::uint64_t length = std::min(p.chunk, src.size() - begin);
    const bool final_chunk = i + 1 == p.count;
    auto step = [&]() -> Status {
      detail::TraceScope chunk(trace, "upload chunk");
      chunk.arg("chunk", static_cast<std::int64_t>(i));
      FERRY_ASSIGN_OR_RETURN(Lease lease, pool.acquire(length, options.acquire_timeout));
      detail::parallel_memcpy(lease.data().data(), src.data() + begin, length, p.threads, trace,
                              detail::staging_stores(p.count > 1));
      CommandList commands;
      FERRY_RETURN_IF_ERROR(commands.copy(lease, 0, dst, dst_offset + begin, length));
      SubmitSync chunk_sync;
      if (i == 0) chunk_sync.wait = sync.wait;  // later chunks follow it in queue order
      if (final_chunk) chunk_sync.signal = sync.signal;
      FERRY_ASSIGN_OR_RETURN(last, queue.submit(std::move(commands), chunk_sync));
      return Status();  // the lease returns to the pool once the copy has completed
    };
    if (Status status = step(); !status.ok()) {
      status.with_context(chunk_context(kCall, i, p.count));
      // Once part of the transfer was submitted, whoever waits for its signals must learn that
      // it failed; before that, nothing changed (the signals stay free to use).
      if (i > 0) detail::fail_points(sync.signal, status);
      return status;
    }
  }
  return last;
}

Status download(const Queue& queue, const StagingPool& pool, const BufferRef& src,
                std::uint64_t src_offset, std::span<std::byte> dst, const SubmitSync& sync,
                const TransferOptions& options) {
  static constexpr const char* kCall = "ferry::download";
  FERRY_RETURN_IF_ERROR(validate(queue, pool, src, src_offset, dst.size(),
                                 MemoryKind::host_readback, sync, kCall, "source"));
  const Plan p = plan(pool, dst.size(), options);
  detail::DeviceTrace* const trace = queue.state()->core->trace.get();
  detail::TraceScope traced(trace, "ferry::download");
  traced.arg("bytes", static_cast<std::int64_t>(dst.size()));
  traced.arg("chunks", static_cast<std::int64_t>(p.count));

  struct InFlight {
    Lease lease;
    TimelinePoint done;
    std::uint64_t begin = 0;
  };
  std::deque<InFlight> in_flight;
  // Copies the oldest chunk out once its DMA is done and returns its lease to the pool.
  auto drain_oldest = [&]() -> Status {
    InFlight& oldest = in_flight.front();
    detail::TraceScope chunk(trace, "download chunk: copy out");
    chunk.arg("offset", static_cast<std::int64_t>(oldest.begin));
    FERRY_RETURN_IF_ERROR(oldest.done.wait());
    detail::parallel_memcpy(dst.data() + oldest.begin, oldest.lease.data().data(),
                            oldest.lease.size(), p.threads, trace);
    in_flight.pop_front();
    return Status();
  };

  for (std::uint64_t i = 0; i < p.count; ++i) {
    const std::uint64_t begin = i * p.chunk;
    const std::uint64_t length = std::min(p.chunk, dst.size() - begin);
    const bool final_chunk = i + 1 == p.count;
    auto step = [&]() -> Status {
      detail::TraceScope chunk(trace, "download chunk: submit");
      chunk.arg("chunk", static_cast<std::int64_t>(i));
      // Take a lease without blocking while we hold chunks ourselves: the space we wait for may
      // be our own, so free the oldest first.
      Result<Lease> lease = pool.try_acquire(length);
      while (!lease.ok() && lease.status().code() == ErrorCode::timeout && !in_flight.empty()) {
        FERRY_RETURN_IF_ERROR(drain_oldest());
        lease = pool.try_acquire(length);
      }
      if (!lease.ok() && lease.status().code() == ErrorCode::timeout) {
        lease = pool.acquire(length, options.acquire_timeout);
      }
      if (!lease.ok()) return lease.status();
      CommandList commands;
      FERRY_RETURN_IF_ERROR(commands.copy(src, src_offset + begin, *lease, 0, length));
      SubmitSync chunk_sync;
      if (i == 0) chunk_sync.wait = sync.wait;
      if (final_chunk) chunk_sync.signal = sync.signal;
      FERRY_ASSIGN_OR_RETURN(TimelinePoint done, queue.submit(std::move(commands), chunk_sync));
      in_flight.push_back({std::move(lease).value(), std::move(done), begin});
      return Status();
    };
    if (Status status = step(); !status.ok()) {
      status.with_context(chunk_context(kCall, i, p.count));
      // Once part of the transfer was submitted, whoever waits for its signals must learn that
      // it failed; before that, nothing changed (the signals stay free to use).
      if (i > 0) detail::fail_points(sync.signal, status);
      return status;
    }
  }
  while (!in_flight.empty()) {
    if (Status status = drain_oldest(); !status.ok()) {
      status.with_context(std::string(kCall) + ": copying a chunk out");
      return status;
    }
  }
  return Status();
}

}  // namespace ferry
