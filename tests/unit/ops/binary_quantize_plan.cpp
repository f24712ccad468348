// Splitting a binary_quantize into dispatches of shaders/binary_quantize.comp (pure function, no
// GPU). The shader's addressing is replayed on the host, work item by work item, on its element
// path and its vector path, to check that every code word is written once, from the right row's
// elements and the right thresholds, inside the bound windows, with aligned vectors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "vulkan/ops/binary_quantize_plan.hpp"

namespace {

using ferry::ElementType;
using ferry::ErrorCode;
using ferry::vulkan::BinaryQuantizeDispatch;
using ferry::vulkan::BinaryQuantizeLimits;

// A binary_quantize as the plan sees it: the op's arguments (ops/binary_quantize.hpp) and where
// its input, codes and thresholds lie in their buffers.
struct Planned : ferry::ops::BinaryQuantizeArgs {
  std::uint64_t input_offset = 0;
  std::uint64_t codes_offset = 0;
  std::uint64_t threshold_offset = 0;
};

ferry::Result<std::vector<BinaryQuantizeDispatch>> plan(const Planned& command,
                                                        const BinaryQuantizeLimits& limits) {
  return ferry::vulkan::plan_binary_quantize(command, command.input_offset, command.codes_offset,
                                             command.threshold_offset, limits);
}

struct Replay {
  std::size_t dispatches = 0;
  std::size_t vector_items = 0;  // items that took the vector loads
};

// Plans `command`, replays every work item of every dispatch as the shader computes it, and checks
// it against the definition; returns what it saw.
Replay check_plan(const Planned& command, const BinaryQuantizeLimits& limits) {
  CAPTURE(command.rows);
  CAPTURE(command.dims);
  CAPTURE(static_cast<int>(command.input_type));
  CAPTURE(command.row_stride);
  CAPTURE(command.input_offset);
  CAPTURE(command.codes_offset);
  CAPTURE(command.threshold_offset);
  CAPTURE(command.has_thresholds);
  CAPTURE(limits.offset_alignment);
  CAPTURE(limits.max_window_bytes);
  const auto planned = plan(command, limits);
  REQUIRE_MESSAGE(planned.ok(), planned.status().to_string());
  const std::uint64_t element = ferry::element_size(command.input_type);
  const std::uint32_t words_per_row = command.words_per_row();
  const std::uint64_t alignment = std::max<std::uint64_t>(limits.offset_alignment, 16);
  std::vector<int> written(std::uint64_t{command.rows} * words_per_row, 0);
  Replay replay;
  std::uint32_t next_row = 0;
  for (const BinaryQuantizeDispatch& d : *planned) {
    ++replay.dispatches;
    const auto& push = d.push;
    CHECK(d.first_row == next_row);
    next_row += push.rows;
    CHECK(push.rows >= 1);
    CHECK(push.dims == command.dims);
    CHECK(push.words_per_row == words_per_row);
    CHECK(push.has_thresholds == (command.has_thresholds ? 1u : 0u));
    CHECK(d.group_count >= 1);
    CHECK(d.group_count <= limits.max_group_count);
    CHECK(std::uint64_t{d.group_count} * limits.workgroup_size <
          std::uint64_t{push.rows} * words_per_row + limits.workgroup_size);
    // Windows: aligned, within the limit, the input one whole words.
    for (const auto& [offset, size] : {std::pair{d.src_window_offset, d.src_window_size},
                                      std::pair{d.dst_window_offset, d.dst_window_size}}) {
      CHECK(offset % alignment == 0);
      CHECK(size <= limits.max_window_bytes);
      CHECK(size <= (std::uint64_t{1} << 31));
    }
    CHECK(d.src_window_size % 4 == 0);
    if (command.has_thresholds) {
      CHECK(d.threshold_window_offset % alignment == 0);
      CHECK(d.threshold_window_size <= limits.max_window_bytes);
    }
    // The input window ends on the word holding the dispatch's last element, no further.
    const std::uint64_t last_row = d.first_row + push.rows - 1;
    const std::uint64_t input_end =
        command.input_offset + last_row * command.row_stride + command.row_bytes();
    CHECK(d.src_window_offset + d.src_window_size == (input_end + 3) / 4 * 4);
    CHECK(d.dst_window_offset + d.dst_window_size ==
          command.codes_offset + (last_row + 1) * words_per_row * 4);

    // Every work item, as the shader computes it.
    for (std::uint32_t item = 0; item < push.rows * words_per_row; ++item) {
      const std::uint32_t row = item / words_per_row;
      const std::uint32_t word = item - row * words_per_row;
      const std::uint32_t first = word * 32;
      const std::uint64_t absolute_row = d.first_row + row;
      // The store.
      const std::uint64_t dst_byte = d.dst_window_offset + std::uint64_t{push.dst_origin + item} * 4;
      CHECK(std::uint64_t{push.dst_origin + item} * 4 + 4 <= d.dst_window_size);
      const std::uint64_t code_word = (dst_byte - command.codes_offset) / 4;
      REQUIRE(dst_byte >= command.codes_offset);
      REQUIRE((dst_byte - command.codes_offset) % 4 == 0);
      REQUIRE(code_word < written.size());
      CHECK(code_word == absolute_row * words_per_row + word);
      ++written[code_word];
      if (first >= push.dims) continue;  // padding: nothing read
      const std::uint32_t count = std::min(32u, push.dims - first);
      // The loads: element e0 of the window is the row's element `first`.
      const std::uint64_t e0 = push.src_origin + std::uint64_t{row} * push.row_stride + first;
      REQUIRE(e0 < (std::uint64_t{1} << 32));
      CHECK(d.src_window_offset + e0 * element ==
            command.input_offset + absolute_row * command.row_stride + first * element);
      // Every word read (a 16-bit element is read as the word it lies in) is in the window.
      const std::uint64_t last_byte = (e0 + count) * element - 1;
      CHECK(last_byte / 4 * 4 + 4 <= d.src_window_size);
      const std::uint64_t t0 = push.threshold_origin + first;
      if (command.has_thresholds) {
        CHECK(d.threshold_window_offset + t0 * 4 == command.threshold_offset + first * 4);
        CHECK((t0 + count) * 4 <= d.threshold_window_size);
      }
      if (push.vector_loads != 0 && count == 32) {
        ++replay.vector_items;
        // The group's vectors: 16-byte aligned in the window and in the buffer.
        CHECK((e0 * element) % 16 == 0);
        CHECK((d.src_window_offset + e0 * element) % 16 == 0);
        CHECK(e0 * element + 32 * element <= d.src_window_size);
        if (command.has_thresholds) CHECK((d.threshold_window_offset + t0 * 4) % 16 == 0);
      }
    }
  }
  CHECK(next_row == command.rows);
  for (std::size_t i = 0; i < written.size(); ++i) {
    if (written[i] != 1) {
      FAIL_CHECK("code word " << i << " written " << written[i] << " times");
      break;
    }
  }
  return replay;
}

std::uint64_t pick(std::mt19937_64& rng, std::uint64_t lo, std::uint64_t hi) {
  return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
}

Planned random_command(std::mt19937_64& rng) {
  Planned c;
  c.input_type = static_cast<ElementType>(pick(rng, 0, 2));
  const std::uint64_t element = ferry::element_size(c.input_type);
  c.rows = static_cast<std::uint32_t>(pick(rng, 1, 60));
  c.dims = static_cast<std::uint32_t>(pick(rng, 0, 3) == 0 ? pick(rng, 1, 300) : pick(rng, 1, 70));
  c.row_stride = (c.dims + (pick(rng, 0, 1) ? 0 : pick(rng, 1, 20))) * element;
  c.has_thresholds = pick(rng, 0, 1) != 0;
  c.input_offset = pick(rng, 0, 200) * element;
  c.codes_offset = pick(rng, 0, 50) * 4;
  c.threshold_offset = pick(rng, 0, 50) * 4;
  if (pick(rng, 0, 3) == 0) {
    // Everything on 16 bytes, as the vector loads need (the windows may still break it).
    c.row_stride = (c.row_stride + 15) / 16 * 16;
    c.input_offset = pick(rng, 0, 12) * 16;
    c.threshold_offset = pick(rng, 0, 3) * 16;
  }
  return c;
}

}  // namespace

