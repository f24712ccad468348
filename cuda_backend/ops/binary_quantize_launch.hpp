// The binary_quantize kernel's launcher (ops/binary_quantize.cu), callable from host code built
// without nvcc; see kernels/launch.hpp for what launchers return.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cuda {

// The input element type; the backend maps ferry's ElementType onto it (kernels are built
// without ferry headers).
enum class BinaryQuantizeInputType : std::uint8_t { float32, float16, bfloat16 };

// ops::BinaryQuantizeArgs (runtime/src/ops/binary_quantize.hpp) with its bindings resolved to
// addresses. Code word w of row r, at codes + 4 * (r * words_per_row + w) with words_per_row =
// 2 * ceil(dims / 64), holds in bit b (j = 32w + b):
//   j < dims && !isnan(x[r][j]) && !isnan(t[j]) && x[r][j] > t[j]     (float32, exactly)
// with x[r][j] the element at input + r * row_stride + j * element size (16-bit types widened
// exactly), t[j] the j-th float32 of thresholds, or 0.0f when thresholds is null.
struct BinaryQuantizeKernelArgs {
  const void* input = nullptr;       // device or mapped pinned host memory; element-aligned
  void* codes = nullptr;             // 4-byte aligned
  const void* thresholds = nullptr;  // dims float32 values, 4-byte aligned; or null
  std::uint32_t rows = 0;
  std::uint32_t dims = 0;
  std::uint64_t row_stride = 0;  // bytes, a multiple of the element size
  BinaryQuantizeInputType input_type = BinaryQuantizeInputType::float32;
};

// Integer code only (no float conversions or comparisons, so no build flag or denormal mode
// changes a bit): bit-exact with the CPU reference. cudaErrorInvalidValue when rows or dims is 0
// or a pointer is misaligned (nothing launched). max_blocks: the grid-stride grid's cap.
cudaError_t launch_binary_quantize(const BinaryQuantizeKernelArgs& launch, unsigned max_blocks,
                                   cudaStream_t stream);

}  // namespace ferry::cuda
