#include "baselines/cuda_popcount.hpp"

#if defined(FERRY_CLI_HAVE_CUDA)

#include "baselines/cuda_popcount_kernel.hpp"
#include "baselines/cuda_status.hpp"

namespace ferry::cli {

CudaPopcountBaseline measure_cuda_popcount(int device, std::span<const std::byte> database,
                                           std::span<const std::byte> queries, std::uint32_t bits,
                                           std::span<const std::uint64_t> sample_rows,
                                           const RepeatSettings& settings) {
  CudaPopcountBaseline out;
  const std::uint32_t words = bits / 32;
  const std::uint64_t rows = database.size() / (bits / 8);
  const auto query_count = static_cast<std::uint32_t>(queries.size() / (bits / 8));
  CudaDeviceMemory d_database, d_queries, d_sums;
  const Status status = [&]() -> Status {
    FERRY_RETURN_IF_ERROR(cuda_use_device(device));
    FERRY_RETURN_IF_ERROR(
        cuda_status("cudaMalloc", cudaMalloc(&d_database.pointer, database.size())));
    FERRY_RETURN_IF_ERROR(cuda_status("cudaMalloc", cudaMalloc(&d_queries.pointer, queries.size())));
    FERRY_RETURN_IF_ERROR(cuda_status("cudaMalloc", cudaMalloc(&d_sums.pointer, rows * 4)));
    FERRY_RETURN_IF_ERROR(cuda_status("cudaMemcpy", cudaMemcpy(d_database.pointer, database.data(),
                                                               database.size(),
                                                               cudaMemcpyHostToDevice)));
    FERRY_RETURN_IF_ERROR(cuda_status("cudaMemcpy", cudaMemcpy(d_queries.pointer, queries.data(),
                                                               queries.size(),
                                                               cudaMemcpyHostToDevice)));
    const auto* db = static_cast<const std::uint32_t*>(d_database.pointer);
    const auto* qs = static_cast<const std::uint32_t*>(d_queries.pointer);
    auto* sums = static_cast<std::uint32_t*>(d_sums.pointer);
    auto launch = [&]() -> Status {
      FERRY_RETURN_IF_ERROR(cuda_status(
          "the popcount kernel's launch",
          launch_popcount_kernel(db, qs, rows, query_count, words, sums)));
      return cuda_status("cudaDeviceSynchronize", cudaDeviceSynchronize());
    };
    FERRY_ASSIGN_OR_RETURN(out.timing, time_each(settings, launch));
    for (std::uint64_t row : sample_rows) {
      std::uint32_t sum = 0;
      FERRY_RETURN_IF_ERROR(cuda_status(
          "cudaMemcpy", cudaMemcpy(&sum, sums + row, 4, cudaMemcpyDeviceToHost)));
      out.sample_sums.push_back(sum);
    }
    return ok_status();
  }();
  out.available = status.ok();
  if (!status.ok()) out.reason = status.message();
  return out;
}

}  // namespace ferry::cli

#endif
