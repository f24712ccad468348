#include "vulkan/ops/fill_plan.hpp"

#include <algorithm>

#include "core/checked.hpp"

namespace ferry::vulkan {

using detail::round_down;

namespace {

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

std::vector<FillDispatch> plan_fill(std::uint64_t offset, std::uint64_t size,
                                    std::uint32_t pattern, const FillLimits& limits) {
  std::vector<FillDispatch> dispatches;
  // Word granularity at least; Vulkan guarantees the offset alignment is a power of two.
  const std::uint64_t alignment = std::max<std::uint64_t>(limits.offset_alignment, 4);
  const std::uint64_t max_window =
      round_down(std::min<std::uint64_t>(limits.max_window_bytes, std::uint64_t{1} << 31),
                 alignment);
  if (size == 0 || max_window == 0 || limits.workgroup_size == 0) return dispatches;

  const std::uint64_t end = offset + size;
  const std::uint64_t words_end = align_up(end, 4);
  // The byte at offset + i must get pattern byte i % 4. Windows start on word boundaries, so
  // byte j of any word sits at an address = j (mod 4) and must get pattern byte
  // (j - offset) mod 4: the pattern rotated left by (offset % 4) bytes, the same for every word.
  const std::uint32_t shift = static_cast<std::uint32_t>(offset % 4) * 8;
  const std::uint32_t word_pattern =
      shift == 0 ? pattern : (pattern << shift) | (pattern >> (32 - shift));

  for (std::uint64_t window = round_down(offset, alignment); window < words_end;
       window += max_window) {
    FillDispatch dispatch;
    dispatch.window_offset = window;
    dispatch.window_size = std::min(max_window, words_end - window);
    dispatch.begin_byte = static_cast<std::uint32_t>(std::max(offset, window) - window);
    dispatch.end_byte =
        static_cast<std::uint32_t>(std::min(end, window + dispatch.window_size) - window);
    dispatch.word_pattern = word_pattern;
    const std::uint64_t words = (dispatch.end_byte + 3) / 4 - dispatch.begin_byte / 4;
    const std::uint64_t groups = (words + limits.workgroup_size - 1) / limits.workgroup_size;
    dispatch.group_count = static_cast<std::uint32_t>(
        std::clamp<std::uint64_t>(groups, 1, std::max<std::uint32_t>(limits.max_group_count, 1)));
    dispatches.push_back(dispatch);
  }
  return dispatches;
}

}  // namespace ferry::vulkan
