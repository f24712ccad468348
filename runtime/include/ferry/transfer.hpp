// Copies between ordinary (pageable) host memory and device buffers, through a staging pool.
//
// The data moves in chunks: while the copy engine moves chunk i, host threads copy chunk i+1
// into the next lease, so the host memcpy and the DMA overlap. For memory that is already
// pinned (a Lease, a host buffer) record a CommandList::copy instead: it is one DMA, no memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ferry/queue.hpp"
#include "ferry/staging_pool.hpp"
#include "ferry/status.hpp"
#include "ferry/timeline.hpp"

namespace ferry {

struct TransferOptions {
  std::uint64_t chunk_bytes = 8ull << 20;  // clamped to the pool's slab size
  unsigned host_threads = 0;               // threads for the host memcpy; 0 picks automatically
  Timeout acquire_timeout = kInfinite;     // per chunk, waiting for pool space
};

// Errors of upload() and download(): an argument error returns before anything is submitted and
// leaves the timelines in sync.signal untouched; a failure after part of the transfer was
// submitted (no pool space in time, a failed submission) fails those signals too, so that whoever
// waits for them learns it. Chunks already submitted complete; their leases return to the pool.

// Copies src into dst[dst_offset, +src.size()) on `queue` (normally the upload queue). The first
// chunk waits for sync.wait; sync.signal is set when the last chunk has landed. Returns once
// every chunk is in the pool and submitted (src may be reused then), with the point at which
// dst holds the data. The pool must be a host_upload pool of the queue's device.
Result<TimelinePoint> upload(const Queue& queue, const StagingPool& pool,
                             std::span<const std::byte> src, const BufferRef& dst,
                             std::uint64_t dst_offset, const SubmitSync& sync = {},
                             const TransferOptions& options = {});

// Copies src[src_offset, +dst.size()) into dst on `queue` (normally the download queue) and
// returns when dst holds the data. The first chunk waits for sync.wait; sync.signal is set when
// the last chunk's DMA has completed. The pool must be a host_readback pool of the same device.
Status download(const Queue& queue, const StagingPool& pool, const BufferRef& src,
                std::uint64_t src_offset, std::span<std::byte> dst, const SubmitSync& sync = {},
                const TransferOptions& options = {});

}  // namespace ferry
