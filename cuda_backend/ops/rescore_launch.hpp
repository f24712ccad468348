// The rescore kernel's launcher (ops/rescore.cu), callable from host code built without nvcc; see
// kernels/launch.hpp for what launchers return. One launch does the whole rescore (the algorithm
// is in runtime/src/ops/rescore.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cuda {

// The kernel's constants; rescore_kernel.cpp checks the slots against the algorithm's.
// Blocks of 128 threads (the shader's workgroups have 256; the results do not depend on it): a
// scoring lane holds a chunk's 32 elements in registers (about 60 in all), so an SM held only 4
// blocks of 256 and 1000 queries took two waves; it holds 8 of 128.
inline constexpr unsigned kRescoreBlock = 128;
inline constexpr unsigned kRescoreSlotCount = 2048;

struct RescoreLaunch {
  const unsigned char* queries = nullptr;   // query 0's first element
  const unsigned char* database = nullptr;  // row 0's first element
  const std::uint32_t* candidates = nullptr;
  std::uint32_t* scores = nullptr;   // [queries x k]
  std::uint32_t* indices = nullptr;  // [queries x k]
  std::uint64_t query_stride = 0;     // bytes
  std::uint64_t database_stride = 0;  // bytes
  bool int8 = false;  // int8 vectors, int32 scores (else float32)
  bool l2 = false;    // squared L2 (else inner product)
  std::uint32_t dims = 0;
  std::uint32_t queries_count = 0;
  std::uint32_t rows = 0;
  std::uint32_t candidates_count = 0;  // per query
  std::uint32_t k = 0;
};

cudaError_t launch_rescore(const RescoreLaunch& launch, cudaStream_t stream);

}  // namespace ferry::cuda
