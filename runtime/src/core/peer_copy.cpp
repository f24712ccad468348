// copy_between_devices: validation, then the path: one queue copy on one device, the backend's
// device-to-device copy (BackendDevice::copy_from_device), or chunks staged through host memory.
#include "ferry/peer_copy.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/checked.hpp"
#include "core/describe.hpp"
#include "core/host_workers.hpp"
#include "core/op_record.hpp"
#include "core/state.hpp"
#include "ferry/device.hpp"

namespace ferry {
namespace {

constexpr const char* kCall = "ferry::copy_between_devices";

Status invalid(const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(kCall) + ": " + what);
}

// A pool for the host-staged path: the one given (checked), or two chunks made for the call.
Result<StagingPool> staging_pool(const Queue& queue, const StagingPool& given, MemoryKind kind,
                                 std::uint64_t chunk, const char* role) {
  if (given) {
    if (given.options().kind != kind) {
      return invalid(std::string(role) + " must be a " + std::string(to_string(kind)) +
                     " pool, not " + std::string(to_string(given.options().kind)));
    }
    if (given.state()->device != queue.state()->core) {
      return invalid(std::string(role) + " belongs to another device than its queue");
    }
    return StagingPool(given.state());
  }
  StagingPoolOptions options;
  options.kind = kind;
  options.slab_bytes = chunk;
  options.max_slabs = 2;
  options.reserved_slabs = 2;
  auto pool = detail::create_pool(queue.state(), options, kCall);
  if (!pool.ok()) return pool.status().with_context(std::string("the ") + role);
  return StagingPool(std::move(pool).value());
}

// Chunks through host memory: each downloaded into a source lease (or read in place from a host
// buffer), copied into a target lease (or straight into a host buffer), uploaded without waiting,
// so the next chunk's download overlaps this one's upload.
Status copy_through_host(const Queue& source, const BufferRef& src, std::uint64_t src_offset,
                         const Queue& target, const BufferRef& dst, std::uint64_t dst_offset,
                         std::uint64_t size, const PeerCopyOptions& options) {
  std::byte* const src_host = src.buffer->impl->host_data();
  std::byte* const dst_host = dst.buffer->impl->host_data();
  // Pools made for the call hold two chunks, of at most the copy's size.
  const std::uint64_t chunk = detail::round_down(
      std::clamp<std::uint64_t>(options.chunk_bytes, kStagingAlignment,
                                std::max<std::uint64_t>(size, kStagingAlignment) + kStagingAlignment),
      kStagingAlignment);
  StagingPool source_pool, target_pool;
  std::uint64_t step = std::min(chunk, size);
  if (src_host == nullptr) {
    FERRY_ASSIGN_OR_RETURN(source_pool, staging_pool(source, options.source_pool,
                                                     MemoryKind::host_readback, chunk, "source_pool"));
    step = std::min(step, source_pool.options().slab_bytes);
  }
  if (dst_host == nullptr) {
    FERRY_ASSIGN_OR_RETURN(target_pool, staging_pool(target, options.target_pool,
                                                     MemoryKind::host_upload, chunk, "target_pool"));
    step = std::min(step, target_pool.options().slab_bytes);
  }
  const unsigned threads = detail::host_worker_count() + 1;
  TimelinePoint uploaded;
  for (std::uint64_t done = 0; done < size; done += step) {
    const std::uint64_t n = std::min(step, size - done);
    auto one_chunk = [&]() -> Status {
      const std::byte* from = nullptr;
      Lease downloaded;
      if (src_host != nullptr) {
        from = src_host + src.base + src_offset + done;
      } else {
        FERRY_ASSIGN_OR_RETURN(downloaded, source_pool.acquire(n));
        CommandList commands;
        FERRY_RETURN_IF_ERROR(commands.copy(src, src_offset + done, downloaded, 0, n));
        FERRY_ASSIGN_OR_RETURN(TimelinePoint point, source.submit(std::move(commands)));
        FERRY_RETURN_IF_ERROR(point.wait());
        from = downloaded.data().data();
      }
      if (dst_host != nullptr) {
        // The previous chunk's upload is not in flight here: host targets are written in place.
        detail::parallel_memcpy(dst_host + dst.base + dst_offset + done, from, n, threads,
                                target.state()->core->trace.get());
        return Status();
      }
      FERRY_ASSIGN_OR_RETURN(Lease staged, target_pool.acquire(n));
      detail::parallel_memcpy(staged.data().data(), from, n, threads,
                              target.state()->core->trace.get(), detail::staging_stores(false));
      CommandList commands;
      FERRY_RETURN_IF_ERROR(commands.copy(staged, 0, dst, dst_offset + done, n));
      FERRY_ASSIGN_OR_RETURN(uploaded, target.submit(std::move(commands)));
      return Status();  // the leases return to their pools once their copies have completed
    };
    if (Status status = one_chunk(); !status.ok()) {
      if (uploaded.timeline) (void)uploaded.wait();  // nothing of the call still runs after it
      return status.with_context("bytes " + detail::describe_range(done, n) + " of " +
                                 std::to_string(size) + ", staged through host memory");
    }
  }
  return uploaded.timeline ? uploaded.wait() : Status();
}

}  // namespace

