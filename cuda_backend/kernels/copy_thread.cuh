// The copy kernel's per-thread work (host and device, so host-side tests run the same code).
// Used for copies between two pinned host ranges, which the device reaches through unified
// addressing: a kernel keeps them in stream order (see cuda_device.cpp).
#pragma once

#include <cstdint>

#include "byte_range.cuh"

namespace ferry::cuda {

// `vectorized`: src and dst have the same misalignment modulo 16, so `split` (computed for dst)
// also aligns src. Otherwise the copy is byte-wise; a warp's byte accesses to consecutive
// addresses still coalesce into sector-sized transactions.
__host__ __device__ inline void copy_thread(unsigned char* dst, const unsigned char* src,
                                            std::uint64_t size, bool vectorized,
                                            const ByteRangeSplit& split, std::uint64_t thread,
                                            std::uint64_t thread_count) {
  if (!vectorized) {
    for (std::uint64_t i = thread; i < size; i += thread_count) dst[i] = src[i];
    return;
  }
  uint4* body = reinterpret_cast<uint4*>(dst + split.head);
  const uint4* source = reinterpret_cast<const uint4*>(src + split.head);
  for (std::uint64_t i = thread; i < split.vectors; i += thread_count) body[i] = source[i];
  if (thread < split.head) dst[thread] = src[thread];
  if (thread < split.tail) {
    const std::uint64_t index = split.head + split.vectors * kVectorBytes + thread;
    dst[index] = src[index];
  }
}

}  // namespace ferry::cuda
