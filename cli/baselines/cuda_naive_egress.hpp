// The naive egress loop written with the plain CUDA runtime, as an application without ferry
// would: "compute" (cudaMemsetAsync of the whole output, repeated to last about compute_ms),
// wait, cudaMemcpy into pageable memory (synchronous), then the host work on those bytes, step
// after step. Built only with the CUDA backend; elsewhere `available` is false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "ferry/status.hpp"

namespace ferry::cli {

// The host work of one step: `bytes` should hold `pattern` (a 32-bit little-endian word,
// repeated) everywhere. An error stops the loop.
using CudaNaiveHostWork =
    std::function<Status(std::uint64_t step, std::span<const std::byte> bytes,
                         std::uint32_t pattern)>;

struct CudaNaiveEgress {
  bool available = false;
  std::string reason;        // why not, when unavailable
  Status host_error;         // the host work's error, when it failed
  std::uint32_t memsets = 0;        // per step, chosen so that they take about compute_ms
  double compute_seconds = 0;       // per step: the memsets alone, back to back
  std::uint64_t steps = 0;          // timed
  double seconds = 0;               // the timed steps, first memset to last host work
};

// `warmup` untimed steps, then `steps` timed ones, each with a distinct byte pattern (the last
// memset writes it) that host_work receives.
CudaNaiveEgress measure_cuda_naive_egress(int device, std::uint64_t bytes, double compute_ms,
                                          std::uint32_t warmup, std::uint32_t steps,
                                          const CudaNaiveHostWork& host_work);

}  // namespace ferry::cli
