// The normalize op on the common shape, tightly packed 3-channel NHWC images to NCHW, which the
// CUDA backend runs on a path of its own (32-bit source loads, byte extraction, several runs per
// thread) when the source rows are word-aligned and the width a multiple of 4: placements that
// take it and placements next to them that do not, with every byte value in every channel,
// mirrored or not, and factors that overflow and underflow the 16-bit types. Every backend must
// agree bit for bit with the truth.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "device_io.hpp"
#include "harness.hpp"
#include "normalize_truth.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::ElementType;
using ferry::ImageLayout;
using ferry::NormalizeParams;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;
using ferry_test::describe;
using ferry_test::expected_output;

namespace {

struct Placement {
  const char* what;
  std::uint64_t src_offset = 0;
  std::uint64_t row_padding = 0;    // bytes after each row (0: tight)
  std::uint64_t image_padding = 0;  // bytes after each image (0: tight)
  std::uint32_t crop_x = 0;
  std::uint32_t crop_width = 0;     // 0: the whole width
  std::uint32_t dst_elements = 0;   // dst offset, in output elements
};

constexpr std::uint32_t kBatch = 2;
constexpr std::uint32_t kHeight = 5;
constexpr std::uint32_t kWidth = 64;
constexpr std::uint64_t kGuard = 24;

}  // namespace

TEST_CASE("normalize: packed 3-channel images to NCHW, word-aligned or not, match the truth") {
  const Placement placements[] = {
      {"tight, aligned"},
      {"padded rows and images, aligned", 4, 4, 8},
      {"cropped by 4 columns, aligned", 8, 0, 0, 4, 56},
      {"odd source offset", 1},
      {"source offset 2", 2},
      {"row padding 2", 0, 2},
      {"image padding 1", 0, 0, 1},
      {"cropped by 1 column", 0, 0, 0, 1, 60},
      {"width not a multiple of 4", 0, 0, 0, 0, 62},
      {"destination one element in", 0, 0, 0, 0, 0, 1},
  };
  // mean x3, std x3: the ImageNet constants; then results that overflow float16 (channel 0),
  // fall into float16 subnormals and zeros (channel 1), and overflow float32 (channel 2).
  const std::array<std::array<double, 6>, 2> factor_sets = {{
      {0.485 * 255, 0.456 * 255, 0.406 * 255, 0.229 * 255, 0.224 * 255, 0.225 * 255},
      {0.0, 5.0, 0.0, 1e-3, 3e8, 1e-37},
  }};
  ferry_test::for_each_backend({"normalize"}, [&](BackendUnderTest& t) {
    struct Prepared {
      std::string what;
      NormalizeParams params;
      std::uint64_t src_offset = 0;
      std::uint64_t dst_offset = 0;
      std::vector<std::byte> input;
      Buffer src;
      Buffer dst;
      std::uint64_t out_bytes = 0;
    };
    std::vector<Prepared> prepared;
    CommandList commands;
    for (const Placement& placement : placements) {
      for (const auto& factors : factor_sets) {
        for (ElementType type : {ElementType::float32, ElementType::float16,
                                 ElementType::bfloat16}) {
          for (bool mirror : {false, true}) {
            Prepared p;
            NormalizeParams& params = p.params;
            params.input = {kBatch, kHeight, kWidth, 3, ImageLayout::nhwc};
            const std::uint64_t row = std::uint64_t{kWidth} * 3;
            if (placement.row_padding != 0) params.input.row_pitch = row + placement.row_padding;
            const std::uint64_t row_pitch = row + placement.row_padding;
            if (placement.image_padding != 0) {
              params.input.image_pitch = row_pitch * kHeight + placement.image_padding;
            }
            if (placement.crop_width != 0) {
              params.crop = {placement.crop_x, 0, placement.crop_width, kHeight};
            }
            params.mirror = mirror;
            params.output_type = type;
            params.output_layout = ImageLayout::nchw;
            for (int c = 0; c < 3; ++c) {
              params.mean[c] = factors[c];
              params.std[c] = factors[3 + c];
            }
            p.what = placement.what;
            p.src_offset = placement.src_offset;
            p.dst_offset = std::uint64_t{placement.dst_elements} * ferry::element_size(type);
            INFO(p.what << ": " << describe(params, p.src_offset, p.dst_offset));
            const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
            // Byte i of the images is i % 256 (plus a random tail): as 3 is odd, every channel
            // sees every byte value within 256 pixels.
            p.input = ferry_test::random_bytes(t.rng, p.src_offset + shape.input_bytes + 5);
            for (std::uint64_t i = 0; i < shape.input_bytes; ++i) {
              p.input[p.src_offset + i] = static_cast<std::byte>(i % 256);
            }
            p.out_bytes = shape.output_bytes;
            p.src = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, p.input));
            p.dst = REQUIRE_VALUE(ferry_test::device_buffer_with(
                t.device, ferry_test::poison_bytes(p.dst_offset + p.out_bytes + kGuard, 5)));
            REQUIRE_OK(ferry::normalize(commands, p.src, p.src_offset, p.dst, p.dst_offset, params));
            prepared.push_back(std::move(p));
          }
        }
      }
    }
    const ferry::TimelinePoint done =
        REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)));
    REQUIRE_OK(done.wait(ferry_test::kLongWait));
    for (const Prepared& p : prepared) {
      INFO(p.what << ": " << describe(p.params, p.src_offset, p.dst_offset));
      std::vector<std::byte> expected =
          ferry_test::poison_bytes(p.dst_offset + p.out_bytes + kGuard, 5);
      const std::vector<std::byte> values = expected_output(
          p.params, std::span<const std::byte>(p.input).subspan(p.src_offset));
      std::copy(values.begin(), values.end(),
                expected.begin() + static_cast<std::ptrdiff_t>(p.dst_offset));
      const auto actual =
          REQUIRE_VALUE(ferry_test::read_bytes(t.device, p.dst, 0, expected.size()));
      ferry_test::check_bytes_equal(actual, expected, "normalize output (with guard bytes)");
    }
  });
}
