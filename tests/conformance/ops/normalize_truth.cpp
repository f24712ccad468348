#include "normalize_truth.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

using ferry::ElementType;
using ferry::ImageLayout;
using ferry::NormalizeParams;

namespace ferry_test {
namespace {

std::uint16_t half_bits(float value) {
  const auto half = static_cast<_Float16>(value);  // the compiler's conversion: nearest even
  std::uint16_t bits = 0;
  std::memcpy(&bits, &half, sizeof bits);
  return bits;
}

// The bfloat16 nearest to `value` (ties to the even encoding), found by comparing the two
// candidates around it in double, where the differences are exact.
std::uint16_t bfloat16_bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  const auto below = static_cast<std::uint16_t>(bits >> 16);  // toward zero
  if ((bits & 0xffffu) == 0) return below;
  const auto above = static_cast<std::uint16_t>(below + 1);  // away from zero (maybe infinity)
  auto as_double = [](std::uint16_t b) {
    const std::uint32_t wide = std::uint32_t{b} << 16;
    float f = 0;
    std::memcpy(&f, &wide, sizeof f);
    return static_cast<double>(f);
  };
  const double v = value;
  double up = as_double(above);
  if (std::isinf(up)) {
    // Rounding to infinity happens from the midpoint between the largest finite bfloat16 and
    // 2^128 on.
    up = std::ldexp(1.0, 128) * (value < 0 ? -1.0 : 1.0);
  }
  const double d_below = std::fabs(v - as_double(below));
  const double d_above = std::fabs(up - v);
  if (d_below < d_above) return below;
  if (d_above < d_below) return above;
  return (below & 1u) == 0 ? below : above;
}

struct Factors {
  float scale[4];
  float bias[4];
};

Factors factors_of(const NormalizeParams& p) {
  Factors f{};
  for (std::uint32_t c = 0; c < p.input.channels; ++c) {
    f.scale[c] = static_cast<float>(1.0 / p.std[c]);
    f.bias[c] = static_cast<float>(-p.mean[c] / p.std[c]);
  }
  return f;
}

std::uint64_t input_index(const ferry::ImageBatchLayout& in, std::uint64_t n, std::uint64_t c,
                          std::uint64_t y, std::uint64_t x) {
  const bool planar = in.layout == ImageLayout::nchw;
  const std::uint64_t pixel = planar ? 1 : in.channels;
  const std::uint64_t row = in.row_pitch ? in.row_pitch : in.width * pixel;
  const std::uint64_t plane = planar ? (in.plane_pitch ? in.plane_pitch : row * in.height) : 1;
  const std::uint64_t image_bytes = planar ? plane * (in.channels - 1) + row * (in.height - 1) + in.width
                                           : row * (in.height - 1) + in.width * in.channels;
  const std::uint64_t image = in.image_pitch ? in.image_pitch : image_bytes;
  return n * image + c * plane + y * row + x * pixel;
}

// The expected output bytes of `params` applied to `input` (which starts at the op's offset).
}  // namespace

std::vector<std::byte> expected_output(const NormalizeParams& p, std::span<const std::byte> input) {
  const std::uint32_t channels = p.input.channels;
  const std::uint32_t width = p.crop.width ? p.crop.width : p.input.width - p.crop.x;
  const std::uint32_t height = p.crop.height ? p.crop.height : p.input.height - p.crop.y;
  const std::uint32_t esize = p.output_type == ElementType::float32 ? 4 : 2;
  const Factors f = factors_of(p);
  std::vector<std::byte> out(std::uint64_t{p.input.batch} * channels * height * width * esize);
  for (std::uint64_t n = 0; n < p.input.batch; ++n) {
    for (std::uint64_t c = 0; c < channels; ++c) {
      for (std::uint64_t y = 0; y < height; ++y) {
        for (std::uint64_t x = 0; x < width; ++x) {
          const std::uint64_t sx = p.mirror ? width - 1 - x : x;
          const auto byte = std::to_integer<std::uint8_t>(
              input[input_index(p.input, n, c, p.crop.y + y, p.crop.x + sx)]);
          const float value = std::fma(static_cast<float>(byte), f.scale[c], f.bias[c]);
          const std::uint64_t index =
              p.output_layout == ImageLayout::nchw
                  ? ((n * channels + c) * height + y) * width + x
                  : ((n * height + y) * width + x) * channels + c;
          if (p.output_type == ElementType::float32) {
            std::memcpy(&out[index * 4], &value, 4);
          } else {
            const std::uint16_t bits =
                p.output_type == ElementType::float16 ? half_bits(value) : bfloat16_bits(value);
            std::memcpy(&out[index * 2], &bits, 2);
          }
        }
      }
    }
  }
  return out;
}

std::string describe(const NormalizeParams& p, std::uint64_t src_offset,
                     std::uint64_t dst_offset) {
  std::ostringstream s;
  s << "input " << p.input.batch << "x" << p.input.height << "x" << p.input.width << "x"
    << p.input.channels << " " << ferry::to_string(p.input.layout) << " pitches(row "
    << p.input.row_pitch << ", plane " << p.input.plane_pitch << ", image " << p.input.image_pitch
    << ") crop(" << p.crop.x << "," << p.crop.y << " " << p.crop.width << "x" << p.crop.height
    << ") mirror " << p.mirror << " -> " << ferry::to_string(p.output_type) << " "
    << ferry::to_string(p.output_layout) << " src_offset " << src_offset << " dst_offset "
    << dst_offset << " mean/std";
  for (std::uint32_t c = 0; c < p.input.channels; ++c) s << " " << p.mean[c] << "/" << p.std[c];
  return s.str();
}

}  // namespace ferry_test
