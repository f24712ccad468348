#include "vulkan/normalize_plan.hpp"

#include <algorithm>
#include <bit>
#include <string>


namespace ferry::vulkan {
namespace {

std::uint64_t align_down(std::uint64_t value, std::uint64_t alignment) {
  return value / alignment * alignment;
}

std::uint32_t output_type_code(ElementType type) {
  switch (type) {
    case ElementType::float32: return FERRY_NORMALIZE_FLOAT32;
    case ElementType::float16: return FERRY_NORMALIZE_FLOAT16;
    case ElementType::bfloat16: return FERRY_NORMALIZE_BFLOAT16;
  }
  return FERRY_NORMALIZE_FLOAT32;
}

}  // namespace

Result<std::vector<NormalizeDispatch>> plan_normalize(const backend::NormalizeCommand& command,
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
  const std::uint32_t workgroup_size = std::max<std::uint32_t>(limits.workgroup_size, 1);
  const std::uint32_t max_groups = std::max<std::uint32_t>(limits.max_group_count, 1);

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
        command.src_offset + std::uint64_t{first} * command.image_stride;
    const std::uint64_t dst_start = command.dst_offset + std::uint64_t{first} * image_output_bytes;
    NormalizeDispatch dispatch;
    dispatch.first_image = first;
    dispatch.src_window_offset = align_down(src_start, alignment);
    dispatch.dst_window_offset = align_down(dst_start, alignment);
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

    const std::uint64_t pixels = images * image_pixels;
    dispatch.group_count = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
        (pixels + workgroup_size - 1) / workgroup_size, 1, max_groups));

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
    push.step_x = static_cast<std::uint32_t>(stride % width);
    push.step_rows = static_cast<std::uint32_t>(stride / width % height);
    push.step_images = static_cast<std::uint32_t>(stride / width / height);
    for (std::uint32_t c = 0; c < shaders::kNormalizeMaxChannels; ++c) {
      push.scale_bits[c] = c < channels ? std::bit_cast<std::uint32_t>(command.scale[c]) : 0;
      push.bias_bits[c] = c < channels ? std::bit_cast<std::uint32_t>(command.bias[c]) : 0;
    }

    dispatches.push_back(dispatch);
    first += static_cast<std::uint32_t>(images);
  }
  return dispatches;
}

}  // namespace ferry::vulkan
