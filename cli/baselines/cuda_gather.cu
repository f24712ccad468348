// The UVA gather baseline's kernel (CUDA C++17, no ferry headers: cuda_gather.cpp is the host
// side): what DGL's and PyG's GPU samplers do with features in pinned host memory, a kernel
// reading the rows it needs in place.
#include "baselines/cuda_gather_kernel.hpp"

#include <algorithm>
#include <cstdint>

namespace ferry::cli {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kMaxBlocks = 4096;

__global__ void gather_kernel(const uint4* table, const std::uint32_t* indices,
                              std::uint32_t count, std::uint64_t row_vectors, uint4* out) {
  const unsigned lane = threadIdx.x & 31u;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * (blockDim.x / 32u);
  for (std::uint64_t i = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32u; i < count;
       i += warps) {
    const uint4* from = table + std::uint64_t{indices[i]} * row_vectors;
    uint4* to = out + i * row_vectors;
    for (std::uint64_t v = lane; v < row_vectors; v += 32u) to[v] = from[v];
  }
}

}  // namespace

cudaError_t launch_gather_kernel(const void* table, const std::uint32_t* indices,
                                 std::uint32_t count, std::uint64_t row_vectors, void* out) {
  constexpr unsigned kRowsPerBlock = kThreads / 32;  // a warp per row
  const unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>(
      kMaxBlocks, (std::uint64_t{count} + kRowsPerBlock - 1) / kRowsPerBlock));
  gather_kernel<<<blocks, kThreads>>>(static_cast<const uint4*>(table), indices, count,
                                      row_vectors, static_cast<uint4*>(out));
  return cudaGetLastError();
}

}  // namespace ferry::cli
