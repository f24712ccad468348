// normalize: parameter validation, the factors every backend applies, the public call (lowering
// to ops::NormalizeArgs), the CPU reference, and the 16-bit float encodings.
#include "ferry/ops/normalize.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/checked.hpp"
#include "core/describe.hpp"
#include "core/op_record.hpp"
#include "ops/normalize.hpp"

namespace ferry {

std::string_view to_string(ImageLayout layout) noexcept {
  switch (layout) {
    case ImageLayout::nhwc: return "nhwc";
    case ImageLayout::nchw: return "nchw";
  }
  return "unknown layout";
}

namespace {

constexpr const char* kCall = "normalize";

Status invalid(const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(kCall) + ": " + what);
}

struct ResolvedPitches {
  std::uint64_t pixel = 0;    // bytes between horizontally adjacent pixels of one channel
  std::uint64_t channel = 0;  // bytes between channels of one pixel
  std::uint64_t row = 0;
  std::uint64_t image = 0;
  std::uint64_t image_bytes = 0;  // bytes from an image's first to one past its last byte
  std::uint64_t span = 0;         // bytes from the batch's first to one past its last byte
};

// What is wrong with a layout; resolving allocates nothing, so that span_bytes() can be noexcept.
enum class LayoutProblem {
  none,
  empty,
  channels,
  layout,
  row_pitch,
  plane_pitch,
  plane_pitch_nhwc,
  image_pitch,
  overflow,
};

LayoutProblem resolve_pitches(const ImageBatchLayout& in, ResolvedPitches& p) noexcept {
  if (in.batch == 0 || in.height == 0 || in.width == 0) return LayoutProblem::empty;
  if (in.channels < 1 || in.channels > kMaxNormalizeChannels) return LayoutProblem::channels;
  if (in.layout != ImageLayout::nhwc && in.layout != ImageLayout::nchw) return LayoutProblem::layout;
  const bool planar = in.layout == ImageLayout::nchw;
  p.pixel = planar ? 1 : in.channels;
  const std::uint64_t row_bytes = std::uint64_t{in.width} * p.pixel;
  p.row = in.row_pitch != 0 ? in.row_pitch : row_bytes;
  if (p.row < row_bytes) return LayoutProblem::row_pitch;
  // One channel plane (nchw) or the whole pixel grid (nhwc).
  const auto plane_bytes = detail::checked_mul_add(p.row, in.height - 1, row_bytes);
  if (!plane_bytes) return LayoutProblem::overflow;
  if (planar) {
    const auto tight_plane = detail::checked_mul(p.row, in.height);
    if (!tight_plane) return LayoutProblem::overflow;
    p.channel = in.plane_pitch != 0 ? in.plane_pitch : *tight_plane;
    if (p.channel < *plane_bytes) return LayoutProblem::plane_pitch;
    const auto image_bytes = detail::checked_mul_add(p.channel, in.channels - 1, *plane_bytes);
    if (!image_bytes) return LayoutProblem::overflow;
    p.image_bytes = *image_bytes;
  } else {
    if (in.plane_pitch != 0) return LayoutProblem::plane_pitch_nhwc;
    p.channel = 1;
    p.image_bytes = *plane_bytes;
  }
  p.image = in.image_pitch != 0 ? in.image_pitch : p.image_bytes;
  if (p.image < p.image_bytes) return LayoutProblem::image_pitch;
  const auto span = detail::checked_mul_add(p.image, in.batch - 1, p.image_bytes);
  if (!span) return LayoutProblem::overflow;
  p.span = *span;
  return LayoutProblem::none;
}

Result<ResolvedPitches> resolve_pitches(const ImageBatchLayout& in) {
  ResolvedPitches p;
  switch (resolve_pitches(in, p)) {
    case LayoutProblem::none: return p;
    case LayoutProblem::empty:
      return invalid("input batch, height and width must be > 0 (got " +
                     std::to_string(in.batch) + "x" + std::to_string(in.height) + "x" +
                     std::to_string(in.width) + ")");
    case LayoutProblem::channels:
      return invalid("input channels must be 1 to 4 (got " + std::to_string(in.channels) + ")");
    case LayoutProblem::layout:
      return invalid("unknown input layout " + std::to_string(static_cast<int>(in.layout)));
    case LayoutProblem::row_pitch:
      return invalid("input row_pitch " + std::to_string(p.row) + " is smaller than a row (" +
                     std::to_string(std::uint64_t{in.width} * p.pixel) + " bytes)");
    case LayoutProblem::plane_pitch:
      return invalid("input plane_pitch " + std::to_string(p.channel) +
                     " is smaller than a channel plane (" +
                     std::to_string(p.row * (in.height - 1) + std::uint64_t{in.width}) +
                     " bytes)");
    case LayoutProblem::plane_pitch_nhwc:
      return invalid("plane_pitch applies to nchw input only; leave it 0");
    case LayoutProblem::image_pitch:
      return invalid("input image_pitch " + std::to_string(p.image) +
                     " is smaller than an image (" + std::to_string(p.image_bytes) + " bytes)");
    case LayoutProblem::overflow: break;
  }
  return invalid("input pitches overflow 64 bits (batch " + std::to_string(in.batch) +
                 ", row_pitch " + std::to_string(in.row_pitch) + ", plane_pitch " +
                 std::to_string(in.plane_pitch) + ", image_pitch " +
                 std::to_string(in.image_pitch) + ")");
}

}  // namespace

