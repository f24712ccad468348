// The copy kernel, for copies cudaMemcpyAsync would not keep in stream order (host to host).
#include <cstdint>

#include "copy_thread.cuh"
#include "launch_grid.cuh"

namespace ferry::cuda {
namespace {

__global__ void copy_kernel(unsigned char* dst, const unsigned char* src, std::uint64_t size,
                            bool vectorized, ByteRangeSplit split) {
  const std::uint64_t thread =
      static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t thread_count = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  copy_thread(dst, src, size, vectorized, split, thread, thread_count);
}

}  // namespace

cudaError_t launch_copy(void* dst, const void* src, std::uint64_t size, unsigned max_blocks,
                        cudaStream_t stream) {
  (void)cudaGetLastError();  // see launch_fill
  auto* to = static_cast<unsigned char*>(dst);
  const auto* from = static_cast<const unsigned char*>(src);
  const auto to_address = reinterpret_cast<std::uintptr_t>(to);
  const auto from_address = reinterpret_cast<std::uintptr_t>(from);
  const bool vectorized = to_address % kVectorBytes == from_address % kVectorBytes;
  const ByteRangeSplit split = split_byte_range(to_address, size);
  const std::uint64_t work_items = vectorized ? split.vectors : size;
  copy_kernel<<<grid_blocks(work_items, max_blocks), kKernelBlockSize, 0, stream>>>(
      to, from, size, vectorized, split);
  return cudaGetLastError();
}

}  // namespace ferry::cuda
