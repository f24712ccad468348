// The fill kernel (ops::FillArgs): wide aligned stores inside the range, bytes at its edges.
#include <cstdint>

#include "fill_thread.cuh"
#include "fill_launch.hpp"
#include "../kernels/launch_grid.cuh"

namespace ferry::cuda {
namespace {

__global__ void fill_kernel(unsigned char* dst, std::uint32_t pattern, ByteRangeSplit split) {
  const std::uint64_t thread =
      static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t thread_count = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  fill_thread(dst, pattern, split, thread, thread_count);
}

}  // namespace

cudaError_t launch_fill(void* dst, std::uint64_t size, std::uint32_t pattern,
                        unsigned max_blocks, cudaStream_t stream) {
  // Clear an error left by an earlier, unrelated runtime call on this thread, so the check after
  // the launch reports this launch only (sticky errors come back anyway).
  (void)cudaGetLastError();
  auto* bytes = static_cast<unsigned char*>(dst);
  const ByteRangeSplit split = split_byte_range(reinterpret_cast<std::uintptr_t>(bytes), size);
  fill_kernel<<<grid_blocks(split.vectors, max_blocks), kKernelBlockSize, 0, stream>>>(
      bytes, pattern, split);
  return cudaGetLastError();
}

}  // namespace ferry::cuda
