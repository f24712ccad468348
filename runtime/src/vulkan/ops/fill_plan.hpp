// How one byte-granular fill becomes dispatches of shaders/fill.comp: a pure function,
// unit-tested without a GPU (tests/unit/test_fill_plan.cpp).
//
// The shader sees the destination through a storage-buffer window. A window must start at a
// multiple of minStorageBufferOffsetAlignment and be at most maxStorageBufferRange bytes (and
// under 2^31, so byte offsets fit the shader's 32-bit push constants), so a large fill becomes
// several dispatches over consecutive, disjoint windows. Windows cover whole 32-bit words; the
// buffer behind them is allocated with its size rounded up to a multiple of 16, so the last
// word is always in bounds.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry::vulkan {

struct FillLimits {
  std::uint64_t offset_alignment = 16;         // minStorageBufferOffsetAlignment
  std::uint64_t max_window_bytes = 1u << 27;   // maxStorageBufferRange
  std::uint32_t max_group_count = 65535;       // maxComputeWorkGroupCount[0]
  std::uint32_t workgroup_size = 256;          // the shader's local_size_x
};

struct FillDispatch {
  std::uint64_t window_offset = 0;  // descriptor offset in the buffer
  std::uint64_t window_size = 0;    // descriptor range, a multiple of 4
  std::uint32_t begin_byte = 0;     // fill range within the window
  std::uint32_t end_byte = 0;
  std::uint32_t word_pattern = 0;   // the pattern as stored to whole words of the window
  std::uint32_t group_count = 0;    // workgroups to dispatch (grid-stride loop covers the rest)
};

// Empty only for size 0 or limits too small to hold one aligned window.
std::vector<FillDispatch> plan_fill(std::uint64_t offset, std::uint64_t size,
                                    std::uint32_t pattern, const FillLimits& limits);

}  // namespace ferry::vulkan
