// The popcount baseline's kernel (CUDA C++17, no ferry headers: cuda_popcount.cpp is the host
// side).
#include "baselines/cuda_popcount_kernel.hpp"

namespace ferry::cli {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kQueryTile = 64;  // queries staged in shared memory at a time

// Per row, the sum of its distances to every query. kWords 32-bit words per code (0: `words`).
template <unsigned kWords>
__global__ void popcount_kernel(const std::uint32_t* database, const std::uint32_t* queries,
                                std::uint64_t rows, std::uint32_t query_count,
                                std::uint32_t words_at_run_time, std::uint32_t* sums) {
  extern __shared__ std::uint32_t tile[];
  const std::uint32_t words = kWords != 0 ? kWords : words_at_run_time;
  const std::uint64_t row = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::uint32_t* code = database + row * words;
  std::uint32_t own[kWords != 0 ? kWords : 1];
  if constexpr (kWords != 0) {
    for (unsigned w = 0; w < kWords; ++w) own[w] = row < rows ? code[w] : 0;
  }
  std::uint32_t sum = 0;
  for (std::uint32_t q0 = 0; q0 < query_count; q0 += kQueryTile) {
    const std::uint32_t count = min(kQueryTile, query_count - q0);
    __syncthreads();
    for (std::uint32_t i = threadIdx.x; i < count * words; i += blockDim.x)
      tile[i] = queries[std::uint64_t{q0} * words + i];
    __syncthreads();
    if (row >= rows) continue;
    for (std::uint32_t q = 0; q < count; ++q) {
      const std::uint32_t* query = tile + q * words;
      if constexpr (kWords != 0) {
#pragma unroll
        for (unsigned w = 0; w < kWords; ++w) sum += __popc(own[w] ^ query[w]);
      } else {
        for (std::uint32_t w = 0; w < words; ++w) sum += __popc(code[w] ^ query[w]);
      }
    }
  }
  if (row < rows) sums[row] = sum;
}

}  // namespace

cudaError_t launch_popcount_kernel(const std::uint32_t* database, const std::uint32_t* queries,
                                   std::uint64_t rows, std::uint32_t query_count,
                                   std::uint32_t words, std::uint32_t* sums) {
  const auto blocks = static_cast<unsigned>((rows + kThreads - 1) / kThreads);
  const std::size_t shared = std::size_t{kQueryTile} * words * 4;
  switch (words) {
    case 2:
      popcount_kernel<2><<<blocks, kThreads, shared>>>(database, queries, rows, query_count, words, sums);
      break;
    case 8:
      popcount_kernel<8><<<blocks, kThreads, shared>>>(database, queries, rows, query_count, words, sums);
      break;
    case 32:
      popcount_kernel<32><<<blocks, kThreads, shared>>>(database, queries, rows, query_count, words, sums);
      break;
    default:
      popcount_kernel<0><<<blocks, kThreads, shared>>>(database, queries, rows, query_count, words, sums);
      break;
  }
  return cudaGetLastError();
}

}  // namespace ferry::cli
