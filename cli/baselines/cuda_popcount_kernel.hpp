// The popcount baseline's kernel launcher (cuda_popcount.cu), for cuda_popcount.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ferry::cli {

// Per row of `database` ([rows x words] 32-bit words), the sum of its Hamming distances to the
// `query_count` queries ([query_count x words]), into sums[row]; on the default stream.
cudaError_t launch_popcount_kernel(const std::uint32_t* database, const std::uint32_t* queries,
                                   std::uint64_t rows, std::uint32_t query_count,
                                   std::uint32_t words, std::uint32_t* sums);

}  // namespace ferry::cli