TEST_CASE("binary_quantize plan: random shapes and limits, every word once, inside its windows") {
  std::mt19937_64 rng(20240611);
  std::size_t split = 0, vector = 0;
  for (int i = 0; i < 400; ++i) {
    const Planned command = random_command(rng);
    BinaryQuantizeLimits limits;
    limits.offset_alignment = std::uint64_t{4} << pick(rng, 0, 6);  // 4 .. 256
    // Windows from a little over one row to everything.
    const std::uint64_t row_need =
        std::max({command.row_bytes() + 3, std::uint64_t{command.words_per_row()} * 4,
                  std::uint64_t{command.dims} * 4});
    limits.max_window_bytes =
        pick(rng, 0, 3) == 0 ? (1u << 27) : row_need + 256 + pick(rng, 0, 4 * row_need);
    limits.workgroup_size = static_cast<std::uint32_t>(std::uint64_t{1} << pick(rng, 0, 8));
    limits.max_group_count = static_cast<std::uint32_t>(pick(rng, 1, 40));
    const Replay replay = check_plan(command, limits);
    split += replay.dispatches > 1 ? 1 : 0;
    vector += replay.vector_items > 0 ? 1 : 0;
  }
  // Both the splitting and the vector loads were exercised.
  CHECK(split > 50);
  CHECK(vector > 20);
}

