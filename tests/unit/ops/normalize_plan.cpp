// Splitting a normalize into dispatches of shaders/normalize.comp (pure function, no GPU). The
// shader's addressing is replayed on the host, invocation by invocation, on its element path and
// its vector path, to check that every output element is written once, from the right source byte
// through the right channel's table, inside the bound windows, with aligned words and vectors.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "vulkan/ops/normalize_plan.hpp"

namespace {

using ferry::ElementType;
using ferry::ErrorCode;
using ferry::ImageLayout;
using ferry::vulkan::NormalizeDispatch;
using ferry::vulkan::NormalizeLimits;

// A normalize as the plan sees it: the op's arguments (ops/normalize.hpp) and where its first
// byte read and its output lie in their buffers.
struct PlannedNormalize : ferry::ops::NormalizeArgs {
  std::uint64_t src_offset = 0;
  std::uint64_t dst_offset = 0;
};

ferry::Result<std::vector<NormalizeDispatch>> plan_normalize(const PlannedNormalize& command,
                                                             const NormalizeLimits& limits) {
  return ferry::vulkan::plan_normalize(command, command.src_offset, command.dst_offset, limits);
}

// Absolute source byte of output element (n, c, y, x), straight from ops/normalize.hpp's
// definition.
std::uint64_t source_byte(const PlannedNormalize& command, std::uint64_t n, std::uint64_t c,
                          std::uint64_t y, std::uint64_t x) {
  const std::uint64_t xs = command.mirror ? command.width - 1 - x : x;
  return command.src_offset + n * command.image_stride + c * command.channel_stride +
         y * command.row_stride + xs * command.pixel_stride;
}

// Absolute destination element index (from byte 0 of dst) of output element (n, c, y, x).
std::uint64_t destination_element(const PlannedNormalize& command, std::uint64_t n,
                                  std::uint64_t c, std::uint64_t y, std::uint64_t x) {
  const std::uint64_t first = command.dst_offset / ferry::element_size(command.output_type);
  if (command.output_layout == ImageLayout::nchw) {
    return first + ((n * command.channels + c) * command.height + y) * command.width + x;
  }
  return first + ((n * command.height + y) * command.width + x) * command.channels + c;
}

// What the replay saw for one destination element: the absolute source byte it was computed from
// and the channel whose lookup table converted it.
struct Written {
  std::uint64_t source_byte = 0;
  std::uint32_t channel = 0;
};
using WrittenMap = std::map<std::uint64_t, Written>;

void record(WrittenMap& written, std::uint64_t element, std::uint64_t source_byte,
            std::uint32_t channel) {
  REQUIRE_MESSAGE(written.count(element) == 0, "element " << element << " written twice");
  written[element] = Written{source_byte, channel};
}

// The shader's grid walk: the position (image, y, x) of work item `item`, and the carry step.
struct GridPosition {
  std::uint32_t x = 0;
  std::uint32_t y = 0;
  std::uint32_t image = 0;

  GridPosition(std::uint32_t item, std::uint32_t runs_per_row, std::uint32_t height)
      : x(item % runs_per_row), y((item / runs_per_row) % height),
        image(item / runs_per_row / height) {}

