// rescore's ranking keys for the CUDA kernel (host and device, so that
// tests/unit/cuda/test_cuda_rescore_body.cpp checks them against shaders/rescore_score.h, which the
// CPU reference and the Vulkan shader use: nvcc builds the kernels without ferry's headers).
#pragma once

#include <cuda_runtime.h>  // __host__ / __device__ (empty for a plain C++ compiler)

#include <cstdint>

namespace ferry::cuda {

inline constexpr std::uint32_t kRescoreNaNBits = 0x7FC00000u;  // every NaN score
inline constexpr std::uint32_t kRescoreWorstKey = 0xFFFFFFFFu;  // a NaN score's key

// A score as a key sorting ascending in rank order: float32 NaN last, -0 as +0, floats by value;
// int32 by value; inner products (larger_better) complemented.
__host__ __device__ inline std::uint32_t rescore_key(std::uint32_t score, bool is_float,
                                                     bool larger_better) {
  std::uint32_t ordered = score ^ 0x80000000u;
  if (is_float) {
    if ((score & 0x7FFFFFFFu) > 0x7F800000u) return kRescoreWorstKey;
    const std::uint32_t value = score == 0x80000000u ? 0u : score;
    ordered = (value >> 31) != 0u ? ~value : value | 0x80000000u;
  }
  return larger_better ? ~ordered : ordered;
}

// The score bits of a key (a -0 comes back as +0, a NaN as kRescoreNaNBits).
__host__ __device__ inline std::uint32_t rescore_key_score(std::uint32_t key, bool is_float,
                                                           bool larger_better) {
  if (is_float && key == kRescoreWorstKey) return kRescoreNaNBits;
  const std::uint32_t ordered = larger_better ? ~key : key;
  if (!is_float) return ordered ^ 0x80000000u;
  return (ordered >> 31) != 0u ? ordered & 0x7FFFFFFFu : ~ordered;
}

}  // namespace ferry::cuda
