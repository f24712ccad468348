// rescore: re-ranks each query's candidate rows (hamming_topk's indices, usually an oversampled
// list) by an exact score against the full-precision vectors, and keeps the best k.
//
// Exact semantics, identical on every backend (bit for bit):
//   Vectors: queries [queries x dims] and database [database_rows x dims], both of `element`
//   (float32 or int8), row r of each starting `*_pitch` bytes after row r - 1.
//   Candidates: [queries x candidates] uint32 row indices (hamming_topk's index output has this
//   layout with candidates = its k). An entry >= database_rows (kRescoreNoIndex among them) is
//   skipped; an index that appears more than once in a query's list counts once.
//   Score of query q against row r, accumulated in dimension order j = 0, 1, ..., dims - 1:
//     float32, inner_product: s = fma(q[j], x[j], s)              from s = +0.0f
//     float32, l2:            e = q[j] - x[j]; s = fma(e, e, s)   (squared L2)
//     int8, inner_product:    s += q[j] * x[j]                   int32, exact
//     int8, l2:               s += (q[j] - x[j])^2               int32, exact (dims <= 2^15:
//                             255^2 * 2^15 < 2^31; kRescoreMaxInt8L2Dims)
//   fma is IEEE's fused multiply-add, rounded once (round to nearest even), subnormals kept, so no
//   backend depends on its compiler's contraction or float modes. Cosine similarity is
//   inner_product over vectors normalized beforehand (BinaryIndex does this on the host).
//   Order: better first; inner_product ranks a larger score better, l2 a smaller one. Equal
//   scores (+0.0 and -0.0 equal) rank the lower row index first. A NaN score ranks after every
//   number (NaNs among themselves by row index).
//   Output: for query i, [i * k, i * k + k) of `scores` and `indices` hold the best min(k, valid
//   distinct candidates) rows; the entries past them hold kRescoreNoIndex and the score bits
//   kRescoreNoScoreBits. Scores are float32 for float32 vectors, int32 for int8 vectors; a NaN
//   score is written as kRescoreNaNScoreBits (NaN payloads differ between processors), a -0.0
//   score as -0.0.
#pragma once

#include <cstdint>

#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry {

enum class RescoreElement : std::uint8_t { float32, int8 };
enum class RescoreMetric : std::uint8_t { inner_product, l2 };

inline constexpr std::uint32_t kRescoreMaxCandidates = 4096;  // per query
inline constexpr std::uint32_t kRescoreMaxK = 1024;
inline constexpr std::uint32_t kRescoreMaxDims = 65536;
inline constexpr std::uint32_t kRescoreMaxInt8L2Dims = 32768;  // int32 sums stay exact
inline constexpr std::uint32_t kRescoreNoIndex = 0xFFFFFFFFu;
inline constexpr std::uint32_t kRescoreNoScoreBits = 0xFFFFFFFFu;  // a NaN as float32, -1 as int32
inline constexpr std::uint32_t kRescoreNaNScoreBits = 0x7FC00000u;  // every NaN score (float32)

struct RescoreParams {
  RescoreElement element = RescoreElement::float32;
  RescoreMetric metric = RescoreMetric::inner_product;
  std::uint32_t dims = 0;            // 1 to kRescoreMaxDims (kRescoreMaxInt8L2Dims for int8 l2)
  std::uint32_t queries = 0;         // >= 1
  std::uint64_t database_rows = 0;   // 1 to 2^32 - 2
  std::uint32_t candidates = 0;      // per query, 1 to kRescoreMaxCandidates
  std::uint32_t k = 0;               // 1 to min(candidates, kRescoreMaxK)
  // Bytes from a row's first element to the next row's: 0 means dims * element size; otherwise
  // at least that and a multiple of the element size.
  std::uint64_t query_pitch = 0;
  std::uint64_t database_pitch = 0;
};

// Where the op reads and writes. queries, database: read (device memory, or host memory the device
// can read: a lease or a host buffer, read in place); candidates: read, [queries x candidates]
// uint32; scores and indices: written, [queries x k] of 32-bit values. Offsets: a multiple of the
// element size for the vectors, of 4 bytes for the rest.
struct RescoreBuffers {
  BufferRef queries;
  std::uint64_t queries_offset = 0;
  BufferRef database;
  std::uint64_t database_offset = 0;
  BufferRef candidates;
  std::uint64_t candidates_offset = 0;
  BufferRef scores;
  std::uint64_t scores_offset = 0;
  BufferRef indices;
  std::uint64_t indices_offset = 0;
};

// Records the rescoring, on the compute queue. Errors (nothing recorded): a field outside the
// ranges above (invalid_argument, naming it and its value), a misaligned offset or pitch
// (invalid_argument), a range outside its buffer (out_of_range), outputs that overlap each other
// or an input (invalid_argument), released memory, memory of another device, and what a backend
// cannot bind (unavailable).
Status rescore(CommandList& commands, const RescoreBuffers& buffers, const RescoreParams& params);

}  // namespace ferry
