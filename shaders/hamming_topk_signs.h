// The arithmetic of hamming_topk's cooperative-matrix scan (hamming_topk_coopmat.comp), shared
// word for word with tests/unit/ops/hamming_topk_coopmat.cpp, which checks it against popcounts.
//
// Each bit of a code becomes an int8 byte: a database row's as 0 or 1, a query's as -1 or +1
// (zero bytes past the code). Their dot product is popc(row AND query) - popc(row AND NOT query)
// = 2 popc(row AND query) - popc(row), and the distance popc(row) + popc(query) - 2 popc(row AND
// query) is popc(query) - dot: no term of the row's. An accumulator started at limit -
// popc(query) and given the dot product holds limit - distance: it is positive exactly when the
// distance is below `limit`, and the distance is limit - acc.
//
// Bit order: word w's 32 bits become 32 bytes as 8 words of 4 bytes, plane p (0 to 7) holding bits
// p, p + 8, p + 16, p + 24 (one shift and one mask per word of bytes); a product needs only the
// same order on both sides.
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

// A database row's plane: bytes 0 or 1.
FERRY_HAMMING_FUNCTION uint ferry_hamming_row_plane(uint word, uint plane) {
  return (word >> plane) & 0x01010101u;
}

// A query's plane: bytes 0x01 (+1) for a one, 0xFF (-1) for a zero (0xFE x a 0 or 1 byte never
// carries).
FERRY_HAMMING_FUNCTION uint ferry_hamming_query_plane(uint word, uint plane) {
  return 0xFFFFFFFFu ^ (((word >> plane) & 0x01010101u) * 0xFEu);
}

// The accumulator's start for a query of `query_bits` ones whose threshold distance is `limit`
// (at most 8191).
FERRY_HAMMING_FUNCTION int ferry_hamming_coopmat_start(uint limit, uint query_bits) {
  return int(limit) - int(query_bits);
}

// The distance of a row whose accumulator `acc` is positive.
FERRY_HAMMING_FUNCTION uint ferry_hamming_coopmat_distance(uint limit, int acc) {
  return limit - uint(acc);
}

#ifdef __cplusplus
}  // namespace ferry::shaders::hamming
#endif
#undef FERRY_HAMMING_FUNCTION

#endif  // FERRY_SHADERS_HAMMING_TOPK_SIGNS_H
