// Grid size for the backend's grid-stride kernels.
#pragma once

#include <cstdint>

#include "launch.hpp"

namespace ferry::cuda {

// Enough blocks for one work item per thread, at least one, at most max_blocks (the device's
// SM count times a few: the kernels are grid-stride loops bound by memory bandwidth).
inline unsigned grid_blocks(std::uint64_t work_items, unsigned max_blocks) {
  const std::uint64_t wanted = (work_items + kKernelBlockSize - 1) / kKernelBlockSize;
  const std::uint64_t limit = max_blocks == 0 ? 1 : max_blocks;
  if (wanted == 0) return 1;
  return static_cast<unsigned>(wanted < limit ? wanted : limit);
}

}  // namespace ferry::cuda
