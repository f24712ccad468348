// Plain CUDA runtime copies, measured in the same run as ferry's paths so that ratios compare
// like with like: cudaMemcpyAsync from/to pinned memory (cudaHostAlloc) and cudaMemcpy from/to
// pageable memory, and cudaMemcpyAsync between device buffers. Built only with the CUDA backend;
// elsewhere `available` is false.
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

// Device-to-device copies: `commands` cudaMemcpyAsync of `bytes` on one stream, then
// cudaStreamSynchronize, repeated for about min_time_ms after a warm-up round.
struct CudaCopyBaseline {
  bool available = false;
  std::string reason;  // why not, when unavailable
  double gbps = 0;     // median, counting the bytes read and the bytes written (2 * bytes)
};

CudaCopyBaseline measure_cuda_memcpy_d2d(int device, std::uint64_t bytes, std::uint32_t commands,
                                         double min_time_ms);

}  // namespace ferry::cli
