// The plain CUDA runtime as the benches' baseline on CUDA devices, measured in the same run as
// ferry's paths so that ratios compare like with like. Built only with the CUDA backend;
// elsewhere `available` is false.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>

#include "bench_common.hpp"

namespace ferry::cli {

// Median GB/s (1e9 B/s) of one transfer of the whole size, synchronous from the host.
struct CudaMemcpyBaseline {
  bool available = false;
  std::string reason;                   // why not, when unavailable
  std::array<double, 2> pinned = {};    // H2D, D2H: cudaMemcpyAsync + cudaStreamSynchronize
  std::array<double, 2> pageable = {};  // H2D, D2H: cudaMemcpy
  double both_pinned = 0;               // H2D and D2H at once on two streams, total GB/s
};

CudaMemcpyBaseline measure_cuda_memcpy(int device, std::uint64_t bytes,
                                       const RepeatSettings& settings);

// `commands` cudaMemcpyAsync of `bytes` between device buffers on one stream, then
// cudaStreamSynchronize.
struct CudaCopyBaseline {
  bool available = false;
  std::string reason;
  double gbps = std::numeric_limits<double>::quiet_NaN();  // median, read + written (2 * bytes)
};

CudaCopyBaseline measure_cuda_memcpy_d2d(int device, std::uint64_t bytes, std::uint32_t commands,
                                         const RepeatSettings& settings);

// The naive egress loop as an application without ferry writes it: "compute" (cudaMemsetAsync
// of the whole output, repeated to last about compute_ms), wait, cudaMemcpy into pageable memory
// (synchronous), then the host work on those bytes, step after step.
struct CudaNaiveEgress {
  bool available = false;
  std::string reason;
  Status host_error = {};      // the host work's error, when it failed
  std::uint32_t memsets = 0;   // per step, chosen so that they take about compute_ms
  std::uint64_t steps = 0;     // timed
  double seconds = 0;          // the timed steps, first memset to last host work
};

// The host work of one step: `bytes` should hold `pattern` (a 32-bit word, repeated); an error
// stops the loop.
using CudaNaiveHostWork = std::function<Status(std::uint64_t step, std::span<const std::byte> bytes,
                                               std::uint32_t pattern)>;

// `warmup` untimed steps, then `steps` timed ones, each with its own byte pattern.
CudaNaiveEgress measure_cuda_naive_egress(int device, std::uint64_t bytes, double compute_ms,
                                          std::uint32_t warmup, std::uint32_t steps,
                                          const CudaNaiveHostWork& host_work);

}  // namespace ferry::cli
