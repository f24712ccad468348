// A plain CUDA kernel that computes every query's Hamming distance to every database row (XOR and
// __popc, queries staged in shared memory, a thread per row) and keeps no top-k: the floor a
// search kernel that also selects is measured against on CUDA devices, in the same run. Built
// only with the CUDA backend; elsewhere `available` is false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace ferry::cli {

struct CudaPopcountBaseline {
  bool available = false;
  std::string reason = {};  // why not, when unavailable
  Timing timing = {};  // per launch over every query and row, synchronized
  // Per row in `sample_rows`, the sum of its distances to every query (what the kernel writes
  // per row, so that no distance can be skipped), for the bench to check.
  std::vector<std::uint64_t> sample_sums = {};
};

// Copies the codes to device `device` (cudaMalloc'd, freed before returning) and times the kernel.
CudaPopcountBaseline measure_cuda_popcount(int device, std::span<const std::byte> database,
                                           std::span<const std::byte> queries, std::uint32_t bits,
                                           std::span<const std::uint64_t> sample_rows,
                                           const RepeatSettings& settings);

#if !defined(FERRY_CLI_HAVE_CUDA)
inline CudaPopcountBaseline measure_cuda_popcount(int, std::span<const std::byte>,
                                                  std::span<const std::byte>, std::uint32_t,
                                                  std::span<const std::uint64_t>,
                                                  const RepeatSettings&) {
  return {.reason = "this ferry was built without the CUDA backend"};
}
#endif

}  // namespace ferry::cli
