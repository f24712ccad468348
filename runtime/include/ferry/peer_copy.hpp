// Copies between devices: a buffer of one device into a buffer of another, of any backends.
#pragma once

#include <cstdint>
#include <string_view>

#include "ferry/queue.hpp"
#include "ferry/staging_pool.hpp"
#include "ferry/status.hpp"

namespace ferry {

// How copy_between_devices moved the data.
enum class PeerCopyPath : std::uint8_t {
  same_device,  // both buffers on one device: one copy on the target queue
  direct,       // device to device by the backend (CUDA: cudaMemcpyPeerAsync; over NVLink or
                // PCIe where the two GPUs have peer access, else staged by the driver)
  host_staged,  // through host memory: chunks downloaded on the source queue into the source
                // pool, copied on the host into the target pool, uploaded on the target queue
                // (a chunk's download overlaps the previous chunk's upload)
};

std::string_view to_string(PeerCopyPath path) noexcept;

struct PeerCopyOptions {
  std::uint64_t chunk_bytes = 8ull << 20;  // host_staged chunks (clamped to the pools' slabs)
  // For host_staged: a host_readback pool of the source device and a host_upload pool of the
  // target device. Empty: pools of two chunks are made for the call (pinned memory takes
  // milliseconds to make; pass pools when copying often).
  StagingPool source_pool, target_pool;
  bool allow_direct = true;  // false: host_staged even where a direct path exists (benchmarks)
};

// Copies src[src_offset, +size) into dst[dst_offset, +size) and returns, with the path taken,
// once dst holds the data. `source` is a queue of src's device (normally its download queue),
// `target` one of dst's device (normally its upload queue); they may be of one device. The
// copy is not ordered with the queues' other work: the work writing src must have completed,
// and nothing may use dst until the call returns. Host buffers and leases are read or written in
// place. Errors (nothing copied when an argument is wrong; on a failure half way dst holds part
// of the data): size 0, a range outside a buffer, memory of another device than its queue's,
// overlapping ranges of one buffer, released objects, closed devices, pools of the wrong kind
// or device.
Result<PeerCopyPath> copy_between_devices(const Queue& source, const BufferRef& src,
                                          std::uint64_t src_offset, const Queue& target,
                                          const BufferRef& dst, std::uint64_t dst_offset,
                                          std::uint64_t size, const PeerCopyOptions& options = {});

}  // namespace ferry
