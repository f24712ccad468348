// Splitting a host<->device copy into dispatches of shaders/copy.comp (pure function, no GPU).
// The shader's grid-stride loop is replayed on the host over each plan's windows, and the copy
// engine's tail after it, to check that every byte lands once and nothing around it is touched.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "vulkan/copy_plan.hpp"

namespace {

using ferry::vulkan::CopyDispatch;
using ferry::vulkan::CopyLimits;
using ferry::vulkan::CopyPlan;
using ferry::vulkan::plan_shader_copy;

constexpr std::uint64_t kBlock = 16;

// What copy.comp does, invocation by invocation, with the shader's loop bounds; counts the
// writes to each destination byte.
void replay(const CopyDispatch& d, const CopyLimits& limits, const std::vector<std::uint8_t>& src,
            std::vector<std::uint8_t>& dst, std::vector<int>& writes) {
  const std::uint64_t stride = std::uint64_t{d.group_count} * limits.workgroup_size;
  auto copy_block = [&](std::uint64_t i) {
    REQUIRE(i < d.count);
    const std::uint64_t from = d.src_window_offset + (d.src_first + i) * kBlock;
    const std::uint64_t to = d.dst_window_offset + (d.dst_first + i) * kBlock;
    // Inside each window, as the descriptor ranges bound it.
    REQUIRE(from + kBlock <= d.src_window_offset + d.src_window_size);
    REQUIRE(to + kBlock <= d.dst_window_offset + d.dst_window_size);
    for (std::uint64_t b = 0; b < kBlock; ++b) {
      dst.at(to + b) = src.at(from + b);
      ++writes.at(to + b);
    }
  };
  for (std::uint64_t id = 0; id < stride; ++id) {
    std::uint64_t i = id;
    for (; i + (limits.unroll - 1) * stride < d.count; i += limits.unroll * stride) {
      for (std::uint64_t k = 0; k < limits.unroll; ++k) copy_block(i + k * stride);
    }
    for (; i < d.count; i += stride) copy_block(i);
  }
}

void check_plan(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t size,
                const CopyLimits& limits, std::mt19937_64& rng) {
  CAPTURE(src_offset);
  CAPTURE(dst_offset);
  CAPTURE(size);
  const CopyPlan plan = plan_shader_copy(src_offset, dst_offset, size, limits);
  REQUIRE_FALSE(plan.dispatches.empty());
  CHECK(plan.tail_offset == size / kBlock * kBlock);

  const std::uint64_t alignment = std::max<std::uint64_t>(limits.offset_alignment, kBlock);
  for (const CopyDispatch& d : plan.dispatches) {
    CHECK(d.src_window_offset % alignment == 0);
    CHECK(d.dst_window_offset % alignment == 0);
    CHECK(d.src_window_size <= limits.max_window_bytes);
    CHECK(d.dst_window_size <= limits.max_window_bytes);
    CHECK(d.src_window_size % kBlock == 0);
    CHECK(d.dst_window_size % kBlock == 0);
    CHECK(d.count >= 1);
    CHECK(d.group_count >= 1);
    CHECK(d.group_count <= limits.max_group_count);
  }

  // Buffers end right after the copy (rounded to 16 bytes, as VulkanBuffer allocates them).
  const std::uint64_t src_size = (src_offset + size + kBlock - 1) / kBlock * kBlock;
  const std::uint64_t dst_size = (dst_offset + size + kBlock - 1) / kBlock * kBlock;
  std::vector<std::uint8_t> src(src_size);
  for (auto& byte : src) byte = static_cast<std::uint8_t>(rng());
  std::vector<std::uint8_t> dst(dst_size, 0xEE);
  std::vector<int> writes(dst_size, 0);
  for (const CopyDispatch& d : plan.dispatches) {
    REQUIRE(d.src_window_offset + d.src_window_size <= src_size);
    REQUIRE(d.dst_window_offset + d.dst_window_size <= dst_size);
    replay(d, limits, src, dst, writes);
  }
  for (std::uint64_t b = plan.tail_offset; b < size; ++b) {  // the copy engine's part
    dst[dst_offset + b] = src[src_offset + b];
    ++writes[dst_offset + b];
  }
  for (std::uint64_t i = 0; i < dst_size; ++i) {
    const bool inside = i >= dst_offset && i < dst_offset + size;
    const int expected_writes = inside ? 1 : 0;
    const std::uint8_t expected = inside ? src[src_offset + (i - dst_offset)] : std::uint8_t{0xEE};
    if (writes[i] != expected_writes || dst[i] != expected) {
      CAPTURE(i);
      CHECK(writes[i] == expected_writes);
      CHECK(static_cast<int>(dst[i]) == static_cast<int>(expected));
      return;
    }
  }
}

}  // namespace

