// Splitting an ibp_decode into dispatches of shaders/ibp_decode.comp (pure function, no GPU): the
// shader's addressing replayed on the host, item by item, to check that the status is cleared
// first, every item is decoded once with its output, index and stream tables inside the bound
// windows where the op's definition puts them, and that what cannot fit is refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "ferry/ibp.hpp"
#include "vulkan/ops/ibp_decode_plan.hpp"

namespace {

using ferry::ErrorCode;
using ferry::vulkan::IbpDecodeDispatch;
using ferry::vulkan::IbpDecodeLimits;
using ferry::vulkan::IbpDecodeWindow;

ferry::ibp::Layout layout_of(std::uint8_t element_size, std::uint64_t elements,
                             std::uint64_t row_elements, std::uint32_t group_rows) {
  std::vector<std::byte> tensor(elements * element_size);
  for (std::size_t i = 0; i < tensor.size(); ++i) tensor[i] = std::byte(i * 7 % 13);
  ferry::ibp::EncodeParams params;
  params.element_size = element_size;
  params.elements = elements;
  params.row_elements = row_elements;
  params.group_rows = group_rows;
  const auto stream = ferry::ibp::encode(tensor, params);
  REQUIRE(stream.ok());
  const auto layout = ferry::ibp::read_layout(*stream);
  REQUIRE(layout.ok());
  return *layout;
}

bool inside(const IbpDecodeWindow& window, std::uint64_t begin, std::uint64_t size,
            std::uint64_t alignment, std::uint64_t max_window) {
  return window.offset % alignment == 0 && window.size % 4 == 0 && window.size <= max_window &&
         begin >= window.offset && begin + size <= window.offset + window.size;
}

void check_plan(const ferry::ops::IbpDecodeArgs& args, std::uint64_t stream_offset,
                std::uint64_t output_offset, std::uint64_t status_offset,
                std::uint64_t indices_offset, const IbpDecodeLimits& limits,
                std::optional<std::uint64_t> tables_offset = {}) {
  CAPTURE(args.row_count);
  CAPTURE(limits.max_window_bytes);
  CAPTURE(tables_offset.value_or(~0ull));
  const auto planned = ferry::vulkan::plan_ibp_decode(args, stream_offset, output_offset,
                                                      status_offset, indices_offset, limits, {},
                                                      tables_offset);
  REQUIRE_MESSAGE(planned.ok(), planned.status().to_string());
  const std::vector<IbpDecodeDispatch>& dispatches = *planned;
  const std::uint64_t alignment = std::max<std::uint64_t>(limits.offset_alignment, 16);
  const std::uint64_t max_window = std::min<std::uint64_t>(limits.max_window_bytes, 1ull << 31);
  const ferry::ibp::Layout& l = args.layout;
  REQUIRE(dispatches.size() >= 2);
  CHECK(dispatches[0].push.flags == FERRY_IBP_DECODE_CLEAR_STATUS);
  std::vector<int> decoded(args.item_count(), 0);
  std::uint64_t item = 0;
  for (const IbpDecodeDispatch& d : dispatches) {
    const auto& p = d.push;
    CHECK(inside(d.status, status_offset, 4, alignment, max_window));
    CHECK(d.status.offset + 4 * p.status_word == status_offset);
    CHECK(inside(d.stream, stream_offset, l.stream_bytes, alignment, max_window));
    // The tables: in the stream, or in the copy of its first data_offset bytes; a gather of
    // fewer than 1/8 of the rows copies only up to the row table and reads that in the stream.
    const bool row_table_in_place =
        tables_offset && args.gather() && args.row_count * 8 < l.rows - l.rows % 8;
    const std::uint64_t tables = tables_offset.value_or(stream_offset);
    const std::uint64_t copied = row_table_in_place ? l.row_table_offset : l.data_offset;
    CHECK(inside(d.tables, tables, tables_offset ? copied : l.stream_bytes, alignment,
                 max_window));
    CHECK(d.tables.offset + 4 * p.group_table_word == tables + l.group_table_offset);
    CHECK(d.tables.offset + p.masks_byte == tables + l.masks_offset);
    if (row_table_in_place) {
      CHECK(d.stream.offset + 4 * p.row_table_word == stream_offset + l.row_table_offset);
    } else {
      CHECK(d.tables.offset + 4 * p.row_table_word == tables + l.row_table_offset);
    }
    CHECK(d.stream.offset + 4 * p.data_word == stream_offset + l.data_offset);
    CHECK(p.mask_block_bytes == l.mask_block_bytes);
    CHECK(p.data_bytes == l.data_bytes);
    if (&d == &dispatches[0]) continue;
    CHECK(p.flags == ((args.gather() ? FERRY_IBP_DECODE_GATHER : 0u) |
                      (row_table_in_place ? FERRY_IBP_DECODE_ROW_TABLE_IN_STREAM : 0u)));
    CHECK(d.group_count >= 1);
    CHECK(d.group_count <= limits.max_group_count);
    for (std::uint64_t i = 0; i < p.items; ++i, ++item) {
      REQUIRE(item < args.item_count());
      ++decoded[item];
      const std::uint64_t row = args.first_row + item;
      const std::uint64_t bytes =
          args.gather() ? args.slot_bytes() : l.row_elements_of(row) * l.element_size;
      const std::uint64_t at = d.output.offset + p.output_byte + i * p.slot_bytes;
      CHECK(at == output_offset + item * args.slot_bytes());
      CHECK(inside(d.output, at, bytes, alignment, max_window));
      if (args.gather()) {
        const std::uint64_t index_at = d.indices.offset + 4 * (p.indices_word + i);
        CHECK(index_at == indices_offset + 4 * item);
        CHECK(inside(d.indices, index_at, 4, alignment, max_window));
      } else {
        CHECK(p.first_row + i == row);
      }
    }
  }
  CHECK(std::all_of(decoded.begin(), decoded.end(), [](int n) { return n == 1; }));
}

}  // namespace

