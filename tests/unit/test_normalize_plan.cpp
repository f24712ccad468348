// Splitting a normalize into dispatches of shaders/normalize.comp (pure function, no GPU). The
// shader's addressing is replayed on the host, invocation by invocation, to check that every
// output element is written once, from the right source byte, inside the bound windows.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "vulkan/normalize_plan.hpp"

namespace {

using ferry::ElementType;
using ferry::ErrorCode;
using ferry::ImageLayout;
using ferry::backend::NormalizeCommand;
using ferry::vulkan::NormalizeDispatch;
using ferry::vulkan::NormalizeLimits;
using ferry::vulkan::plan_normalize;

// Absolute source byte of output element (n, c, y, x), straight from backend.hpp's definition.
std::uint64_t source_byte(const NormalizeCommand& command, std::uint64_t n, std::uint64_t c,
                          std::uint64_t y, std::uint64_t x) {
  const std::uint64_t xs = command.mirror ? command.width - 1 - x : x;
  return command.src_offset + n * command.image_stride + c * command.channel_stride +
         y * command.row_stride + xs * command.pixel_stride;
}

// Absolute destination element index (from byte 0 of dst) of output element (n, c, y, x).
std::uint64_t destination_element(const NormalizeCommand& command, std::uint64_t n,
                                  std::uint64_t c, std::uint64_t y, std::uint64_t x) {
  const std::uint64_t first = command.dst_offset / ferry::element_size(command.output_type);
  if (command.output_layout == ImageLayout::nchw) {
    return first + ((n * command.channels + c) * command.height + y) * command.width + x;
  }
  return first + ((n * command.height + y) * command.width + x) * command.channels + c;
}

// normalize.comp's main loop for one dispatch, in the shader's 32-bit arithmetic. Maps each
// absolute destination element written to the absolute source byte it was computed from.
void replay(const NormalizeDispatch& dispatch, std::uint32_t workgroup_size,
            std::uint64_t element_bytes, std::map<std::uint64_t, std::uint64_t>& written) {
  const auto& push = dispatch.push;
  const std::uint32_t stride = dispatch.group_count * workgroup_size;
  for (std::uint32_t invocation = 0; invocation < stride; ++invocation) {
    std::uint32_t pixel = invocation;
    std::uint32_t x = pixel % push.width;
    std::uint32_t y = (pixel / push.width) % push.height;
    std::uint32_t image = pixel / push.width / push.height;
    while (image < push.image_count) {
      const std::uint32_t src_pixel = push.src_origin + image * push.image_stride +
                                      y * push.row_stride + x * push.pixel_step;
      const std::uint32_t dst_pixel =
          push.dst_origin + pixel * push.pixel_elements + image * push.image_gap;
      for (std::uint32_t c = 0; c < push.channels; ++c) {
        const std::uint32_t src_byte = src_pixel + c * push.channel_stride;
        const std::uint32_t index = dst_pixel + c * push.channel_elements;
        REQUIRE(src_byte < dispatch.src_window_size);
        REQUIRE((std::uint64_t{index} + 1) * element_bytes <= dispatch.dst_window_size);
        const std::uint64_t element = dispatch.dst_window_offset / element_bytes + index;
        REQUIRE_MESSAGE(written.count(element) == 0, "element " << element << " written twice");
        written[element] = dispatch.src_window_offset + src_byte;
      }
      pixel += stride;
      x += push.step_x;
      y += push.step_rows;
      image += push.step_images;
      if (x >= push.width) {
        x -= push.width;
        ++y;
      }
      if (y >= push.height) {
        y -= push.height;
        ++image;
      }
    }
  }
}

// Returns the number of dispatches.
std::size_t check_plan(const NormalizeCommand& command, const NormalizeLimits& limits) {
  CAPTURE(command.batch);
  CAPTURE(command.channels);
  CAPTURE(command.height);
  CAPTURE(command.width);
  CAPTURE(command.src_offset);
  CAPTURE(command.dst_offset);
  CAPTURE(command.mirror);
  CAPTURE(limits.max_window_bytes);
  CAPTURE(limits.offset_alignment);
  const auto planned = plan_normalize(command, limits);
  REQUIRE_MESSAGE(planned.ok(), planned.status().to_string());
  const std::vector<NormalizeDispatch>& dispatches = *planned;
  REQUIRE_FALSE(dispatches.empty());

  const std::uint64_t element_bytes = ferry::element_size(command.output_type);
  std::uint32_t next_image = 0;
  for (const NormalizeDispatch& dispatch : dispatches) {
    CHECK(dispatch.first_image == next_image);
    CHECK(dispatch.push.image_count >= 1);
    next_image += dispatch.push.image_count;
    CHECK(dispatch.src_window_offset % limits.offset_alignment == 0);
    CHECK(dispatch.dst_window_offset % limits.offset_alignment == 0);
    CHECK(dispatch.src_window_size <= limits.max_window_bytes);
    CHECK(dispatch.dst_window_size <= limits.max_window_bytes);
    CHECK(dispatch.src_window_offset + dispatch.src_window_size <=
          command.src_offset + command.input_span());
    CHECK(dispatch.dst_window_offset + dispatch.dst_window_size <=
          command.dst_offset + command.output_bytes());
    CHECK(dispatch.group_count >= 1);
    CHECK(dispatch.group_count <= limits.max_group_count);
  }
  CHECK(next_image == command.batch);

  std::map<std::uint64_t, std::uint64_t> written;
  for (const NormalizeDispatch& dispatch : dispatches) {
    replay(dispatch, limits.workgroup_size, element_bytes, written);
  }
  REQUIRE(written.size() == command.output_elements());
  for (std::uint64_t n = 0; n < command.batch; ++n) {
    for (std::uint64_t c = 0; c < command.channels; ++c) {
      for (std::uint64_t y = 0; y < command.height; ++y) {
        for (std::uint64_t x = 0; x < command.width; ++x) {
          const auto found = written.find(destination_element(command, n, c, y, x));
          REQUIRE(found != written.end());
          REQUIRE(found->second == source_byte(command, n, c, y, x));
        }
      }
    }
  }
  return dispatches.size();
}

std::uint32_t pick(std::mt19937_64& rng, std::uint32_t lo, std::uint32_t hi) {
  return std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng);
}

