// Launchers for the backend's kernels, callable from host code built without nvcc.
// Each enqueues one kernel on `stream` and returns the launch's error (cudaGetLastError right
// after the launch); errors while the kernel runs surface on the stream's later events.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::backend::cuda {

inline constexpr unsigned kKernelBlockSize = 256;  // threads per block; >= 16 for the edges

// FillCommand: byte i of [dst, dst + size) gets byte (i % 4) of the little-endian pattern.
cudaError_t launch_fill(void* dst, std::uint64_t size, std::uint32_t pattern,
                        unsigned max_blocks, cudaStream_t stream);

// Copies size bytes between non-overlapping ranges the device can address (device or mapped
// pinned host memory).
cudaError_t launch_copy(void* dst, const void* src, std::uint64_t size, unsigned max_blocks,
                        cudaStream_t stream);

}  // namespace ferry::backend::cuda
