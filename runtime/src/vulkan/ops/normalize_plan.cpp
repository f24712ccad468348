#include "vulkan/ops/normalize_plan.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <string>
#include <system_error>

#include "core/checked.hpp"
#include "core/describe.hpp"

namespace ferry::vulkan {

using detail::round_down;

namespace {

std::uint32_t output_type_code(ElementType type) {
  switch (type) {
    case ElementType::float32: return FERRY_NORMALIZE_FLOAT32;
    case ElementType::float16: return FERRY_NORMALIZE_FLOAT16;
    case ElementType::bfloat16: return FERRY_NORMALIZE_BFLOAT16;
  }
  return FERRY_NORMALIZE_FLOAT32;
}

}  // namespace

std::uint32_t vector_run_pixels(const ops::NormalizeArgs& command,
                                std::uint64_t src_window_offset, std::uint64_t src_start,
                                std::uint64_t dst_window_offset, std::uint64_t dst_start,
                                std::uint64_t images) {
  const std::uint32_t channels = command.channels;
  // Interleaved, tightly packed pixels: a run of pixels is one stretch of whole words.
  const bool packed =
      command.pixel_stride == channels && (channels == 1 || command.channel_stride == 1);
  if (!packed || channels == 0 || channels > shaders::kNormalizeMaxChannels) return 0;
  // Every run starts on a word: runs are whole words long, so it is enough that every row does.
  const bool rows_aligned = src_window_offset % 4 == 0 && src_start % 4 == 0 &&
                            (command.height == 1 || command.row_stride % 4 == 0) &&
                            (images == 1 || command.image_stride % 4 == 0);
  if (!rows_aligned) return 0;
  // Every vector lies on a multiple of its size, in the window and in the buffer: runs, rows,
  // planes and images are whole vectors when the width is, so it is enough that the first is.
  const std::uint64_t element_bytes = element_size(command.output_type);
  auto fits = [&](std::uint32_t run_pixels) {
    const std::uint64_t vector_bytes = run_pixels * element_bytes;
    return command.width % run_pixels == 0 && dst_window_offset % vector_bytes == 0 &&
           dst_start % vector_bytes == 0;
  };
  if (element_bytes == 4) return fits(4) ? 4 : 0;  // 16-byte vectors of 4 elements
  if (fits(8)) return 8;                            // 16-byte vectors of 8 elements
  return fits(4) ? 4 : 0;                           // 8-byte vectors of 4 elements
}

Result<std::vector<NormalizeDispatch>> plan_normalize(const ops::NormalizeArgs& command,
                                                      std::uint64_t src_offset,
                                                      std::uint64_t dst_offset,
                                                      const NormalizeLimits& limits) {
  if (command.batch == 0 || command.height == 0 || command.width == 0 || command.channels == 0 ||
      command.channels > shaders::kNormalizeMaxChannels) {
    return Status(ErrorCode::internal,
                  "normalize of " + std::to_string(command.batch) + "x" +
                      std::to_string(command.channels) + "x" + std::to_string(command.height) +
                      "x" + std::to_string(command.width) + " reached the Vulkan backend");
  }
  // Vulkan guarantees a power of two; 4 at least keeps the destination window element-aligned.
  const std::uint64_t alignment = std::max<std::uint64_t>(limits.offset_alignment, 4);
  const std::uint64_t max_window =
      std::min<std::uint64_t>(limits.max_window_bytes, std::uint64_t{1} << 31);

  const std::uint32_t width = command.width;
  const std::uint32_t height = command.height;
  const std::uint32_t channels = command.channels;
  const std::uint64_t element_bytes = element_size(command.output_type);
  const std::uint64_t image_pixels = std::uint64_t{height} * width;
  const std::uint64_t image_elements = image_pixels * channels;
  const std::uint64_t image_output_bytes = image_elements * element_bytes;
  // Bytes from an image's first byte read to one past its last.
  const std::uint64_t image_input_bytes = std::uint64_t{channels - 1} * command.channel_stride +
                                          std::uint64_t{height - 1} * command.row_stride +
                                          std::uint64_t{width - 1} * command.pixel_stride + 1;

  std::vector<NormalizeDispatch> dispatches;
  for (std::uint32_t first = 0; first < command.batch;) {
    const std::uint64_t src_start =
        src_offset + std::uint64_t{first} * command.image_stride;
    const std::uint64_t dst_start = dst_offset + std::uint64_t{first} * image_output_bytes;
    NormalizeDispatch dispatch;
    dispatch.first_image = first;
    dispatch.src_window_offset = round_down(src_start, alignment);
    dispatch.dst_window_offset = round_down(dst_start, alignment);
    const std::uint64_t src_lead = src_start - dispatch.src_window_offset;
    const std::uint64_t dst_lead = dst_start - dispatch.dst_window_offset;
    if (src_lead + image_input_bytes > max_window || dst_lead + image_output_bytes > max_window) {
      return Status(
          ErrorCode::resource_exhausted,
          "normalize on Vulkan: image " + std::to_string(first) + " of the batch reads " +
              detail::describe_bytes(image_input_bytes) + " and writes " +
              detail::describe_bytes(image_output_bytes) +
              "; the shader sees each through one storage-buffer window of at most " +
              detail::describe_bytes(max_window) +
              " (maxStorageBufferRange, capped at 2 GiB), including up to " +
              std::to_string(alignment - 1) + " bytes of alignment " +
              "(minStorageBufferOffsetAlignment " + std::to_string(alignment) + ")");
    }
    // As many whole images as both windows hold.
    std::uint64_t images = std::uint64_t{command.batch} - first;
    if (command.image_stride != 0) {
      images = std::min(images,
                        (max_window - src_lead - image_input_bytes) / command.image_stride + 1);
    }
    images = std::min(images, (max_window - dst_lead) / image_output_bytes);
    dispatch.src_window_size = src_lead + (images - 1) * command.image_stride + image_input_bytes;
    dispatch.dst_window_size = dst_lead + images * image_output_bytes;

    // Work items: runs of run_pixels pixels of a row (single pixels on the element path).
    dispatch.vector_pixels = vector_run_pixels(command, dispatch.src_window_offset, src_start,
                                               dispatch.dst_window_offset, dst_start, images);
    const std::uint32_t run_pixels = std::max<std::uint32_t>(dispatch.vector_pixels, 1);
    const NormalizeGrid& grid =
        dispatch.vector_pixels != 0 ? limits.vector_grid : limits.element_grid;
    const std::uint32_t workgroup_size = std::max<std::uint32_t>(grid.workgroup_size, 1);
    const std::uint32_t max_groups = std::max<std::uint32_t>(grid.max_group_count, 1);
    const std::uint32_t runs_per_row = width / run_pixels;
    const std::uint64_t items = images * height * runs_per_row;
    dispatch.group_count = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
        (items + workgroup_size - 1) / workgroup_size, 1, max_groups));

