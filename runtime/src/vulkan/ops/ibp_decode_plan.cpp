#include "vulkan/ops/ibp_decode_plan.hpp"

#include <algorithm>
#include <string>

#include "core/checked.hpp"
#include "core/describe.hpp"

namespace ferry::vulkan {

using detail::round_down;

namespace {

// The window of [offset, offset + size): from the offset rounded down to the alignment, to the
// next whole word (inside the VkBuffer, whose size is a multiple of 16).
IbpDecodeWindow window_of(std::uint64_t offset, std::uint64_t size, std::uint64_t alignment) {
  const std::uint64_t start = round_down(offset, alignment);
  return {start, (offset - start + size + 3) / 4 * 4};
}

Status too_large(const std::string& what, std::uint64_t bytes, std::uint64_t max_window) {
  return Status(ErrorCode::unavailable,
                "ibp_decode on Vulkan: " + what + " is " + detail::describe_bytes(bytes) +
                    "; the shader sees it through one storage-buffer window of at most " +
                    detail::describe_bytes(max_window) +
                    " (maxStorageBufferRange, capped at 2 GiB, less the offset alignment)");
}

}  // namespace

Result<std::vector<IbpDecodeDispatch>> plan_ibp_decode(const ops::IbpDecodeArgs& args,
                                                       std::uint64_t stream_offset,
                                                       std::uint64_t output_offset,
                                                       std::uint64_t status_offset,
                                                       std::uint64_t indices_offset,
                                                       const IbpDecodeLimits& limits,
                                                       const IbpDecodeShader& shader,
                                                       std::optional<std::uint64_t> tables_offset) {
  const ibp::Layout& layout = args.layout;
  const std::uint64_t es = layout.element_size;
  if (args.row_count == 0 || layout.rows == 0 || layout.group_rows == 0 ||
      (es != 1 && es != 2 && es != 4 && es != 8) || stream_offset % 8 != 0 ||
      output_offset % es != 0 || status_offset % 4 != 0 || indices_offset % 4 != 0 ||
      (tables_offset && *tables_offset % 8 != 0)) {
    return Status(ErrorCode::internal, "ibp_decode of " + std::to_string(args.row_count) +
                                           " items (stream offset " +
                                           std::to_string(stream_offset) +
                                           ") reached the Vulkan backend");
  }
  const std::uint64_t alignment = std::max<std::uint64_t>(limits.offset_alignment, 16);
  const std::uint64_t max_window =
      round_down(std::min<std::uint64_t>(limits.max_window_bytes, std::uint64_t{1} << 31), 4);
  const std::uint32_t max_groups = std::max<std::uint32_t>(limits.max_group_count, 1);

  const IbpDecodeWindow stream = window_of(stream_offset, layout.stream_bytes, alignment);
  if (stream.size > max_window) return too_large("the stream", layout.stream_bytes, max_window);
  const std::uint64_t slot = args.slot_bytes();
  if (slot > kVulkanIbpMaxRowBytes) {
    return Status(ErrorCode::unavailable,
                  "ibp_decode on Vulkan: a row of " + detail::describe_bytes(slot) +
                      " is above the shader's " + detail::describe_bytes(kVulkanIbpMaxRowBytes));
  }
  const IbpDecodeWindow status = window_of(status_offset, 4, alignment);
  const std::uint32_t stream_word = static_cast<std::uint32_t>((stream_offset - stream.offset) / 4);
  // The tables' window: the stream's, or the copy's (its tables at the same offsets from its
  // start as in the stream; data_offset bytes, under the 2 GiB window as the stream is, or only
  // up to the row table when a gather reads that in place).
  const bool row_table_in_place = tables_offset && ops::ibp_gather_reads_row_table_in_place(args);
  const IbpDecodeWindow tables =
      tables_offset ? window_of(*tables_offset, ops::ibp_tables_copy_bytes(args), alignment)
                    : stream;
  const std::uint32_t tables_word = tables_offset
                                        ? static_cast<std::uint32_t>((*tables_offset - tables.offset) / 4)
                                        : stream_word;

  shaders::IbpDecodePushConstants common{};
  common.flags = (args.gather() ? FERRY_IBP_DECODE_GATHER : 0u) |
                 (row_table_in_place ? FERRY_IBP_DECODE_ROW_TABLE_IN_STREAM : 0u);
  common.element_size = static_cast<std::uint32_t>(es);
  common.group_rows = layout.group_rows;
  // Everything below is inside the stream window (< 2^31 bytes).
  common.rows = static_cast<std::uint32_t>(layout.rows);
  common.row_elements = static_cast<std::uint32_t>(layout.row_elements);
  common.last_row_elements = static_cast<std::uint32_t>(layout.row_elements_of(layout.rows - 1));
  common.group_table_word =
      tables_word + static_cast<std::uint32_t>(layout.group_table_offset / 4);
  common.masks_byte = 4 * tables_word + static_cast<std::uint32_t>(layout.masks_offset);
  common.mask_block_bytes = static_cast<std::uint32_t>(layout.mask_block_bytes);
  common.row_table_word = (row_table_in_place ? stream_word : tables_word) +
                          static_cast<std::uint32_t>(layout.row_table_offset / 4);
  common.data_word = stream_word + static_cast<std::uint32_t>(layout.data_offset / 4);
  common.data_bytes = static_cast<std::uint32_t>(layout.data_bytes);
  common.slot_bytes = static_cast<std::uint32_t>(slot);
  common.status_word = static_cast<std::uint32_t>((status_offset - status.offset) / 4);

  // Items per workgroup: one (portable); subgroup shader: its teams / the teams per item.
  std::uint64_t items_per_group = 1;
  if (shader.subgroup_size != 0) {
    const std::uint64_t units =
        es == 8 ? layout.row_elements : (layout.row_elements * es + 3) / 4;
    const std::uint64_t chunks = (units + shader.subgroup_size - 1) / shader.subgroup_size;
    std::uint32_t teams = 1;
    while (teams * 2 <= shader.teams && teams * kIbpDecodeChunksPerTeam < chunks) teams *= 2;
    common.teams_per_row = teams;
    items_per_group = shader.teams / teams;
  }

  std::vector<IbpDecodeDispatch> dispatches;
  IbpDecodeDispatch clear;
  clear.stream = stream;
  clear.tables = tables;
  clear.status = status;
  clear.group_count = 1;
  clear.push = common;
  clear.push.flags = FERRY_IBP_DECODE_CLEAR_STATUS;
  dispatches.push_back(clear);

  const std::uint64_t total_output = args.output_bytes();
  for (std::uint64_t first = 0; first < args.item_count();) {
    const std::uint64_t out_start = output_offset + first * slot;
    const std::uint64_t out_lead = out_start - round_down(out_start, alignment);
    const std::uint64_t index_start = indices_offset + first * 4;
    const std::uint64_t index_lead = index_start - round_down(index_start, alignment);
    // As many whole items as both windows hold (at least one: a slot is at most 256 MiB).
    std::uint64_t items = args.item_count() - first;
    if (slot > 0) items = std::min(items, (max_window - out_lead - 3) / slot);
    if (args.gather()) items = std::min(items, (max_window - index_lead) / 4);
    if (items == 0) return too_large("one item's output", slot, max_window);
    const std::uint64_t out_bytes =
        std::min(items * slot, total_output - first * slot);  // the short last row
    IbpDecodeDispatch dispatch;
    dispatch.stream = stream;
    dispatch.tables = tables;
    dispatch.status = status;
    dispatch.output = window_of(out_start, out_bytes, alignment);
    dispatch.push = common;
    dispatch.push.items = static_cast<std::uint32_t>(items);
    dispatch.push.output_byte = static_cast<std::uint32_t>(out_lead);
    if (args.gather()) {
      dispatch.indices = window_of(index_start, items * 4, alignment);
      dispatch.push.indices_word = static_cast<std::uint32_t>(index_lead / 4);
    } else {
      dispatch.push.first_row = static_cast<std::uint32_t>(args.first_row + first);
    }
    dispatch.group_count = static_cast<std::uint32_t>(
        std::min<std::uint64_t>((items + items_per_group - 1) / items_per_group, max_groups));
    dispatches.push_back(dispatch);
    first += items;
  }
  return dispatches;
}

}  // namespace ferry::vulkan

