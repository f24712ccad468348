// Plain CUDA runtime copies, measured in the same run as ferry's paths so that ratios compare
// like with like: cudaMemcpyAsync from/to pinned memory (cudaHostAlloc) and cudaMemcpy from/to
// pageable memory. Built only with the CUDA backend; elsewhere `available` is false.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::cli {

struct CudaMemcpyBaseline {
  bool available = false;
  std::string reason;  // why not, when unavailable
  // Median GB/s (1e9 B/s) of one synchronous-from-the-host transfer of the whole size.
  double h2d_pinned = 0, d2h_pinned = 0;      // cudaMemcpyAsync + cudaStreamSynchronize
  double h2d_pageable = 0, d2h_pageable = 0;  // cudaMemcpy
  double both_pinned = 0;  // H2D and D2H at once on two streams, total GB/s
};

CudaMemcpyBaseline measure_cuda_memcpy(int device, std::uint64_t bytes, double min_time_ms);

}  // namespace ferry::cli