TEST_CASE("copy plan: one dispatch for a copy that fits a window; the tail to the engine") {
  const CopyLimits limits;
  const CopyPlan plan = plan_shader_copy(4096, 160, 1000, limits);
  REQUIRE(plan.dispatches.size() == 1);
  const CopyDispatch& d = plan.dispatches[0];
  CHECK(d.src_window_offset == 4096);
  CHECK(d.src_first == 0);
  CHECK(d.dst_window_offset == 160);
  CHECK(d.dst_first == 0);
  CHECK(d.count == 62);  // 992 bytes
  CHECK(d.group_count == 1);
  CHECK(plan.tail_offset == 992);
}

TEST_CASE("copy plan: the shader refuses offsets off 16 bytes and copies under a block") {
  const CopyLimits limits;
  CHECK(plan_shader_copy(8, 0, 4096, limits).dispatches.empty());
  CHECK(plan_shader_copy(0, 4, 4096, limits).dispatches.empty());
  CHECK(plan_shader_copy(0, 0, 15, limits).dispatches.empty());
  CHECK(plan_shader_copy(0, 0, 0, limits).dispatches.empty());
  CopyLimits tiny = limits;
  tiny.max_window_bytes = 16;  // no room for an aligned window and a block
  CHECK(plan_shader_copy(0, 0, 4096, tiny).dispatches.empty());
}

TEST_CASE("copy plan: the group count follows the work and stops at the cap") {
  CopyLimits limits;
  limits.max_window_bytes = std::uint64_t{1} << 32;
  const CopyPlan small = plan_shader_copy(0, 0, 16 * 1024 + 16, limits);
  REQUIRE(small.dispatches.size() == 1);
  CHECK(small.dispatches[0].group_count == 2);  // 1025 blocks, 1024 per group
  limits.max_group_count = 132;
  const CopyPlan big = plan_shader_copy(0, 0, std::uint64_t{1} << 30, limits);
  REQUIRE(big.dispatches.size() == 1);  // 1 GiB in one window of at most 2 GiB
  CHECK(big.dispatches[0].group_count == 132);
  CHECK(big.dispatches[0].count == (std::uint64_t{1} << 30) / 16);
}

TEST_CASE("copy plan: FERRY_VULKAN_COPIES settings") {
  using ferry::vulkan::parse_copy_settings;
  REQUIRE(parse_copy_settings("engine").ok());
  CHECK_FALSE(parse_copy_settings("engine")->shader);
  REQUIRE(parse_copy_settings("shader").ok());
  CHECK(parse_copy_settings("shader")->shader);
  CHECK(parse_copy_settings("shader")->group_cap == 0);
  REQUIRE(parse_copy_settings("shader,groups=264").ok());
  CHECK(parse_copy_settings("shader,groups=264")->group_cap == 264);
  for (const char* bad : {"", "Shader", "dma", "engine,groups=4", "shader,", "shader,groups=",
                          "shader,groups=0", "shader,groups=65536", "shader,groups=12x",
                          "shader,blocks=4", "shader,groups=1234567"}) {
    CAPTURE(bad);
    const auto parsed = parse_copy_settings(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == ferry::ErrorCode::invalid_argument);
    CHECK(parsed.status().message().find("FERRY_VULKAN_COPIES") != std::string::npos);
  }
}

TEST_CASE("copy plan: random copies over small windows land every byte once") {
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 200; ++round) {
    CopyLimits limits;
    limits.offset_alignment = std::uint64_t{16} << (rng() % 5);  // 16 .. 256
    limits.max_window_bytes = 512 + rng() % 4096;                // not a multiple of anything
    limits.max_group_count = 1 + static_cast<std::uint32_t>(rng() % 5);
    limits.workgroup_size = 1 + static_cast<std::uint32_t>(rng() % 8);
    limits.unroll = 1 + static_cast<std::uint32_t>(rng() % 4);
    const std::uint64_t src_offset = 16 * (rng() % 300);
    const std::uint64_t dst_offset = 16 * (rng() % 300);
    const std::uint64_t size = 16 + rng() % 20000;
    check_plan(src_offset, dst_offset, size, limits, rng);
  }
}
