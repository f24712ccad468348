// normalize: parameter validation, the factors every backend applies, 16-bit float encodings.
#include "ferry/normalize.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

namespace ferry {

std::string_view to_string(ImageLayout layout) noexcept {
  switch (layout) {
    case ImageLayout::nhwc: return "nhwc";
    case ImageLayout::nchw: return "nchw";
  }
  return "unknown layout";
}

std::string_view to_string(ElementType type) noexcept {
  switch (type) {
    case ElementType::float32: return "float32";
    case ElementType::float16: return "float16";
    case ElementType::bfloat16: return "bfloat16";
  }
  return "unknown element type";
}

std::uint32_t element_size(ElementType type) noexcept {
  return type == ElementType::float32 ? 4 : 2;
}

namespace {

constexpr const char* kCall = "normalize";

Status invalid(const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(kCall) + ": " + what);
}

// Multiplies with overflow detection.
bool multiply(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}

struct ResolvedPitches {
  std::uint64_t pixel = 0;    // bytes between horizontally adjacent pixels of one channel
  std::uint64_t channel = 0;  // bytes between channels of one pixel
  std::uint64_t row = 0;
  std::uint64_t image = 0;
  std::uint64_t image_bytes = 0;  // bytes from an image's first to one past its last byte
};

Result<ResolvedPitches> resolve_pitches(const ImageBatchLayout& in) {
  if (in.batch == 0 || in.height == 0 || in.width == 0) {
    return invalid("input batch, height and width must be > 0 (got " + std::to_string(in.batch) +
                   "x" + std::to_string(in.height) + "x" + std::to_string(in.width) + ")");
  }
  if (in.channels < 1 || in.channels > kMaxNormalizeChannels) {
    return invalid("input channels must be 1 to 4 (got " + std::to_string(in.channels) + ")");
  }
  if (in.layout != ImageLayout::nhwc && in.layout != ImageLayout::nchw) {
    return invalid("unknown input layout " + std::to_string(static_cast<int>(in.layout)));
  }
  const bool planar = in.layout == ImageLayout::nchw;
  ResolvedPitches p;
  p.pixel = planar ? 1 : in.channels;
  const std::uint64_t row_bytes = std::uint64_t{in.width} * p.pixel;
  p.row = in.row_pitch != 0 ? in.row_pitch : row_bytes;
  if (p.row < row_bytes) {
    return invalid("input row_pitch " + std::to_string(p.row) + " is smaller than a row (" +
                   std::to_string(row_bytes) + " bytes)");
  }
  std::uint64_t plane_bytes = 0;  // one channel plane (nchw) or the whole pixel grid (nhwc)
  if (!multiply(p.row, in.height - 1, plane_bytes)) return invalid("input pitches overflow");
  plane_bytes += row_bytes;
  if (planar) {
    std::uint64_t tight_plane = 0;
    if (!multiply(p.row, in.height, tight_plane)) return invalid("input pitches overflow");
    p.channel = in.plane_pitch != 0 ? in.plane_pitch : tight_plane;
    if (p.channel < plane_bytes) {
      return invalid("input plane_pitch " + std::to_string(p.channel) +
                     " is smaller than a channel plane (" + std::to_string(plane_bytes) +
                     " bytes)");
    }
    if (!multiply(p.channel, in.channels - 1, p.image_bytes)) {
      return invalid("input pitches overflow");
    }
    p.image_bytes += plane_bytes;
  } else {
    if (in.plane_pitch != 0) return invalid("plane_pitch applies to nchw input only; leave it 0");
    p.channel = 1;
    p.image_bytes = plane_bytes;
  }
  p.image = in.image_pitch != 0 ? in.image_pitch : p.image_bytes;
  if (p.image < p.image_bytes) {
    return invalid("input image_pitch " + std::to_string(p.image) +
                   " is smaller than an image (" + std::to_string(p.image_bytes) + " bytes)");
  }
  std::uint64_t last_image = 0;
  if (!multiply(p.image, in.batch - 1, last_image) ||
      last_image > std::numeric_limits<std::uint64_t>::max() - p.image_bytes) {
    return invalid("input pitches overflow");
  }
  return p;
}

}  // namespace

std::uint64_t ImageBatchLayout::span_bytes() const noexcept {
  auto pitches = resolve_pitches(*this);
  if (!pitches.ok()) return 0;
  return pitches->image * (batch - 1) + pitches->image_bytes;
}

