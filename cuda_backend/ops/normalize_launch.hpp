// The normalize kernels' launcher (ops/normalize.cu), callable from host code built without nvcc;
// see kernels/launch.hpp for what launchers return.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cuda {

// The output of the normalize kernel; the backend maps ferry's enums onto these (kernels are
// built without ferry headers).
enum class NormalizeOutputType : std::uint8_t { float32, float16, bfloat16 };
enum class NormalizeOutputLayout : std::uint8_t { nchw, nhwc };
inline constexpr std::uint32_t kNormalizeMaxChannels = 4;

// ops::NormalizeArgs (runtime/src/ops/normalize.hpp) with its bindings resolved to addresses. Output element (n, c, y, x) is
//   convert(fma(float(src[n*image_stride + c*channel_stride + y*row_stride + x'*pixel_stride]),
//               scale[c], bias[c]))
// with x' = mirror ? width - 1 - x : x, at element index ((n*channels + c)*height + y)*width + x
// (nchw) or ((n*height + y)*width + x)*channels + c (nhwc) of dst.
struct NormalizeKernelArgs {
  const void* src = nullptr;  // device or mapped pinned host memory
  void* dst = nullptr;        // aligned to the element size
  std::uint32_t batch = 0;
  std::uint32_t channels = 0;  // 1 to kNormalizeMaxChannels
  std::uint32_t height = 0;
  std::uint32_t width = 0;
  std::uint64_t image_stride = 0;
  std::uint64_t channel_stride = 0;
  std::uint64_t row_stride = 0;
  std::uint32_t pixel_stride = 0;
  bool mirror = false;
  NormalizeOutputType output_type = NormalizeOutputType::float32;
  NormalizeOutputLayout output_layout = NormalizeOutputLayout::nchw;
  float scale[kNormalizeMaxChannels] = {};
  float bias[kNormalizeMaxChannels] = {};
};

// One fma rounding, then round to nearest even for 16-bit outputs (bit-exact with the CPU
// reference). cudaErrorInvalidValue when a dimension is 0 or channels is out of range (nothing
// launched). max_blocks: see normalize_blocks_per_sm; packed 3-channel input to NCHW output with
// word-aligned rows (the common case) ignores it and sizes its grid by the work.
cudaError_t launch_normalize(const NormalizeKernelArgs& launch, unsigned max_blocks,
                             cudaStream_t stream);

// How many blocks of the general normalize kernel fit on one SM of the current device at once,
// for the variant that fits the fewest (they need more registers than the other kernels, so
// fewer than the SM's thread limit allows). The backend caps normalize grids at this times the
// SM count: a grid-stride grid with blocks left for a second wave would end with most SMs idle.
cudaError_t normalize_blocks_per_sm(unsigned* blocks);

}  // namespace ferry::cuda
