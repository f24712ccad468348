// fill: a byte pattern into any byte range, as a compute kernel on the compute queue (the Vulkan
// shader / CUDA kernel path; the CPU reference backend defines the result).
#pragma once

#include <cstdint>

#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry {

// Records a fill of [offset, offset + size) of dst with the little-endian 32-bit `pattern`
// repeated: the byte at offset + i gets byte (i % 4) of the pattern. Any byte offset and size.
// Runs on the compute queue. Errors (nothing recorded): size 0, a range outside dst, released
// memory, memory of another device.
Status fill(CommandList& commands, const BufferRef& dst, std::uint64_t offset, std::uint64_t size,
            std::uint32_t pattern);

}  // namespace ferry