TEST_CASE("ibp_decode plan: items split over output and index windows, each decoded once") {
  const ferry::ibp::Layout layout = layout_of(2, 50 * 37 - 5, 37, 8);
  for (const std::uint64_t window : {1ull << 27, 4096ull, 1000ull, 200ull}) {
    const IbpDecodeLimits limits{64, std::max<std::uint64_t>(window, layout.stream_bytes + 64),
                                 65535};
    const IbpDecodeLimits small_output{64, window < 4096 ? window : limits.max_window_bytes, 3};
    ferry::ops::IbpDecodeArgs whole;
    whole.layout = layout;
    whole.row_count = layout.rows;
    check_plan(whole, 8, 6, 1000, 0, limits);
    ferry::ops::IbpDecodeArgs range = whole;
    range.rows = ferry::IbpDecodeRows::range;
    range.first_row = 7;
    range.row_count = 43;
    check_plan(range, 24, 2, 4, 0, limits);
    ferry::ops::IbpDecodeArgs gather = whole;
    gather.rows = ferry::IbpDecodeRows::gather;
    gather.row_count = 300;
    check_plan(gather, 0, 74, 12, 36, limits);
    // A stream in host memory: the tables from a scratch copy at any multiple of 8.
    check_plan(whole, 8, 6, 1000, 0, limits, 40);
    check_plan(gather, 0, 74, 12, 36, limits, 1ull << 20);
    ferry::ops::IbpDecodeArgs few = gather;  // 5 of 50 rows: the row table read in place
    few.row_count = 5;
    check_plan(few, 16, 74, 12, 36, limits, 1ull << 20);
    few.row_count = 6;  // 6 of 50: not under 50 / 8 = 6 whole rows, the row table copied
    check_plan(few, 16, 74, 12, 36, limits, 1ull << 20);
    if (small_output.max_window_bytes < layout.stream_bytes) {
      // A stream larger than a window is refused.
      const auto refused =
          ferry::vulkan::plan_ibp_decode(whole, 0, 0, 0, 0, small_output);
      CHECK(refused.status().code() == ErrorCode::unavailable);
      CHECK(refused.status().message().find("stream") != std::string::npos);
    }
  }
}

TEST_CASE("ibp_decode plan: the subgroup shader where the subgroup size can be required") {
  using ferry::vulkan::choose_ibp_decode_shader;
  using ferry::vulkan::IbpDecodeShader;
  ferry::vulkan::SubgroupSupport nvidia;
  nvidia.size = nvidia.min_size = nvidia.max_size = 32;
  nvidia.size_control = nvidia.arithmetic = nvidia.ballot = true;
  nvidia.max_workgroup_subgroups = 32;
  IbpDecodeShader shader = choose_ibp_decode_shader(nvidia, 1024, false);
  CHECK(shader.subgroup_size == 32);
  CHECK(shader.teams == 8);
  CHECK(choose_ibp_decode_shader(nvidia, 1024, true).subgroup_size == 0);  // asked for
  ferry::vulkan::SubgroupSupport other = nvidia;
  other.min_size = 8;  // lavapipe: 8 only
  other.max_size = 8;
  CHECK(choose_ibp_decode_shader(other, 1024, false).subgroup_size == 8);
  other.min_size = 16;  // 32 preferred where it is in the range
  other.max_size = 64;
  CHECK(choose_ibp_decode_shader(other, 1024, false).subgroup_size == 32);
  other.min_size = other.max_size = 64;  // fewer subgroups where the workgroup would be too large
  shader = choose_ibp_decode_shader(other, 256, false);
  CHECK(shader.subgroup_size == 64);
  CHECK(shader.teams == 4);
  other = nvidia;
  other.size_control = false;  // the size might vary: portable
  CHECK(choose_ibp_decode_shader(other, 1024, false).subgroup_size == 0);
  other = nvidia;
  other.arithmetic = false;
  CHECK(choose_ibp_decode_shader(other, 1024, false).subgroup_size == 0);

  // Teams per row from the row's chunks: short rows one team (8 rows per workgroup), long ones
  // up to 8; every item still decoded once.
  shader = choose_ibp_decode_shader(nvidia, 1024, false);
  struct Case {
    std::uint8_t size;
    std::uint64_t row_elements;
    std::uint32_t teams;
  };
  for (const Case c : {Case{8, 4096, 8}, Case{1, 4096, 8}, Case{1, 512, 1}, Case{4, 300, 4},
                       Case{8, 33, 1}}) {
    CAPTURE(c.size);
    CAPTURE(c.row_elements);
    const ferry::ibp::Layout layout = layout_of(c.size, 20 * c.row_elements - 1, c.row_elements, 4);
    ferry::ops::IbpDecodeArgs whole;
    whole.layout = layout;
    whole.row_count = layout.rows;
    const auto planned =
        ferry::vulkan::plan_ibp_decode(whole, 0, 0, 1 << 20, 0, IbpDecodeLimits{}, shader);
    REQUIRE(planned.ok());
    REQUIRE(planned->size() == 2);
    const IbpDecodeDispatch& d = (*planned)[1];
    CHECK(d.push.teams_per_row == c.teams);
    CHECK(d.group_count * (8 / c.teams) >= d.push.items);
    CHECK((d.group_count - 1) * (8 / c.teams) < d.push.items);
    CHECK(ferry::vulkan::ibp_decode_loop_iterations(d, shader) > 0);
  }
}