  void advance(const ferry::shaders::NormalizePushConstants& push, std::uint32_t runs_per_row) {
    x += push.step_x;
    y += push.step_rows;
    image += push.step_images;
    if (x >= runs_per_row) {
      x -= runs_per_row;
      ++y;
    }
    if (y >= push.height) {
      y -= push.height;
      ++image;
    }
  }
};

// normalize.comp's element path for one dispatch, in the shader's 32-bit arithmetic.
void replay_elements(const NormalizeDispatch& dispatch, std::uint32_t workgroup_size,
                     std::uint64_t element_bytes, WrittenMap& written) {
  const auto& push = dispatch.push;
  const std::uint32_t stride = dispatch.group_count * workgroup_size;
  for (std::uint32_t invocation = 0; invocation < stride; ++invocation) {
    std::uint32_t pixel = invocation;
    GridPosition at(pixel, push.width, push.height);
    while (at.image < push.image_count) {
      const std::uint32_t src_pixel = push.src_origin + at.image * push.image_stride +
                                      at.y * push.row_stride + at.x * push.pixel_step;
      const std::uint32_t dst_pixel =
          push.dst_origin + pixel * push.pixel_elements + at.image * push.image_gap;
      for (std::uint32_t c = 0; c < push.channels; ++c) {
        const std::uint32_t src_byte = src_pixel + c * push.channel_stride;
        const std::uint32_t index = dst_pixel + c * push.channel_elements;
        REQUIRE(src_byte < dispatch.src_window_size);
        REQUIRE((std::uint64_t{index} + 1) * element_bytes <= dispatch.dst_window_size);
        record(written, dispatch.dst_window_offset / element_bytes + index,
               dispatch.src_window_offset + src_byte, c);
      }
      pixel += stride;
      at.advance(push, push.width);
    }
  }
}

// normalize.comp's vector path for one dispatch, in the shader's 32-bit arithmetic: runs of
// vector_pixels pixels loaded as words, stored as vectors of vector_pixels elements.
void replay_vectors(const NormalizeDispatch& dispatch, std::uint32_t workgroup_size,
                    std::uint64_t element_bytes, WrittenMap& written) {
  const auto& push = dispatch.push;
  const std::uint32_t run_pixels = dispatch.vector_pixels;
  const std::uint32_t channels = push.channels;
  // Runs of 8 pixels exist for 16-bit elements only (the pipelines have no such float32 path).
  REQUIRE((run_pixels == 4 || (run_pixels == 8 && element_bytes == 2)));
  const std::uint64_t vector_bytes = run_pixels * element_bytes;
  REQUIRE(push.width % run_pixels == 0);
  const std::uint32_t run_words = run_pixels * channels / 4;
  const std::uint32_t runs_per_row = push.width / run_pixels;
  const bool mirrored = static_cast<std::int32_t>(push.pixel_step) < 0;
  const std::uint32_t run_step = run_pixels * push.pixel_step;
  const std::uint32_t run_origin =
      push.src_origin + (mirrored ? (run_pixels - 1) * push.pixel_step : 0);
  const bool planar = channels == 1 || push.pixel_elements == 1;  // the pipeline's choice
  // The shader divides these by run_pixels; the host promised they are multiples.
  REQUIRE(push.dst_origin % run_pixels == 0);
  REQUIRE(push.image_gap % run_pixels == 0);
  if (planar && channels > 1) REQUIRE(push.channel_elements % run_pixels == 0);
  const std::uint32_t dst_first = push.dst_origin / run_pixels;
  const std::uint32_t image_gap = push.image_gap / run_pixels;
  const std::uint32_t vector_step = planar ? push.channel_elements / run_pixels : 1;
  const std::uint32_t run_vectors = planar ? 1 : channels;
  // Words and vectors are aligned in the buffer, not just in the window.
  REQUIRE(dispatch.src_window_offset % 4 == 0);
  REQUIRE(dispatch.dst_window_offset % vector_bytes == 0);

  const std::uint32_t stride = dispatch.group_count * workgroup_size;
  for (std::uint32_t invocation = 0; invocation < stride; ++invocation) {
    std::uint32_t run = invocation;
    GridPosition at(run, runs_per_row, push.height);
    while (at.image < push.image_count) {
      const std::uint32_t first_byte = run_origin + at.image * push.image_stride +
                                       at.y * push.row_stride + at.x * run_step;
      REQUIRE(first_byte % 4 == 0);
      const std::uint32_t first_word = first_byte >> 2;
      REQUIRE((std::uint64_t{first_word} + run_words) * 4 <= dispatch.src_window_size);
      const std::uint32_t first_vector = dst_first + run * run_vectors + at.image * image_gap;
      for (std::uint32_t k = 0; k < channels; ++k) {
        const std::uint32_t index = first_vector + k * vector_step;
        REQUIRE((std::uint64_t{index} + 1) * vector_bytes <= dispatch.dst_window_size);
        for (std::uint32_t i = 0; i < run_pixels; ++i) {
          const std::uint32_t element = k * run_pixels + i;
          const std::uint32_t pixel = planar ? i : element / channels;
          const std::uint32_t channel = planar ? k : element % channels;
          const std::uint32_t source_pixel = mirrored ? run_pixels - 1 - pixel : pixel;
          const std::uint32_t byte = source_pixel * channels + channel;  // in the run's words
          record(written,
                 dispatch.dst_window_offset / element_bytes + std::uint64_t{index} * run_pixels + i,
                 dispatch.src_window_offset + std::uint64_t{first_word} * 4 + byte, channel);
        }
      }
      run += stride;
      at.advance(push, runs_per_row);
    }
  }
}

void replay(const NormalizeDispatch& dispatch, const NormalizeLimits& limits,
            std::uint64_t element_bytes, WrittenMap& written) {
  if (dispatch.vector_pixels == 0) {
    replay_elements(dispatch, limits.element_grid.workgroup_size, element_bytes, written);
  } else {
    replay_vectors(dispatch, limits.vector_grid.workgroup_size, element_bytes, written);
  }
}

struct PlanSummary {
  std::size_t dispatches = 0;
  std::size_t vector_dispatches = 0;  // dispatches on the vector path
};

PlanSummary check_plan(const PlannedNormalize& command, const NormalizeLimits& limits) {
  CAPTURE(command.batch);
  CAPTURE(command.channels);
  CAPTURE(command.height);
  CAPTURE(command.width);
  CAPTURE(command.src_offset);
  CAPTURE(command.dst_offset);
  CAPTURE(command.mirror);
  CAPTURE(command.pixel_stride);
  CAPTURE(command.row_stride);
  CAPTURE(command.image_stride);
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
    const ferry::vulkan::NormalizeGrid& grid =
        dispatch.vector_pixels != 0 ? limits.vector_grid : limits.element_grid;
    CHECK(dispatch.group_count >= 1);
    CHECK(dispatch.group_count <= grid.max_group_count);
  }
  CHECK(next_image == command.batch);