    // Everything below is an offset or size inside a window (< 2^31), or 0 where the dimension it
    // steps over has a single entry (so a huge unused pitch never has to fit).
    shaders::NormalizePushConstants& push = dispatch.push;
    const std::uint32_t pixel_stride = width > 1 ? command.pixel_stride : 0;
    push.src_origin = static_cast<std::uint32_t>(src_lead) +
                      (command.mirror ? (width - 1) * pixel_stride : 0);
    push.image_stride = images > 1 ? static_cast<std::uint32_t>(command.image_stride) : 0;
    push.channel_stride = channels > 1 ? static_cast<std::uint32_t>(command.channel_stride) : 0;
    push.row_stride = height > 1 ? static_cast<std::uint32_t>(command.row_stride) : 0;
    push.pixel_step = command.mirror ? 0u - pixel_stride : pixel_stride;
    push.width = width;
    push.height = height;
    push.image_count = static_cast<std::uint32_t>(images);
    push.channels = channels;
    push.output_type = output_type_code(command.output_type);
    push.dst_origin = static_cast<std::uint32_t>(dst_lead / element_bytes);
    const bool planar = command.output_layout == ImageLayout::nchw;
    push.pixel_elements = planar ? 1 : channels;
    push.image_gap = planar ? static_cast<std::uint32_t>(image_elements - image_pixels) : 0;
    push.channel_elements = planar ? static_cast<std::uint32_t>(image_pixels) : 1;
    const std::uint64_t stride = std::uint64_t{dispatch.group_count} * workgroup_size;
    push.step_x = static_cast<std::uint32_t>(stride % runs_per_row);
    push.step_rows = static_cast<std::uint32_t>(stride / runs_per_row % height);
    push.step_images = static_cast<std::uint32_t>(stride / runs_per_row / height);
    for (std::uint32_t c = 0; c < shaders::kNormalizeMaxChannels; ++c) {
      push.scale_bits[c] = c < channels ? std::bit_cast<std::uint32_t>(command.scale[c]) : 0;
      push.bias_bits[c] = c < channels ? std::bit_cast<std::uint32_t>(command.bias[c]) : 0;
    }

    dispatches.push_back(dispatch);
    first += static_cast<std::uint32_t>(images);
  }
  return dispatches;
}

Status override_normalize_limits(std::string_view spec, std::uint32_t max_workgroup_size,
                                 std::uint32_t max_groups, NormalizeLimits& limits) {
  auto fail = [&](const std::string& why) {
    const std::string sizes = "<1 to " + std::to_string(max_workgroup_size) + ">";
    const std::string counts = "<1 to " + std::to_string(max_groups) + ">";
    return Status(ErrorCode::invalid_argument,
                  "'" + std::string(spec) + "': " + why + " (expected any of workgroup=" + sizes +
                      ",groups=" + counts + ",element_workgroup=" + sizes +
                      ",element_groups=" + counts + ",in_flight=<1 to 1024 bytes>)");
  };
  NormalizeLimits changed = limits;
  std::string_view rest = spec;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) return fail("'" + std::string(item) + "' has no '='");
    const std::string_view key = item.substr(0, equals);
    const std::string_view text = item.substr(equals + 1);
    std::uint32_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
      return fail("'" + std::string(text) + "' is not a number");
    }
    const bool size_ok = value >= 1 && value <= max_workgroup_size;
    const bool count_ok = value >= 1 && value <= max_groups;
    if (key == "workgroup" && size_ok) {
      changed.vector_grid.workgroup_size = value;
    } else if (key == "groups" && count_ok) {
      changed.vector_grid.max_group_count = value;
    } else if (key == "element_workgroup" && size_ok) {
      changed.element_grid.workgroup_size = value;
    } else if (key == "element_groups" && count_ok) {
      changed.element_grid.max_group_count = value;
    } else if (key == "in_flight" && value >= 1 && value <= 1024) {
      changed.source_bytes_in_flight = value;
    } else {
      return fail("'" + std::string(item) + "' is not a setting or out of its range");
    }
  }
  limits = changed;
  return Status();
}

}  // namespace ferry::vulkan