// A random command as core would resolve it (strides consistent with a real layout).
NormalizeCommand random_command(std::mt19937_64& rng) {
  NormalizeCommand command;
  command.batch = pick(rng, 1, 5);
  command.channels = pick(rng, 1, 4);
  command.height = pick(rng, 1, 9);
  command.width = pick(rng, 1, 13);
  const bool planar = pick(rng, 0, 1) != 0;
  command.pixel_stride = planar ? 1 : command.channels;
  command.row_stride = std::uint64_t{command.width} * command.pixel_stride + pick(rng, 0, 5);
  command.channel_stride = planar ? command.row_stride * command.height + pick(rng, 0, 7) : 1;
  const std::uint64_t image_bytes =
      planar ? command.channel_stride * command.channels : command.row_stride * command.height;
  command.image_stride = image_bytes + pick(rng, 0, 9);
  command.src_offset = pick(rng, 0, 100);
  command.output_type = static_cast<ElementType>(pick(rng, 0, 2));
  command.dst_offset = std::uint64_t{pick(rng, 0, 40)} * ferry::element_size(command.output_type);
  command.output_layout = pick(rng, 0, 1) != 0 ? ImageLayout::nchw : ImageLayout::nhwc;
  command.mirror = pick(rng, 0, 1) != 0;
  return command;
}

}  // namespace

TEST_CASE("normalize plan: one dispatch when everything fits one window") {
  NormalizeCommand command;
  command.batch = 2;
  command.channels = 3;
  command.height = 5;
  command.width = 7;
  command.pixel_stride = 3;
  command.row_stride = 21;
  command.channel_stride = 1;
  command.image_stride = 105;
  command.src_offset = 19;
  command.dst_offset = 12;
  NormalizeLimits limits;
  limits.workgroup_size = 8;
  const auto planned = plan_normalize(command, limits);
  REQUIRE(planned.ok());
  REQUIRE(planned->size() == 1);
  const NormalizeDispatch& dispatch = planned->front();
  CHECK(dispatch.src_window_offset == 16);
  CHECK(dispatch.push.src_origin == 3);
  CHECK(dispatch.dst_window_offset == 0);
  CHECK(dispatch.push.dst_origin == 3);
  CHECK(dispatch.group_count == 9);  // 70 pixels in groups of 8
  CHECK(check_plan(command, limits) == 1);
}

TEST_CASE("normalize plan: random shapes, whole and split into windows, replayed") {
  std::mt19937_64 rng(42);
  int split = 0;
  for (int i = 0; i < 400; ++i) {
    const NormalizeCommand command = random_command(rng);
    NormalizeLimits limits;
    limits.offset_alignment = std::uint64_t{1} << pick(rng, 2, 8);
    limits.workgroup_size = pick(rng, 1, 3) * 8;
    limits.max_group_count = pick(rng, 1, 6);
    // A window from barely one image (plus alignment) up to everything.
    const std::uint64_t image_in =
        command.input_span() - (command.batch - 1) * command.image_stride;
    const std::uint64_t image_out = command.output_bytes() / command.batch;
    const std::uint64_t smallest = std::max(image_in, image_out) + limits.offset_alignment - 1;
    limits.max_window_bytes = smallest + pick(rng, 0, 3) * std::max(image_in, image_out);
    split += check_plan(command, limits) > 1;
  }
  CHECK(split > 100);
}

TEST_CASE("normalize plan: an image larger than a window is a clear error") {
  NormalizeCommand command;
  command.batch = 3;
  command.channels = 1;
  command.height = 64;
  command.width = 64;
  command.pixel_stride = 1;
  command.row_stride = 64;
  command.channel_stride = 1;
  command.image_stride = 4096;
  NormalizeLimits limits;
  limits.max_window_bytes = 8192;  // the input fits, the 16 KiB of float32 output does not
  const auto planned = plan_normalize(command, limits);
  REQUIRE_FALSE(planned.ok());
  CHECK(planned.status().code() == ErrorCode::resource_exhausted);
  const std::string& message = planned.status().message();
  CAPTURE(message);
  CHECK(message.find("16384 bytes") != std::string::npos);
  CHECK(message.find("8192 bytes") != std::string::npos);
  CHECK(message.find("maxStorageBufferRange") != std::string::npos);

  command.output_type = ElementType::float16;  // 8 KiB of output: fits exactly
  CHECK(plan_normalize(command, limits).ok());
  command.dst_offset = 2;  // ... but not 2 bytes past an aligned start
  CHECK(plan_normalize(command, limits).status().code() == ErrorCode::resource_exhausted);
}

TEST_CASE("normalize plan: a huge unused pitch does not need to fit 32 bits") {
  // One row of one image: the row and image pitches are never stepped over.
  NormalizeCommand command;
  command.batch = 1;
  command.channels = 2;
  command.height = 1;
  command.width = 5;
  command.pixel_stride = 1;
  command.channel_stride = 8;
  command.row_stride = std::uint64_t{1} << 40;
  command.image_stride = std::uint64_t{1} << 41;
  command.mirror = true;
  CHECK(check_plan(command, NormalizeLimits{}) == 1);
}