  PlanSummary summary;
  summary.dispatches = dispatches.size();
  WrittenMap written;
  for (const NormalizeDispatch& dispatch : dispatches) {
    CAPTURE(dispatch.vector_pixels);
    summary.vector_dispatches += dispatch.vector_pixels != 0;
    replay(dispatch, limits, element_bytes, written);
  }
  REQUIRE(written.size() == command.output_elements());
  for (std::uint64_t n = 0; n < command.batch; ++n) {
    for (std::uint64_t c = 0; c < command.channels; ++c) {
      for (std::uint64_t y = 0; y < command.height; ++y) {
        for (std::uint64_t x = 0; x < command.width; ++x) {
          const auto found = written.find(destination_element(command, n, c, y, x));
          REQUIRE(found != written.end());
          REQUIRE(found->second.source_byte == source_byte(command, n, c, y, x));
          REQUIRE(found->second.channel == c);
        }
      }
    }
  }
  return summary;
}

std::uint32_t pick(std::mt19937_64& rng, std::uint32_t lo, std::uint32_t hi) {
  return std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng);
}

// A random command as core would resolve it (strides consistent with a real layout).
PlannedNormalize random_command(std::mt19937_64& rng) {
  PlannedNormalize command;
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

// A random command with interleaved, tightly packed input and a width that is a multiple of 4,
// mostly aligned for the vector path and sometimes not (odd pitches and offsets).
PlannedNormalize random_interleaved_command(std::mt19937_64& rng) {
  auto mostly_words = [&](std::uint32_t words) {
    return pick(rng, 0, 3) == 0 ? pick(rng, 1, 3) : 4 * pick(rng, 0, words);
  };
  PlannedNormalize command;
  command.batch = pick(rng, 1, 5);
  command.channels = pick(rng, 1, 4);
  command.height = pick(rng, 1, 6);
  command.width = 4 * pick(rng, 1, 6);
  command.pixel_stride = command.channels;
  command.channel_stride = 1;
  command.row_stride = std::uint64_t{command.width} * command.channels + mostly_words(2);
  command.image_stride = command.row_stride * command.height + mostly_words(3);
  command.src_offset = mostly_words(10);
  command.output_type = static_cast<ElementType>(pick(rng, 0, 2));
  // In elements: mostly multiples of 8, else of 4 or anything.
  const std::uint32_t dst_elements = pick(rng, 0, 2) != 0   ? 8 * pick(rng, 0, 4)
                                     : pick(rng, 0, 1) != 0 ? 4 * pick(rng, 0, 8)
                                                            : pick(rng, 0, 20);
  command.dst_offset = std::uint64_t{dst_elements} * ferry::element_size(command.output_type);
  command.output_layout = pick(rng, 0, 1) != 0 ? ImageLayout::nchw : ImageLayout::nhwc;
  command.mirror = pick(rng, 0, 1) != 0;
  return command;
}

// Random small limits, with a window from barely one image (plus alignment) up to everything.
NormalizeLimits random_limits(std::mt19937_64& rng, const PlannedNormalize& command,
                              std::uint32_t min_alignment_log2) {
  NormalizeLimits limits;
  limits.offset_alignment = std::uint64_t{1} << pick(rng, min_alignment_log2, 8);
  limits.element_grid.workgroup_size = pick(rng, 1, 3) * 8;
  limits.element_grid.max_group_count = pick(rng, 1, 6);
  limits.vector_grid.workgroup_size = pick(rng, 1, 3) * 4;
  limits.vector_grid.max_group_count = pick(rng, 1, 4);
  const std::uint64_t image_in = command.input_span() - (command.batch - 1) * command.image_stride;
  const std::uint64_t image_out = command.output_bytes() / command.batch;
  const std::uint64_t smallest = std::max(image_in, image_out) + limits.offset_alignment - 1;
  limits.max_window_bytes = smallest + pick(rng, 0, 3) * std::max(image_in, image_out);
  return limits;
}

// The vector path's run length for a command that fits one window of the default limits.
std::uint32_t planned_run_pixels(const PlannedNormalize& command) {
  const auto planned = plan_normalize(command, NormalizeLimits{});
  REQUIRE_MESSAGE(planned.ok(), planned.status().to_string());
  REQUIRE(planned->size() == 1);
  return planned->front().vector_pixels;
}

}  // namespace

