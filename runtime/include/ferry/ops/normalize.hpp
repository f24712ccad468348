// normalize: uint8 images to normalized float tensors on the device (crop, mirror, mean/std).
//
// The point is to send images over the bus as 1 byte per channel and expand them on the GPU,
// instead of converting to float32 on the host and sending 4x the bytes.
//
// Exact semantics, identical on every backend (bit for bit):
//   scale[c] = float(1.0 / std[c]), bias[c] = float(-mean[c] / std[c])   (computed in double)
//   y = fma(float(x), scale[c], bias[c])                                  (one rounding)
//   float16 / bfloat16 outputs: y rounded to nearest, ties to even.
// Output element (n, c, y, x) reads input pixel (crop.x + x', crop.y + y) of image n, channel c,
// where x' = x, or crop.width - 1 - x when mirrored.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "ferry/element_type.hpp"  // ElementType, to_string, element_size
#include "ferry/ingress.hpp"
#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry {

enum class ImageLayout : std::uint8_t {
  nhwc,  // interleaved: the channels of a pixel are adjacent
  nchw,  // planar: each channel is a plane of its own
};
std::string_view to_string(ImageLayout layout) noexcept;

// Where a batch of uint8 images lies in memory. Pitches of 0 mean tightly packed.
struct ImageBatchLayout {
  std::uint32_t batch = 0;
  std::uint32_t height = 0;
  std::uint32_t width = 0;
  std::uint32_t channels = 0;  // 1 to 4
  ImageLayout layout = ImageLayout::nhwc;
  std::uint64_t row_pitch = 0;    // bytes from a row to the next (0: width * channels, or width)
  std::uint64_t plane_pitch = 0;  // nchw: bytes from a channel plane to the next (0: row_pitch * height)
  std::uint64_t image_pitch = 0;  // bytes from an image to the next (0: one image, tightly)

  // Bytes from the first to one past the last byte of the batch (pitches resolved); 0 when the
  // layout is invalid.
  std::uint64_t span_bytes() const noexcept;
};

// A window of each image; width or height 0 takes the whole image in that direction.
struct CropWindow {
  std::uint32_t x = 0;
  std::uint32_t y = 0;
  std::uint32_t width = 0;
  std::uint32_t height = 0;
};

inline constexpr std::uint32_t kMaxNormalizeChannels = 4;

struct NormalizeParams {
  ImageBatchLayout input;
  CropWindow crop;
  bool mirror = false;  // flip each output row horizontally
  ElementType output_type = ElementType::float32;
  ImageLayout output_layout = ImageLayout::nchw;
  // Per channel; the first input.channels entries are used. std must be finite and non-zero.
  std::array<double, kMaxNormalizeChannels> mean{0.0, 0.0, 0.0, 0.0};
  std::array<double, kMaxNormalizeChannels> std{1.0, 1.0, 1.0, 1.0};
};

// The shape of the output, with everything validated and resolved.
struct NormalizeShape {
  std::uint32_t batch = 0;
  std::uint32_t channels = 0;
  std::uint32_t height = 0;  // crop height
  std::uint32_t width = 0;   // crop width
  // The input's pitches resolved, in bytes: between adjacent pixels of a channel, between the
  // channels of a pixel, between rows and between images.
  std::uint64_t pixel_stride = 0;
  std::uint64_t channel_stride = 0;
  std::uint64_t row_stride = 0;
  std::uint64_t image_stride = 0;
  std::uint64_t input_bytes = 0;   // bytes of input the op reads from its offset (span of the batch)
  std::uint64_t output_bytes = 0;  // batch * channels * height * width * element size
  std::uint64_t elements() const noexcept {
    return std::uint64_t{batch} * channels * height * width;
  }
};

// Validates the parameters (shape, pitches, crop, mean/std) and returns the resolved shape.
// Errors name the bad field and its value.
Result<NormalizeShape> resolve_normalize(const NormalizeParams& params);

// The per-channel factors exactly as every backend applies them (see the top of this file).
struct NormalizeFactors {
  std::array<float, kMaxNormalizeChannels> scale{};
  std::array<float, kMaxNormalizeChannels> bias{};
};
// Errors when a std is zero or not finite, a mean is not finite, or a factor overflows float.
Result<NormalizeFactors> normalize_factors(const NormalizeParams& params);

// Records a normalize of the batch params.input describes, read from src_offset of src, into
// `commands`; the output tensor, tightly packed, is written at dst_offset of dst (a multiple of
// the output element size). Either side may be device memory or host memory the device can read
// (a lease or host buffer: the kernel then reads it over the bus). Runs on the compute queue.
// Errors (nothing recorded): any invalid parameter (see resolve_normalize / normalize_factors),
// ranges outside src or dst, src and dst overlapping, memory of another device, and
// ErrorCode::unavailable or resource_exhausted when the device cannot run it (a missing feature,
// Device::supports("normalize"); a limit such as Vulkan's storage-buffer window), with the reason.
Status normalize(CommandList& commands, const BufferRef& src, std::uint64_t src_offset,
                 const BufferRef& dst, std::uint64_t dst_offset, const NormalizeParams& params);

// normalize as an IngressPipeline's transform: batches laid out as params.input describes,
// uploaded as uint8 and normalized on the device into tensors of params' output type and layout.
// Errors: the parameters' (resolve_normalize, normalize_factors).
Result<IngressTransform> normalize_transform(const NormalizeParams& params);

// 16-bit float encodings, rounded to nearest even (the rounding normalize uses), and back.
std::uint16_t to_float16_bits(float value) noexcept;
std::uint16_t to_bfloat16_bits(float value) noexcept;
float from_float16_bits(std::uint16_t bits) noexcept;
float from_bfloat16_bits(std::uint16_t bits) noexcept;

}  // namespace ferry
