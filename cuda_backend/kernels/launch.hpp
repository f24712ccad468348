// What every kernel launch of the backend shares, and the launcher of its own copy kernel (the
// ops' launchers are in ops/<op>_launch.hpp). Callable from host code built without nvcc. Each
// launcher enqueues one kernel on `stream` and returns the launch's error (cudaGetLastError right
// after the launch); errors while the kernel runs surface on the stream's later events.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cuda {

inline constexpr unsigned kKernelBlockSize = 256;  // threads per block; >= 16 for the edges
// Blocks per SM for the grid-stride kernels: enough resident warps to saturate memory bandwidth.
inline constexpr unsigned kBlocksPerSm = 8;

// Copies size bytes between non-overlapping ranges the device can address (device or mapped
// pinned host memory).
cudaError_t launch_copy(void* dst, const void* src, std::uint64_t size, unsigned max_blocks,
                        cudaStream_t stream);

}  // namespace ferry::cuda
