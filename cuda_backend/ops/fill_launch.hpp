// The fill kernel's launcher (ops/fill.cu), callable from host code built without nvcc; see
// kernels/launch.hpp for what launchers return.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cuda {

// ops::FillArgs: byte i of [dst, dst + size) gets byte (i % 4) of the little-endian pattern.
cudaError_t launch_fill(void* dst, std::uint64_t size, std::uint32_t pattern,
                        unsigned max_blocks, cudaStream_t stream);

}  // namespace ferry::cuda
