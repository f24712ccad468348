// The hamming_topk kernel's launcher (ops/hamming_topk.cu), callable from host code built without
// nvcc; see kernels/launch.hpp for what launchers return. One launch runs one pass of the plan
// (runtime/src/ops/hamming_topk.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cuda {

// The kernel's constants; hamming_topk_kernel.cpp checks them against the plan's.
inline constexpr unsigned kHammingBlock = 256;
inline constexpr unsigned kHammingChunk = 2048;
inline constexpr unsigned kHammingTile = 4;
inline constexpr unsigned kHammingMerge = 16384;
inline constexpr unsigned kHammingBits = 4096;
inline constexpr unsigned kHammingK = 1024;

struct HammingLaunch {
  const std::uint32_t* queries = nullptr;   // the whole query array (query 0 first)
  const std::uint32_t* database = nullptr;
  std::uint32_t* distances = nullptr;       // [queries x k]
  std::uint32_t* indices = nullptr;
  std::uint32_t* scratch = nullptr;         // candidates: distance, index
  bool from_codes = false;
  bool final = false;
  std::uint32_t words = 0;
  std::uint32_t k = 0;
  std::uint32_t items = 0;
  std::uint32_t groups = 0;
  std::uint32_t query_begin = 0;
  std::uint32_t query_count = 0;
  std::uint32_t in_base = 0;
  std::uint32_t in_stride = 0;
  std::uint32_t out_base = 0;
  std::uint32_t out_stride = 0;
};

cudaError_t launch_hamming_topk(const HammingLaunch& launch, cudaStream_t stream);

}  // namespace ferry::cuda