TEST_CASE("normalize plan: one dispatch when everything fits one window") {
  PlannedNormalize command;
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
  limits.element_grid.workgroup_size = 8;
  const auto planned = plan_normalize(command, limits);
  REQUIRE(planned.ok());
  REQUIRE(planned->size() == 1);
  const NormalizeDispatch& dispatch = planned->front();
  CHECK(dispatch.src_window_offset == 16);
  CHECK(dispatch.push.src_origin == 3);
  CHECK(dispatch.dst_window_offset == 0);
  CHECK(dispatch.push.dst_origin == 3);
  CHECK(dispatch.group_count == 9);  // 70 pixels in groups of 8
  CHECK(check_plan(command, limits).dispatches == 1);
}

TEST_CASE("normalize plan: random shapes, whole and split into windows, replayed") {
  std::mt19937_64 rng(42);
  int split = 0;
  for (int i = 0; i < 400; ++i) {
    const PlannedNormalize command = random_command(rng);
    const NormalizeLimits limits = random_limits(rng, command, 2);
    split += check_plan(command, limits).dispatches > 1;
  }
  CHECK(split > 100);
}

TEST_CASE("normalize plan: interleaved input on the vector path, whole and split, replayed") {
  std::mt19937_64 rng(7);
  int split = 0;
  int vector = 0;          // commands with at least one dispatch on the vector path
  int split_vector = 0;    // ... of them split into several dispatches
  int element_only = 0;    // commands entirely on the element path
  for (int i = 0; i < 600; ++i) {
    const PlannedNormalize command = random_interleaved_command(rng);
    // Mostly the 16 bytes or more that real devices ask for; sometimes 4 or 8.
    const NormalizeLimits limits = random_limits(rng, command, pick(rng, 0, 3) == 0 ? 2 : 4);
    const PlanSummary summary = check_plan(command, limits);
    split += summary.dispatches > 1;
    vector += summary.vector_dispatches > 0;
    split_vector += summary.vector_dispatches > 0 && summary.dispatches > 1;
    element_only += summary.vector_dispatches == 0;
  }
  CHECK(split > 150);
  CHECK(vector > 150);
  CHECK(split_vector > 80);
  CHECK(element_only > 100);
}

