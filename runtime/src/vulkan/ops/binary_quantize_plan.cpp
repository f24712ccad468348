#include "vulkan/ops/binary_quantize_plan.hpp"

#include <algorithm>
#include <string>

#include "core/checked.hpp"
#include "core/describe.hpp"
#include "ferry/ops/binary_quantize.hpp"

namespace ferry::vulkan {

using detail::round_down;

namespace {

std::uint32_t input_type_code(ElementType type) {
  switch (type) {
    case ElementType::float32: return FERRY_BINARY_QUANTIZE_FLOAT32;
    case ElementType::float16: return FERRY_BINARY_QUANTIZE_FLOAT16;
    case ElementType::bfloat16: return FERRY_BINARY_QUANTIZE_BFLOAT16;
  }
  return FERRY_BINARY_QUANTIZE_FLOAT32;
}

Status too_large(const std::string& what, std::uint64_t bytes, std::uint64_t max_window,
                 std::uint64_t alignment) {
  return Status(ErrorCode::resource_exhausted,
                "binary_quantize on Vulkan: " + what + " is " + detail::describe_bytes(bytes) +
                    "; the shader sees it through one storage-buffer window of at most " +
                    detail::describe_bytes(max_window) +
                    " (maxStorageBufferRange, capped at 2 GiB), including up to " +
                    std::to_string(alignment - 1) + " bytes of alignment");
}

}  // namespace

Result<std::vector<BinaryQuantizeDispatch>> plan_binary_quantize(
    const ops::BinaryQuantizeArgs& args, std::uint64_t input_offset, std::uint64_t codes_offset,
    std::uint64_t threshold_offset, const BinaryQuantizeLimits& limits) {
  const std::uint64_t element = element_size(args.input_type);
  if (args.rows == 0 || args.dims == 0 || args.dims > kMaxBinaryQuantizeDims ||
      args.row_stride < args.row_bytes() || args.row_stride % element != 0 ||
      input_offset % element != 0 || codes_offset % 4 != 0 ||
      (args.has_thresholds && threshold_offset % 4 != 0)) {
    return Status(ErrorCode::internal,
                  "binary_quantize of " + std::to_string(args.rows) + "x" +
                      std::to_string(args.dims) + " (row stride " +
                      std::to_string(args.row_stride) + ", input offset " +
                      std::to_string(input_offset) + ", codes offset " +
                      std::to_string(codes_offset) + ") reached the Vulkan backend");
  }
  // Vulkan guarantees a power of two; 16 at least so that vector loads are aligned in memory.
  const std::uint64_t alignment = std::max<std::uint64_t>(limits.offset_alignment, 16);
  // Whole words: the input window is rounded up to one.
  const std::uint64_t max_window =
      round_down(std::min<std::uint64_t>(limits.max_window_bytes, std::uint64_t{1} << 31), 4);
  const std::uint32_t workgroup_size = std::max<std::uint32_t>(limits.workgroup_size, 1);
  const std::uint32_t max_groups = std::max<std::uint32_t>(limits.max_group_count, 1);

  const std::uint64_t row_bytes = args.row_bytes();
  const std::uint32_t words_per_row = args.words_per_row();
  const std::uint64_t code_row_bytes = std::uint64_t{words_per_row} * 4;

  std::uint64_t threshold_window_offset = 0;
  std::uint64_t threshold_lead = 0;
  std::uint64_t threshold_window_size = 0;
  if (args.has_thresholds) {
    threshold_window_offset = round_down(threshold_offset, alignment);
    threshold_lead = threshold_offset - threshold_window_offset;
    threshold_window_size = threshold_lead + std::uint64_t{args.dims} * 4;
    if (threshold_window_size > max_window) {
      return too_large("the threshold vector", std::uint64_t{args.dims} * 4, max_window,
                       alignment);
    }
  }

  std::vector<BinaryQuantizeDispatch> dispatches;
  for (std::uint32_t first = 0; first < args.rows;) {
    // Inside the buffers: core checked that every row lies in its binding.
    const std::uint64_t src_start = input_offset + std::uint64_t{first} * args.row_stride;
    const std::uint64_t dst_start = codes_offset + std::uint64_t{first} * code_row_bytes;
    BinaryQuantizeDispatch dispatch;
    dispatch.first_row = first;
    dispatch.src_window_offset = round_down(src_start, alignment);
    dispatch.dst_window_offset = round_down(dst_start, alignment);
    dispatch.threshold_window_offset = threshold_window_offset;
    dispatch.threshold_window_size = threshold_window_size;
    const std::uint64_t src_lead = src_start - dispatch.src_window_offset;
    const std::uint64_t dst_lead = dst_start - dispatch.dst_window_offset;
    if (src_lead + row_bytes > max_window) {
      return too_large("row " + std::to_string(first) + " of the input", row_bytes, max_window,
                       alignment);
    }
    if (dst_lead + code_row_bytes > max_window) {
      return too_large("row " + std::to_string(first) + " of the codes", code_row_bytes,
                       max_window, alignment);
    }
    // As many whole rows as both windows hold (max_window is whole words, so the input window
    // rounded up to a word still fits).
    std::uint64_t rows = std::uint64_t{args.rows} - first;
    rows = std::min(rows, (max_window - src_lead - row_bytes) / args.row_stride + 1);
    rows = std::min(rows, (max_window - dst_lead) / code_row_bytes);
    const std::uint64_t src_bytes = src_lead + (rows - 1) * args.row_stride + row_bytes;
    dispatch.src_window_size = (src_bytes + 3) / 4 * 4;
    dispatch.dst_window_size = dst_lead + rows * code_row_bytes;

    const std::uint64_t items = rows * words_per_row;
    dispatch.group_count = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
        (items + workgroup_size - 1) / workgroup_size, 1, max_groups));

    // Everything below is an index inside a window (< 2^31 bytes), or 0 where the dimension it
    // steps over has a single entry (so a huge unused pitch never has to fit).
    shaders::BinaryQuantizePushConstants& push = dispatch.push;
    push.src_origin = static_cast<std::uint32_t>(src_lead / element);
    push.row_stride = rows > 1 ? static_cast<std::uint32_t>(args.row_stride / element) : 0;
    push.dims = args.dims;
    push.words_per_row = words_per_row;
    push.rows = static_cast<std::uint32_t>(rows);
    push.dst_origin = static_cast<std::uint32_t>(dst_lead / 4);
    push.threshold_origin = static_cast<std::uint32_t>(threshold_lead / 4);
    push.input_type = input_type_code(args.input_type);
    push.has_thresholds = args.has_thresholds ? 1 : 0;
    // A group of 32 elements starts 128 (float32) or 64 bytes after the previous one of its row,
    // and 32 thresholds 128 bytes after the previous ones: all on 16 bytes when the rows and the
    // thresholds start on 16 bytes of their windows (the windows themselves start on 16 bytes).
    const bool rows_aligned = src_lead % 16 == 0 && (rows == 1 || args.row_stride % 16 == 0);
    const bool thresholds_aligned = !args.has_thresholds || threshold_lead % 16 == 0;
    push.vector_loads = rows_aligned && thresholds_aligned ? 1 : 0;

    dispatches.push_back(dispatch);
    first += static_cast<std::uint32_t>(rows);
  }
  return dispatches;
}

}  // namespace ferry::vulkan
