// The UVA gather baseline's kernel launcher (cuda_gather.cu), for cuda_gather.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cli {

// out[i] = table row indices[i] for i < count, rows of `row_vectors` 16-byte words, a warp per
// row; `table` may be mapped host memory (read in place over the bus). On the default stream.
cudaError_t launch_gather_kernel(const void* table, const std::uint32_t* indices,
                                 std::uint32_t count, std::uint64_t row_vectors, void* out);

}  // namespace ferry::cli