std::uint64_t ImageBatchLayout::span_bytes() const noexcept {
  ResolvedPitches pitches;
  return resolve_pitches(*this, pitches) == LayoutProblem::none ? pitches.span : 0;
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
  shape.input_bytes = pitches.span;
  const auto elements =
      detail::checked_mul(std::uint64_t{in.batch} * in.channels, std::uint64_t{height} * width);
  const auto output_bytes =
      elements ? detail::checked_mul(*elements, element_size(params.output_type)) : std::nullopt;
  if (!output_bytes) return invalid("output size overflows 64 bits");
  shape.output_bytes = *output_bytes;
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
                     detail::describe_number(std_dev) + ")");
    }
    if (!std::isfinite(mean)) {
      return invalid("mean of " + channel + " must be finite (got " +
                     detail::describe_number(mean) + ")");
    }
    const double scale = 1.0 / std_dev;
    const double bias = -mean / std_dev;
    const double max_float = std::numeric_limits<float>::max();
    if (!(std::fabs(scale) <= max_float) || !(std::fabs(bias) <= max_float)) {
      return invalid("1/std or mean/std of " + channel + " overflows float (std " +
                     detail::describe_number(std_dev) + ", mean " +
                     detail::describe_number(mean) + ")");
    }
    factors.scale[c] = static_cast<float>(scale);
    factors.bias[c] = static_cast<float>(bias);
    if (!std::isfinite(factors.scale[c]) || !std::isfinite(factors.bias[c])) {
      return invalid("1/std or mean/std of " + channel + " rounds to infinity in float");
    }
  }
  return factors;
}

// ---- the public call ----

Status normalize(CommandList& commands, const BufferRef& src, std::uint64_t src_offset,
                 const BufferRef& dst, std::uint64_t dst_offset, const NormalizeParams& params) {
  static constexpr const char* kCall = "ferry::normalize";
  // Parameter errors read "normalize: ..." (resolve_normalize's wording).
  FERRY_ASSIGN_OR_RETURN(const NormalizeShape shape, resolve_normalize(params));
  FERRY_ASSIGN_OR_RETURN(const NormalizeFactors factors, normalize_factors(params));
  FERRY_RETURN_IF_ERROR(detail::check_range(src, kCall, "source", src_offset, shape.input_bytes));
  FERRY_RETURN_IF_ERROR(
      detail::check_range(dst, kCall, "destination", dst_offset, shape.output_bytes));
  const std::uint32_t element = element_size(params.output_type);
  if ((dst.base + dst_offset) % element != 0) {
    return Status(ErrorCode::invalid_argument,
                  std::string(kCall) + ": destination offset " +
                      std::to_string(dst.base + dst_offset) + " is not a multiple of the " +
                      std::to_string(element) + "-byte " +
                      std::string(to_string(params.output_type)) + " element");
  }
  ops::NormalizeArgs args;
  args.batch = shape.batch;
  args.channels = shape.channels;
  args.height = shape.height;
  args.width = shape.width;
  args.image_stride = shape.image_stride;
  args.channel_stride = shape.channel_stride;
  args.row_stride = shape.row_stride;
  args.pixel_stride = static_cast<std::uint32_t>(shape.pixel_stride);
  args.mirror = params.mirror;
  args.output_type = params.output_type;
  args.output_layout = params.output_layout;
  args.scale = factors.scale;
  args.bias = factors.bias;
  // The crop origin: resolve_normalize checked that the crop lies inside the image, so this and
  // the span read from it lie inside input_bytes.
  args.first_read = std::uint64_t{params.crop.y} * shape.row_stride +
                    std::uint64_t{params.crop.x} * shape.pixel_stride;
  const detail::BindingRequest bindings[] = {
      {&src, src_offset, shape.input_bytes, backend::Access::read, "source"},
      {&dst, dst_offset, shape.output_bytes, backend::Access::write, "destination"}};
  return detail::OpRecorder::record(commands, kCall, args, bindings);
}

