// Splits a byte range into an unaligned head, a body of aligned 16-byte vectors and a tail, so a
// kernel uses wide stores inside the range and byte stores only at its edges. Host and device
// code: the backend's kernels use it, and the host-side tests run the same thread bodies.
#pragma once

#include <cuda_runtime.h>  // __host__ / __device__ (empty for a plain C++ compiler), uint4

#include <cstdint>

namespace ferry::cuda {

inline constexpr std::uint64_t kVectorBytes = 16;  // one uint4 store

struct ByteRangeSplit {
  std::uint64_t head = 0;     // bytes before the first 16-byte aligned address
  std::uint64_t vectors = 0;  // aligned 16-byte vectors after the head
  std::uint64_t tail = 0;     // bytes after the vectors
};

__host__ __device__ inline ByteRangeSplit split_byte_range(std::uintptr_t address,
                                                           std::uint64_t size) {
  ByteRangeSplit split;
  const std::uint64_t misalignment = address % kVectorBytes;
  split.head = misalignment == 0 ? 0 : kVectorBytes - misalignment;
  if (split.head > size) split.head = size;
  split.vectors = (size - split.head) / kVectorBytes;
  split.tail = (size - split.head) % kVectorBytes;
  return split;
}

}  // namespace ferry::cuda