Result<NormalizeShape> resolve_normalize(const NormalizeParams& params) {
  FERRY_ASSIGN_OR_RETURN(ResolvedPitches pitches, resolve_pitches(params.input));
  const ImageBatchLayout& in = params.input;
  const CropWindow& crop = params.crop;
  const std::uint32_t width = crop.width != 0 ? crop.width : in.width - std::min(crop.x, in.width);
  const std::uint32_t height =
      crop.height != 0 ? crop.height : in.height - std::min(crop.y, in.height);
  if (crop.x >= in.width || crop.y >= in.height || width == 0 || height == 0 ||
      width > in.width - crop.x || height > in.height - crop.y) {
    return Status(ErrorCode::out_of_range,
                  std::string(kCall) + ": crop window (x " + std::to_string(crop.x) + ", y " +
                      std::to_string(crop.y) + ", " + std::to_string(crop.width) + "x" +
                      std::to_string(crop.height) + ") is outside the " +
                      std::to_string(in.width) + "x" + std::to_string(in.height) + " image");
  }
  if (params.output_type != ElementType::float32 && params.output_type != ElementType::float16 &&
      params.output_type != ElementType::bfloat16) {
    return invalid("unknown output type " + std::to_string(static_cast<int>(params.output_type)));
  }
  if (params.output_layout != ImageLayout::nhwc && params.output_layout != ImageLayout::nchw) {
    return invalid("unknown output layout " +
                   std::to_string(static_cast<int>(params.output_layout)));
  }
  NormalizeShape shape;
  shape.batch = in.batch;
  shape.channels = in.channels;
  shape.height = height;
  shape.width = width;
  shape.pixel_stride = pitches.pixel;
  shape.channel_stride = pitches.channel;
  shape.row_stride = pitches.row;
  shape.image_stride = pitches.image;
  shape.input_bytes = pitches.image * (in.batch - 1) + pitches.image_bytes;
  std::uint64_t elements = 0;
  if (!multiply(std::uint64_t{in.batch} * in.channels, std::uint64_t{height} * width, elements) ||
      !multiply(elements, element_size(params.output_type), shape.output_bytes)) {
    return invalid("output size overflows");
  }
  return shape;
}

Result<NormalizeFactors> normalize_factors(const NormalizeParams& params) {
  NormalizeFactors factors;
  const std::uint32_t channels = std::min(params.input.channels, kMaxNormalizeChannels);
  for (std::uint32_t c = 0; c < channels; ++c) {
    const double mean = params.mean[c];
    const double std_dev = params.std[c];
    const std::string channel = "channel " + std::to_string(c);
    if (!std::isfinite(std_dev) || std_dev == 0.0) {
      return invalid("std of " + channel + " must be finite and non-zero (got " +
                     std::to_string(std_dev) + ")");
    }
    if (!std::isfinite(mean)) {
      return invalid("mean of " + channel + " must be finite (got " + std::to_string(mean) + ")");
    }
    const double scale = 1.0 / std_dev;
    const double bias = -mean / std_dev;
    const double max_float = std::numeric_limits<float>::max();
    if (!(std::fabs(scale) <= max_float) || !(std::fabs(bias) <= max_float)) {
      return invalid("1/std or mean/std of " + channel + " overflows float (std " +
                     std::to_string(std_dev) + ", mean " + std::to_string(mean) + ")");
    }
    factors.scale[c] = static_cast<float>(scale);
    factors.bias[c] = static_cast<float>(bias);
    if (!std::isfinite(factors.scale[c]) || !std::isfinite(factors.bias[c])) {
      return invalid("1/std or mean/std of " + channel + " rounds to infinity in float");
    }
  }
  return factors;
}

// ---- 16-bit encodings (integer code: no dependence on the host's float environment) ----

std::uint16_t to_float16_bits(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u) {
    // At or above 65520 (the midpoint between the largest half, 65504, and 65536): infinity.
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (magnitude >= 0x38800000u) {
    // Normal half: drop 13 mantissa bits, round to nearest even (a carry into the exponent is
    // the right result).
    const std::uint32_t rebased = magnitude - ((127u - 15u) << 23);
    const std::uint32_t rounded = rebased + 0x0fffu + ((rebased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  if (magnitude < 0x33000000u) return static_cast<std::uint16_t>(sign);  // below half the least subnormal
  // Subnormal half: the value in units of 2^-24, rounded to nearest even.
  const std::uint32_t exponent = magnitude >> 23;              // 102..112
  const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;                 // 14..24
  const std::uint32_t truncated = mantissa >> shift;
  const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  const std::uint32_t rounded =
      truncated + ((remainder > half || (remainder == half && (truncated & 1u))) ? 1u : 0u);
  return static_cast<std::uint16_t>(sign | rounded);
}

std::uint16_t to_bfloat16_bits(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // NaN stays a (quiet) NaN
  }
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float from_float16_bits(std::uint16_t half) noexcept {
  const std::uint32_t sign = std::uint32_t{half & 0x8000u} << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 127u - 15u) << 23) | (mantissa << 13));
  }
  // Zero or subnormal: mantissa * 2^-24, exact in float.
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  return sign != 0 ? -magnitude : magnitude;
}

float from_bfloat16_bits(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(std::uint32_t{bits} << 16);
}

}  // namespace ferry