TEST_CASE("normalize plan: the vector path is taken exactly when input and output are aligned") {
  // 2 images of 5 x 16 pixels, 3 channels, tightly packed: the ImageNet case.
  PlannedNormalize base;
  base.batch = 2;
  base.channels = 3;
  base.height = 5;
  base.width = 16;
  base.pixel_stride = 3;
  base.channel_stride = 1;
  base.row_stride = 48;
  base.image_stride = 240;
  auto with = [&](auto&& change) {
    PlannedNormalize command = base;
    change(command);
    CHECK(check_plan(command, NormalizeLimits{}).dispatches == 1);
    return planned_run_pixels(command);
  };
  using C = PlannedNormalize;
  for (const bool mirror : {false, true}) {
    for (const ImageLayout layout : {ImageLayout::nchw, ImageLayout::nhwc}) {
      CAPTURE(mirror);
      CAPTURE(static_cast<int>(layout));
      auto variant = [&](C& c) {
        c.mirror = mirror;
        c.output_layout = layout;
      };
      // float32: runs of 4 pixels, 16-byte vectors.
      CHECK(with([&](C& c) { variant(c); }) == 4);
      CHECK(with([&](C& c) { variant(c), c.src_offset = 8, c.dst_offset = 32; }) == 4);
      CHECK(with([&](C& c) { variant(c), c.dst_offset = 4; }) == 0);  // vectors misaligned
      CHECK(with([&](C& c) { variant(c), c.dst_offset = 8; }) == 0);
      CHECK(with([&](C& c) { variant(c), c.src_offset = 2; }) == 0);  // words misaligned
      CHECK(with([&](C& c) { variant(c), c.row_stride = 49, c.image_stride = 245; }) == 0);
      CHECK(with([&](C& c) { variant(c), c.row_stride = 52, c.image_stride = 260; }) == 4);
      CHECK(with([&](C& c) { variant(c), c.image_stride = 241; }) == 0);
      CHECK(with([&](C& c) { variant(c), c.image_stride = 241, c.batch = 1; }) == 4);
      CHECK(with([&](C& c) { variant(c), c.row_stride = 49, c.height = 1; }) == 4);
      CHECK(with([&](C& c) { variant(c), c.width = 12; }) == 4);
      CHECK(with([&](C& c) { variant(c), c.width = 14; }) == 0);  // no whole runs
      // 16-bit outputs: runs of 8 (16-byte vectors), else 4 (8-byte vectors).
      for (const ElementType type : {ElementType::float16, ElementType::bfloat16}) {
        auto half = [&](C& c) {
          variant(c);
          c.output_type = type;
        };
        CHECK(with([&](C& c) { half(c); }) == 8);
        CHECK(with([&](C& c) { half(c), c.dst_offset = 32; }) == 8);
        CHECK(with([&](C& c) { half(c), c.dst_offset = 8; }) == 4);
        CHECK(with([&](C& c) { half(c), c.dst_offset = 4; }) == 0);
        CHECK(with([&](C& c) { half(c), c.width = 12; }) == 4);
        CHECK(with([&](C& c) { half(c), c.width = 12, c.dst_offset = 8; }) == 4);
        CHECK(with([&](C& c) { half(c), c.width = 10; }) == 0);
        CHECK(with([&](C& c) { half(c), c.src_offset = 1; }) == 0);
      }
    }
  }
  // Other channel counts, interleaved and tightly packed; planar input never.
  for (std::uint32_t channels = 1; channels <= 4; ++channels) {
    CAPTURE(channels);
    CHECK(with([&](C& c) {
            c.channels = channels;
            c.pixel_stride = channels;
            c.row_stride = 16 * channels;
            c.image_stride = 80 * channels;
          }) == 4);
  }
  CHECK(with([&](C& c) {  // one channel of planar input is the same as interleaved
          c.channels = 1, c.pixel_stride = 1, c.row_stride = 16, c.image_stride = 80;
          c.channel_stride = 80;
        }) == 4);
  CHECK(with([&](C& c) {  // planar input
          c.pixel_stride = 1, c.channel_stride = 80, c.row_stride = 16, c.image_stride = 240;
        }) == 0);
  CHECK(with([&](C& c) {  // interleaved with a gap between pixels
          c.pixel_stride = 4, c.row_stride = 64, c.image_stride = 320;
        }) == 0);
}