Result<IngressTransform> normalize_transform(const NormalizeParams& params) {
  FERRY_ASSIGN_OR_RETURN(const NormalizeShape shape, resolve_normalize(params));
  FERRY_RETURN_IF_ERROR(normalize_factors(params).status());
  IngressTransform transform;
  transform.name = "normalize";
  transform.input_bytes = shape.input_bytes;
  transform.output_bytes = shape.output_bytes;
  transform.record = [params](CommandList& commands, const BufferRef& input,
                              const BufferRef& output) {
    return normalize(commands, input, 0, output, 0, params);
  };
  return transform;
}

// ---- the CPU reference ----

namespace {

// Output bits of every possible input byte of one channel: the op has only 256 distinct results
// per channel, computed with the exact definition (std::fma is correctly rounded).
using ChannelTable = std::array<std::uint32_t, 256>;

ChannelTable build_table(float scale, float bias, ElementType type) {
  ChannelTable table{};
  for (std::uint32_t x = 0; x < 256; ++x) {
    const float y = std::fma(static_cast<float>(x), scale, bias);
    switch (type) {
      case ElementType::float32: std::memcpy(&table[x], &y, sizeof y); break;
      case ElementType::float16: table[x] = to_float16_bits(y); break;
      case ElementType::bfloat16: table[x] = to_bfloat16_bits(y); break;
    }
  }
  return table;
}

template <typename Element>
void run(const ops::NormalizeArgs& cmd, const std::byte* src, std::byte* dst,
         const std::array<ChannelTable, kMaxNormalizeChannels>& tables) {
  auto* out = reinterpret_cast<Element*>(dst);
  const auto* in = reinterpret_cast<const std::uint8_t*>(src);
  const std::uint64_t width = cmd.width;
  const std::uint64_t height = cmd.height;
  const std::uint64_t channels = cmd.channels;
  // Output strides in elements.
  const bool planar = cmd.output_layout == ImageLayout::nchw;
  const std::uint64_t out_x = planar ? 1 : channels;
  const std::uint64_t out_y = width * out_x;
  const std::uint64_t out_c = planar ? height * width : 1;
  const std::uint64_t out_n = channels * height * width;
  for (std::uint64_t n = 0; n < cmd.batch; ++n) {
    for (std::uint64_t c = 0; c < channels; ++c) {
      const ChannelTable& table = tables[c];
      for (std::uint64_t y = 0; y < height; ++y) {
        const std::uint8_t* row = in + n * cmd.image_stride + c * cmd.channel_stride + y * cmd.row_stride;
        Element* out_row = out + n * out_n + c * out_c + y * out_y;
        for (std::uint64_t x = 0; x < width; ++x) {
          const std::uint64_t source_x = cmd.mirror ? width - 1 - x : x;
          out_row[x * out_x] = static_cast<Element>(table[row[source_x * cmd.pixel_stride]]);
        }
      }
    }
  }
}

}  // namespace

namespace ops {

void run_on_cpu(const NormalizeArgs& args, std::span<const std::span<std::byte>> bindings) {
  std::array<ChannelTable, kMaxNormalizeChannels> tables{};
  for (std::uint32_t c = 0; c < args.channels; ++c) {
    tables[c] = build_table(args.scale[c], args.bias[c], args.output_type);
  }
  if (args.output_type == ElementType::float32) {
    run<std::uint32_t>(args, bindings[0].data() + args.first_read, bindings[1].data(), tables);
  } else {
    run<std::uint16_t>(args, bindings[0].data() + args.first_read, bindings[1].data(), tables);
  }
}

}  // namespace ops

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