namespace ferry::vulkan {

IbpDecodeShader choose_ibp_decode_shader(const SubgroupSupport& subgroups,
                                         std::uint32_t max_workgroup_invocations, bool portable) {
  if (portable || !subgroups.arithmetic || !subgroups.ballot || !subgroups.size_control) return {};
  const std::uint32_t size = std::clamp<std::uint32_t>(32, subgroups.min_size, subgroups.max_size);
  if (size < 4 || size > 128 || (size & (size - 1)) != 0) return {};
  std::uint32_t teams = 8;
  while (teams > 1 && (teams * size > max_workgroup_invocations ||
                       teams > subgroups.max_workgroup_subgroups)) {
    teams /= 2;
  }
  if (teams * size > max_workgroup_invocations || teams > subgroups.max_workgroup_subgroups) {
    return {};
  }
  return {size, teams};
}

std::uint64_t ibp_decode_loop_iterations(const IbpDecodeDispatch& dispatch,
                                         const IbpDecodeShader& shader) {
  const std::uint64_t groups = std::max<std::uint32_t>(dispatch.group_count, 1);
  if (shader.subgroup_size != 0) {
    const std::uint64_t es = dispatch.push.element_size;
    const std::uint64_t teams = std::max<std::uint32_t>(dispatch.push.teams_per_row, 1);
    const std::uint64_t per_round = groups * std::max<std::uint64_t>(shader.teams / teams, 1);
    const std::uint64_t rounds = (dispatch.push.items + per_round - 1) / per_round;
    const std::uint64_t units = es == 8 ? dispatch.push.row_elements
                                        : (dispatch.push.row_elements * es + 3) / 4 + 1;
    const std::uint64_t chunks = (units + shader.subgroup_size - 1) / shader.subgroup_size;
    const std::uint64_t segment = (chunks + teams - 1) / teams;
    const std::uint64_t words = (std::uint64_t{dispatch.push.row_elements} * es + 3) / 4 + 1;
    const std::uint64_t zero = (words + teams * shader.subgroup_size - 1) / (teams * shader.subgroup_size);
    return rounds * (1 + teams + segment * (2 + 2 * 16) + 2 * zero) + 1;
  }
  const std::uint64_t items = (dispatch.push.items + groups - 1) / groups;
  const std::uint64_t per = dispatch.push.element_size < 4 ? 4 / dispatch.push.element_size : 1;
  const std::uint64_t chunks = (std::uint64_t{dispatch.push.row_elements} + 32 * per - 1) / (32 * per);
  return items * (1 + chunks * (3 + per * (2 + 2 * 16))) + 1;
}

}  // namespace ferry::vulkan
