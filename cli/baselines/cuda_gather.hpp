// The UVA way of gathering rows from a table in host memory, as DGL's and PyG's GPU samplers
// do: the table pinned and mapped (cudaHostRegister), a CUDA kernel reading the rows a batch
// needs in place over the bus into device memory. The baseline of `ferry bench ibp --gather`'s
// compressed gathers on CUDA devices, in the same run. Built only with the CUDA backend;
// elsewhere `available` is false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace ferry::cli {

struct CudaUvaGather {
  bool available = false;
  std::string reason = {};  // why not, when unavailable
  // Per entry of `batch_sets`: per batch, the kernel's launch and a device synchronize (the
  // batches of the set taken in turn).
  std::vector<Timing> timings = {};
  // Per entry of `batch_sets`: what its first batch gathered, for the bench to check.
  std::vector<std::vector<std::byte>> first_outputs = {};
};

// Registers `table` (rows of `row_bytes`, a multiple of 16; 16-byte aligned) with device
// `device` for the time of the call, and times the gathers of each set of batches of row
// indices (every index < the table's rows).
CudaUvaGather measure_cuda_uva_gather(
    int device, std::span<const std::byte> table, std::uint64_t row_bytes,
    std::span<const std::vector<std::vector<std::uint32_t>>> batch_sets,
    const RepeatSettings& settings);

#if !defined(FERRY_CLI_HAVE_CUDA)
inline CudaUvaGather measure_cuda_uva_gather(
    int, std::span<const std::byte>, std::uint64_t,
    std::span<const std::vector<std::vector<std::uint32_t>>>, const RepeatSettings&) {
  return {.reason = "this ferry was built without the CUDA backend"};
}
#endif

}  // namespace ferry::cli