TEST_CASE("normalize plan: the grid counts runs on the vector path") {
  PlannedNormalize command;
  command.batch = 3;
  command.channels = 3;
  command.height = 7;
  command.width = 24;
  command.pixel_stride = 3;
  command.channel_stride = 1;
  command.row_stride = 72;
  command.image_stride = 504;
  command.output_type = ElementType::float16;
  NormalizeLimits limits;
  limits.vector_grid.workgroup_size = 8;
  limits.vector_grid.max_group_count = 5;
  limits.element_grid.workgroup_size = 64;  // unused here
  const auto planned = plan_normalize(command, limits);
  REQUIRE(planned.ok());
  REQUIRE(planned->size() == 1);
  const NormalizeDispatch& dispatch = planned->front();
  CHECK(dispatch.vector_pixels == 8);
  CHECK(dispatch.group_count == 5);  // 63 runs of 8 pixels: more than 5 groups of 8
  // A stride of 40 runs = 1 image (21 runs) + 6 rows (18 runs) + 1 run.
  CHECK(dispatch.push.step_images == 1);
  CHECK(dispatch.push.step_rows == 6);
  CHECK(dispatch.push.step_x == 1);
  CHECK(check_plan(command, limits).vector_dispatches == 1);
  limits.vector_grid.max_group_count = 100;
  CHECK(plan_normalize(command, limits)->front().group_count == 8);  // ceil(63 / 8)
}

TEST_CASE("normalize plan: an image larger than a window is a clear error") {
  PlannedNormalize command;
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
  PlannedNormalize command;
  command.batch = 1;
  command.channels = 2;
  command.height = 1;
  command.width = 5;
  command.pixel_stride = 1;
  command.channel_stride = 8;
  command.row_stride = std::uint64_t{1} << 40;
  command.image_stride = std::uint64_t{1} << 41;
  command.mirror = true;
  CHECK(check_plan(command, NormalizeLimits{}).dispatches == 1);
}

TEST_CASE("normalize plan: FERRY_VULKAN_NORMALIZE_GRID overrides the grids and rejects bad specs") {
  using ferry::vulkan::override_normalize_limits;
  NormalizeLimits limits;
  limits.vector_grid = {1024, 132};
  limits.element_grid = {256, 1056};
  REQUIRE(override_normalize_limits("groups=264,in_flight=96", 1024, 65535, limits).ok());
  CHECK(limits.vector_grid.workgroup_size == 1024);
  CHECK(limits.vector_grid.max_group_count == 264);
  CHECK(limits.source_bytes_in_flight == 96);
  CHECK(limits.element_grid.workgroup_size == 256);
  CHECK(limits.element_grid.max_group_count == 1056);
  REQUIRE(override_normalize_limits("workgroup=512,element_workgroup=128,element_groups=7", 1024,
                                    65535, limits)
              .ok());
  CHECK(limits.vector_grid.workgroup_size == 512);
  CHECK(limits.vector_grid.max_group_count == 264);
  CHECK(limits.element_grid.workgroup_size == 128);
  CHECK(limits.element_grid.max_group_count == 7);
  CHECK(override_normalize_limits("", 1024, 65535, limits).ok());  // nothing to change

  for (const char* bad : {"workgroup=2048", "workgroup=0", "groups=70000", "in_flight=0",
                          "in_flight=4096", "element_groups=0", "threads=5", "groups",
                          "groups=", "groups=12x", "groups=-1", "groups=4,workgroup=9999"}) {
    CAPTURE(bad);
    const NormalizeLimits before = limits;
    const ferry::Status status = override_normalize_limits(bad, 1024, 65535, limits);
    CHECK(status.code() == ErrorCode::invalid_argument);
    CHECK(status.message().find(bad) != std::string::npos);
    // Unchanged on error, even by the items before the bad one.
    CHECK(limits.vector_grid.max_group_count == before.vector_grid.max_group_count);
    CHECK(limits.vector_grid.workgroup_size == before.vector_grid.workgroup_size);
    CHECK(limits.element_grid.max_group_count == before.element_grid.max_group_count);
  }
}