std::string_view to_string(PeerCopyPath path) noexcept {
  switch (path) {
    case PeerCopyPath::same_device: return "same_device";
    case PeerCopyPath::direct: return "direct";
    case PeerCopyPath::host_staged: return "host_staged";
  }
  return "unknown path";
}

Result<PeerCopyPath> copy_between_devices(const Queue& source, const BufferRef& src,
                                          std::uint64_t src_offset, const Queue& target,
                                          const BufferRef& dst, std::uint64_t dst_offset,
                                          std::uint64_t size, const PeerCopyOptions& options) {
  if (!source) return Status(ErrorCode::released, std::string(kCall) + ": no source queue");
  if (!target) return Status(ErrorCode::released, std::string(kCall) + ": no target queue");
  if (size == 0) return invalid("size must be > 0");
  FERRY_RETURN_IF_ERROR(detail::check_range(src, kCall, "source", src_offset, size));
  FERRY_RETURN_IF_ERROR(detail::check_range(dst, kCall, "target", dst_offset, size));
  detail::DeviceCore& source_core = *source.state()->core;
  detail::DeviceCore& target_core = *target.state()->core;
  if (src.buffer->device.get() != &source_core) {
    return invalid("the source " + std::string(src.what) + " belongs to another device than the source queue");
  }
  if (dst.buffer->device.get() != &target_core) {
    return invalid("the target " + std::string(dst.what) + " belongs to another device than the target queue");
  }
  FERRY_RETURN_IF_ERROR(detail::check_open(source_core, kCall));
  FERRY_RETURN_IF_ERROR(detail::check_open(target_core, kCall));
  const std::uint64_t src_abs = src.base + src_offset, dst_abs = dst.base + dst_offset;
  if (src.buffer == dst.buffer && detail::ranges_overlap(src_abs, size, dst_abs, size)) {
    return invalid("source " + detail::describe_range(src_abs, size) + " and target " +
                   detail::describe_range(dst_abs, size) + " overlap in the same buffer");
  }

  if (&source_core == &target_core) {
    CommandList commands;
    FERRY_RETURN_IF_ERROR(commands.copy(src, src_offset, dst, dst_offset, size).with_context(kCall));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint point, target.submit(std::move(commands)));
    FERRY_RETURN_IF_ERROR(point.wait().with_context(kCall));
    return PeerCopyPath::same_device;
  }
  if (options.allow_direct) {
    Result<bool> direct = target_core.impl->copy_from_device(
        *source_core.impl, *src.buffer->impl, src_abs, *dst.buffer->impl, dst_abs, size);
    if (!direct.ok()) {
      return direct.status().with_context(std::string(kCall) + ": " + detail::describe_bytes(size) +
                                          " device to device");
    }
    if (*direct) return PeerCopyPath::direct;
  }
  Status staged = copy_through_host(source, src, src_offset, target, dst, dst_offset, size, options);
  if (!staged.ok()) return staged.with_context(kCall);
  return PeerCopyPath::host_staged;
}

}  // namespace ferry
