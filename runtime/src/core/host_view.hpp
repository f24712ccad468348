// The host's view of memory named by a BufferRef (a Lease, a host_upload or host_readback
// Buffer): for the library's own calls that read a pinned batch or stream on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

// memory[offset, end of the range): invalid_argument for device memory, released for released
// memory, out_of_range for an offset past the end.
Result<std::span<std::byte>> host_view(const BufferRef& memory, std::uint64_t offset = 0);

}  // namespace ferry::detail