TEST_CASE("binary_quantize plan: tight aligned rows take vector loads; one element off does not") {
  Planned command;
  command.rows = 10;
  command.dims = 96;
  command.input_type = ElementType::float16;
  command.row_stride = 192;
  BinaryQuantizeLimits limits;
  auto first_push = [&] { return plan(command, limits)->front().push; };
  CHECK(first_push().vector_loads == 1);
  CHECK(check_plan(command, limits).vector_items == 30);
  command.input_offset = 2;  // rows start one element into a vector
  CHECK(first_push().vector_loads == 0);
  command.input_offset = 32;
  command.row_stride = 194;  // rows drift off 16 bytes
  CHECK(first_push().vector_loads == 0);
  command.rows = 1;  // ... unless there is only one
  CHECK(first_push().vector_loads == 1);
  command.has_thresholds = true;
  command.threshold_offset = 4;  // thresholds off 16 bytes
  CHECK(first_push().vector_loads == 0);
  command.threshold_offset = 48;
  CHECK(first_push().vector_loads == 1);
  CHECK(first_push().threshold_origin == 0);  // the window starts at 48 (alignment 16)
  limits.offset_alignment = 64;
  CHECK(first_push().threshold_origin == 12);
  CHECK(first_push().vector_loads == 1);
}

TEST_CASE("binary_quantize plan: many rows split by the window, padding words counted") {
  Planned command;
  command.rows = 1000;
  command.dims = 65;  // 4 words a row, the last two padding
  command.input_type = ElementType::float32;
  command.row_stride = 260;
  command.codes_offset = 12;
  BinaryQuantizeLimits limits;
  limits.max_window_bytes = 4096;
  limits.offset_alignment = 64;
  const auto planned = plan(command, limits);
  REQUIRE(planned.ok());
  // 15 rows of input (3900 bytes) per 4 KiB window, fewer where a window starts before a row.
  CHECK(planned->size() >= 1000 / 15);
  CHECK(planned->size() <= 1000 / 14 + 1);
  check_plan(command, limits);
}

TEST_CASE("binary_quantize plan: a huge unused pitch does not need to fit 32 bits") {
  Planned command;
  command.rows = 1;
  command.dims = 40;
  command.row_stride = std::uint64_t{1} << 40;
  const auto planned = plan(command, BinaryQuantizeLimits{});
  REQUIRE(planned.ok());
  CHECK(planned->front().push.row_stride == 0);
  // Two rows 2^40 bytes apart: one dispatch each.
  command.rows = 2;
  CHECK(plan(command, BinaryQuantizeLimits{})->size() == 2);
  check_plan(command, BinaryQuantizeLimits{});
}

TEST_CASE("binary_quantize plan: a row or thresholds larger than a window is a clear error") {
  Planned command;
  command.rows = 2;
  command.dims = 2048;  // 8 KiB rows of float32
  command.row_stride = 8192;
  BinaryQuantizeLimits limits;
  limits.max_window_bytes = 8192;
  CHECK(plan(command, limits).ok());
  command.input_offset = 4;  // 4 bytes past an aligned start: the row no longer fits
  const auto planned = plan(command, limits);
  REQUIRE_FALSE(planned.ok());
  CHECK(planned.status().code() == ErrorCode::resource_exhausted);
  const std::string& message = planned.status().message();
  CAPTURE(message);
  CHECK(message.find("8192 bytes") != std::string::npos);
  CHECK(message.find("maxStorageBufferRange") != std::string::npos);
  command.input_offset = 0;
  command.has_thresholds = true;
  command.threshold_offset = 8;
  CHECK(plan(command, limits).status().code() == ErrorCode::resource_exhausted);
  // Arguments core rejects never reach the plan; if they do, it says so.
  command.has_thresholds = false;
  command.rows = 0;
  CHECK(plan(command, limits).status().code() == ErrorCode::internal);
  command.rows = 1;
  command.codes_offset = 2;
  CHECK(plan(command, limits).status().code() == ErrorCode::internal);
}
