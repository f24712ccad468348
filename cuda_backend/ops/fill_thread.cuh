// The fill kernel's per-thread work (host and device, so host-side tests run the same code).
// ops::FillArgs semantics: byte i of the range gets byte (i % 4) of the little-endian pattern,
// counted from the start of the range, whatever its alignment.
#pragma once

#include <cstdint>

#include "../kernels/byte_range.cuh"

namespace ferry::cuda {

__host__ __device__ inline unsigned char pattern_byte(std::uint32_t pattern, std::uint64_t index) {
  return static_cast<unsigned char>(pattern >> (8u * (index % 4u)));
}

// The 32-bit word whose bytes (little endian) continue the pattern from byte index `start`.
__host__ __device__ inline std::uint32_t pattern_word_from(std::uint32_t pattern,
                                                           std::uint64_t start) {
  const unsigned shift = 8u * static_cast<unsigned>(start % 4u);
  return shift == 0 ? pattern : (pattern >> shift) | (pattern << (32u - shift));
}

// Thread `thread` of `thread_count` (>= 16, so the edges are covered in one pass) fills its share
// of [dst, dst + split.head + 16 * split.vectors + split.tail).
__host__ __device__ inline void fill_thread(unsigned char* dst, std::uint32_t pattern,
                                            const ByteRangeSplit& split, std::uint64_t thread,
                                            std::uint64_t thread_count) {
  // The body starts at byte index `head` of the range; 16 is a multiple of 4, so every vector
  // holds the same four words.
  const std::uint32_t word = pattern_word_from(pattern, split.head);
  const uint4 vector = make_uint4(word, word, word, word);
  uint4* body = reinterpret_cast<uint4*>(dst + split.head);
  for (std::uint64_t i = thread; i < split.vectors; i += thread_count) body[i] = vector;
  if (thread < split.head) dst[thread] = pattern_byte(pattern, thread);
  if (thread < split.tail) {
    const std::uint64_t index = split.head + split.vectors * kVectorBytes + thread;
    dst[index] = pattern_byte(pattern, index);
  }
}

}  // namespace ferry::cuda
