// The arithmetic of hamming_topk's cooperative-matrix scan (hamming_topk_coopmat.comp), shared
// word for word with tests/unit/ops/hamming_topk_coopmat.cpp, which checks it against popcounts.
//
// With each bit of a code expanded to an int8 byte, +1 for a one and -1 for a zero (zero bytes
// for bits past the code), the dot product of two codes of `bits` bits is bits - 2 hamming. An
// accumulator started at 2 limit - bits and given the dot product holds 2 (limit - hamming): it is
// positive exactly when the distance is below `limit`, and the distance is limit - acc / 2.
//
// Written in the subset of C++ and GLSL the two languages share (as rescore_score.h).
#ifndef FERRY_SHADERS_HAMMING_TOPK_SIGNS_H
#define FERRY_SHADERS_HAMMING_TOPK_SIGNS_H

#ifdef __cplusplus
#include <cstdint>
namespace ferry::shaders::hamming {
using uint = std::uint32_t;
#define FERRY_HAMMING_FUNCTION inline
#else
#define FERRY_HAMMING_FUNCTION
#endif

// Four bits (bit i to byte i) as int8 bytes: 0x01 for a one, 0xFF for a zero. The multiply
// spreads bit i to bit 8i (the partial products' bits never meet, so nothing carries).
FERRY_HAMMING_FUNCTION uint ferry_hamming_signs_of_nibble(uint nibble) {
  return 0xFFFFFFFFu ^ (((nibble * 0x00204081u) & 0x01010101u) * 0xFEu);
}

// The accumulator's start for a query whose threshold distance is `limit` (at most 8191).
FERRY_HAMMING_FUNCTION int ferry_hamming_coopmat_start(uint limit, uint bits) {
  return 2 * int(limit) - int(bits);
}

// The distance of a row whose accumulator `acc` is positive.
FERRY_HAMMING_FUNCTION uint ferry_hamming_coopmat_distance(uint limit, int acc) {
  return limit - uint(acc) / 2u;
}

#ifdef __cplusplus
}  // namespace ferry::shaders::hamming
#endif
#undef FERRY_HAMMING_FUNCTION

#endif  // FERRY_SHADERS_HAMMING_TOPK_SIGNS_H
