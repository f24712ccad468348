// normalize, as every backend runs it (ferry/ops/normalize.hpp has the public call and its exact
// semantics), with everything resolved by core: the crop origin is folded into the source
// binding's offset, pitches are explicit, factors are computed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "ferry/ops/normalize.hpp"

namespace ferry::ops {

// Binding 0: the source, read: the whole batch from the caller's source offset (the crop origin
// of image 0, channel 0 lies `first_read` bytes into it; from there input_span() bytes are
// read). Binding 1: the destination, written: output_bytes() bytes, starting on a multiple of
// the element size. Output element (n, c, y, x), with x < width and y < height, is
//   convert(fma(float(src[n*image_stride + c*channel_stride + y*row_stride + x'*pixel_stride]),
//               scale[c], bias[c]))
// with x' = mirror ? width - 1 - x : x and src counted from the first byte read, stored at element
//   nchw: ((n * channels + c) * height + y) * width + x
//   nhwc: ((n * height + y) * width + x) * channels + c
// counted from binding 1's start. Core has checked that both fit their buffers and do not
// overlap.
struct NormalizeArgs {
  std::uint64_t first_read = 0;  // from binding 0's start
  std::uint32_t batch = 0;
  std::uint32_t channels = 0;
  std::uint32_t height = 0;
  std::uint32_t width = 0;
  std::uint64_t image_stride = 0;
  std::uint64_t channel_stride = 0;
  std::uint64_t row_stride = 0;
  std::uint32_t pixel_stride = 0;
  bool mirror = false;
  ElementType output_type = ElementType::float32;
  ImageLayout output_layout = ImageLayout::nchw;
  std::array<float, kMaxNormalizeChannels> scale{};
  std::array<float, kMaxNormalizeChannels> bias{};

  // Bytes from the first byte read to one past the last (core checked that it fits 64 bits).
  std::uint64_t input_span() const noexcept {
    return std::uint64_t{batch - 1} * image_stride + std::uint64_t{channels - 1} * channel_stride +
           std::uint64_t{height - 1} * row_stride + std::uint64_t{width - 1} * pixel_stride + 1;
  }
  std::uint64_t output_elements() const noexcept {
    return std::uint64_t{batch} * channels * height * width;
  }
  std::uint64_t output_bytes() const noexcept {
    return output_elements() * element_size(output_type);
  }
};

// The CPU reference: `bindings` are the bindings' bytes.
void run_on_cpu(const NormalizeArgs& args, std::span<const std::span<std::byte>> bindings);

}  // namespace ferry::ops
