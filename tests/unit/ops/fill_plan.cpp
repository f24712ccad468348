// Splitting a fill into dispatches of shaders/fill.comp (pure function, no GPU). The shader's
// per-word logic is replayed on the host to check the bytes each plan produces.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "vulkan/ops/fill_plan.hpp"

namespace {

using ferry::vulkan::FillDispatch;
using ferry::vulkan::FillLimits;
using ferry::vulkan::plan_fill;

// What fill.comp does to the window's words, replayed on little-endian bytes.
void replay(const FillDispatch& dispatch, std::vector<std::uint8_t>& memory) {
  for (std::uint64_t word = dispatch.begin_byte / 4; word < (dispatch.end_byte + 3ull) / 4; ++word) {
    const std::uint64_t word_byte = word * 4;
    const std::uint64_t lo = std::max<std::uint64_t>(dispatch.begin_byte, word_byte) - word_byte;
    const std::uint64_t hi = std::min<std::uint64_t>(dispatch.end_byte, word_byte + 4) - word_byte;
    for (std::uint64_t j = lo; j < hi; ++j) {
      memory.at(dispatch.window_offset + word_byte + j) =
          static_cast<std::uint8_t>(dispatch.word_pattern >> (8 * j));
    }
  }
}

void check_plan(std::uint64_t offset, std::uint64_t size, std::uint32_t pattern,
                const FillLimits& limits) {
  CAPTURE(offset);
  CAPTURE(size);
  const std::vector<FillDispatch> dispatches = plan_fill(offset, size, pattern, limits);
  REQUIRE_FALSE(dispatches.empty());

  const std::uint64_t alignment = std::max<std::uint64_t>(limits.offset_alignment, 4);
  const std::uint64_t words_end = (offset + size + 3) / 4 * 4;
  std::uint64_t expected_window = offset / alignment * alignment;
  for (const FillDispatch& dispatch : dispatches) {
    CHECK(dispatch.window_offset == expected_window);  // consecutive, disjoint windows
    CHECK(dispatch.window_offset % alignment == 0);
    CHECK(dispatch.window_size % 4 == 0);
    CHECK(dispatch.window_size <= limits.max_window_bytes);
    CHECK(dispatch.window_offset + dispatch.window_size <= words_end);
    CHECK(dispatch.begin_byte < dispatch.end_byte);
    CHECK(dispatch.end_byte <= dispatch.window_size);
    CHECK(dispatch.group_count >= 1);
    CHECK(dispatch.group_count <= limits.max_group_count);
    expected_window += dispatch.window_size;
  }
  CHECK(expected_window == words_end);

  // Bytes in range get the pattern, bytes around it keep their value. The buffer is rounded
  // up to a multiple of 16 bytes, as VulkanBuffer allocates it.
  const std::uint64_t buffer_size = (offset + size + 16) / 16 * 16;
  std::vector<std::uint8_t> memory(buffer_size, 0xEE);
  for (const FillDispatch& dispatch : dispatches) replay(dispatch, memory);
  for (std::uint64_t i = 0; i < buffer_size; ++i) {
    const bool inside = i >= offset && i < offset + size;
    const auto expected =
        inside ? static_cast<std::uint8_t>(pattern >> (8 * ((i - offset) % 4))) : std::uint8_t{0xEE};
    if (memory[i] != expected) {
      CAPTURE(i);
      CHECK(static_cast<int>(memory[i]) == static_cast<int>(expected));
      return;
    }
  }
}

}  // namespace

TEST_CASE("fill plan: one window for a small fill, pattern rotated by the offset") {
  FillLimits limits;
  const auto aligned = plan_fill(64, 8, 0x44332211u, limits);
  REQUIRE(aligned.size() == 1);
  CHECK(aligned[0].window_offset == 64);
  CHECK(aligned[0].window_size == 8);
  CHECK(aligned[0].begin_byte == 0);
  CHECK(aligned[0].end_byte == 8);
  CHECK(aligned[0].word_pattern == 0x44332211u);

  const auto odd = plan_fill(5, 3, 0x44332211u, limits);
  REQUIRE(odd.size() == 1);
  CHECK(odd[0].window_offset == 0);
  CHECK(odd[0].window_size == 8);
  CHECK(odd[0].begin_byte == 5);
  CHECK(odd[0].end_byte == 8);
  CHECK(odd[0].word_pattern == 0x33221144u);  // byte 5 (j = 1) gets pattern byte 0
}

TEST_CASE("fill plan: degenerate inputs plan nothing") {
  CHECK(plan_fill(0, 0, 1, FillLimits{}).empty());
  FillLimits tiny;
  tiny.offset_alignment = 256;
  tiny.max_window_bytes = 128;  // smaller than one aligned window
  CHECK(plan_fill(0, 4, 1, tiny).empty());
}

TEST_CASE("fill plan: large fills split at the storage-buffer range, windows under 2^31") {
  FillLimits limits;
  limits.offset_alignment = 64;
  limits.max_window_bytes = 0xFFFFFFFFu;  // NVIDIA's maxStorageBufferRange
  const std::uint64_t size = (std::uint64_t{5} << 30) + 3;
  const auto dispatches = plan_fill(7, size, 0xA1B2C3D4u, limits);
  REQUIRE(dispatches.size() == 3);
  for (const FillDispatch& dispatch : dispatches) {
    CHECK(dispatch.window_size <= (std::uint64_t{1} << 31));
    CHECK(dispatch.group_count == 65535);
  }
  CHECK(dispatches[1].window_offset == std::uint64_t{1} << 31);
  CHECK(dispatches[1].begin_byte == 0);
  CHECK(dispatches.back().window_offset + dispatches.back().end_byte == 7 + size);
}

TEST_CASE("fill plan: random offsets and sizes produce exactly the requested bytes") {
  std::mt19937_64 random(1234);
  for (const std::uint64_t alignment : {1u, 4u, 16u, 64u, 256u}) {
    FillLimits limits;
    limits.offset_alignment = alignment;
    limits.max_window_bytes = 3 * std::max<std::uint64_t>(alignment, 4) + 8;  // forces splits
    limits.max_group_count = 3;
    limits.workgroup_size = 2;
    CAPTURE(alignment);
    for (int i = 0; i < 300; ++i) {
      const std::uint64_t offset = random() % 1000;
      const std::uint64_t size = 1 + random() % 700;
      check_plan(offset, size, static_cast<std::uint32_t>(random()), limits);
    }
  }
}
