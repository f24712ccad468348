// The ABI of hamming_topk.comp: its constants and push constants, shared word for word by the GLSL
// shader and the C++ host code (the shader #includes this file too). The algorithm and the plan
// of passes are in runtime/src/ops/hamming_topk.hpp; the constants here must equal those there
// (runtime/src/vulkan/ops/hamming_topk.cpp checks).
//
// Every index is in 32-bit words relative to the bound window (windows are below 4 GiB), and
// every candidate is two words in the scratch window: distance, then database row index.
#ifndef FERRY_SHADERS_HAMMING_TOPK_ABI_H
#define FERRY_SHADERS_HAMMING_TOPK_ABI_H

#define FERRY_HAMMING_WORKGROUP_SIZE 256
#define FERRY_HAMMING_MERGE_GROUP 16384   // merges: candidates per workgroup (64 per invocation)
#define FERRY_HAMMING_MAX_BITS 4096
#define FERRY_HAMMING_MAX_K 1024
// Level 0, the scan: a workgroup scans a span of rows in rounds of this many rows for a tile of
// queries (the specialization constant FERRY_HAMMING_TILE_ID: 32, 16, 8 or 4); keys are
// distance << FERRY_HAMMING_POSITION_BITS | position in the span.
#define FERRY_HAMMING_ROUND_ROWS 64
#define FERRY_HAMMING_POSITION_BITS 19
#define FERRY_HAMMING_MAX_TILE 32
#define FERRY_HAMMING_MIN_TILE 4
#define FERRY_HAMMING_TILE_ID 1
// Shared memory: a pool of 32-bit words that the merges and the scan lay out each their own way,
// and the scan's query codes as 16-byte quads (tile x ceil(words / 4) of them).
#define FERRY_HAMMING_POOL_WORDS 6128
#define FERRY_HAMMING_QUERY_QUADS 512
// The scan's part of the pool: per query of the tile a threshold key and a key count; 3 words of
// flags (queries whose buffer needs compacting, one word per round, in turn); the radix select's
// state per query (the k-th key's bits found so far, the rank still sought, keys kept), the list
// of the queries it selects for, and their 16-bin histograms; then the tile's key buffers, `cap`
// keys each.
#define FERRY_HAMMING_SCAN_THRESHOLDS 0
#define FERRY_HAMMING_SCAN_COUNTS (FERRY_HAMMING_SCAN_THRESHOLDS + FERRY_HAMMING_MAX_TILE)
#define FERRY_HAMMING_SCAN_FLAGS (FERRY_HAMMING_SCAN_COUNTS + FERRY_HAMMING_MAX_TILE)
#define FERRY_HAMMING_SCAN_KTH (FERRY_HAMMING_SCAN_FLAGS + 3)
#define FERRY_HAMMING_SCAN_NEED (FERRY_HAMMING_SCAN_KTH + FERRY_HAMMING_MAX_TILE)
#define FERRY_HAMMING_SCAN_KEPT (FERRY_HAMMING_SCAN_NEED + FERRY_HAMMING_MAX_TILE)
#define FERRY_HAMMING_SCAN_LIST (FERRY_HAMMING_SCAN_KEPT + FERRY_HAMMING_MAX_TILE)
#define FERRY_HAMMING_SCAN_HISTOGRAMS (FERRY_HAMMING_SCAN_LIST + FERRY_HAMMING_MAX_TILE)
#define FERRY_HAMMING_SCAN_KEYS (FERRY_HAMMING_SCAN_HISTOGRAMS + 16 * FERRY_HAMMING_MAX_TILE)
// The scan's cooperative-matrix path (hamming_topk_coopmat.comp, tiles of 32 or 16 queries): int8
// 16 x 16 x 32 products on subgroups of 32. The codes are expanded to one byte per bit
// (hamming_topk_signs.h) a chunk of this many bits at a time, each expanded row (database rows,
// then queries) padded by 16 bytes to spread shared-memory banks: FERRY_HAMMING_COOPMAT_PITCH
// 16-byte quads per row. Per subgroup, a 16 x 16 int32 tile of staged accumulators.
#define FERRY_HAMMING_COOPMAT_SUBGROUP 32
#define FERRY_HAMMING_COOPMAT_M 16
#define FERRY_HAMMING_COOPMAT_N 16
#define FERRY_HAMMING_COOPMAT_K 32
#define FERRY_HAMMING_COOPMAT_CHUNK_BITS 128
#define FERRY_HAMMING_COOPMAT_PITCH (FERRY_HAMMING_COOPMAT_CHUNK_BITS / 16 + 1)
#define FERRY_HAMMING_COOPMAT_MIN_TILE 16
// The pooled search's sample and fill with cooperative matrices (hamming_topk_coopmat_fill.comp):
// the same products, in tiles of 64, 128 or 256 queries (FERRY_HAMMING_TILE_ID); the code's words
// are the specialization constant FERRY_HAMMING_WORDS_ID, taken in chunks of at most
// FERRY_HAMMING_FILL_MAX_WORDS (a code of one chunk keeps its queries' matrices in registers).
// Rows come in rounds of FERRY_HAMMING_ROUND_ROWS, a chunk at a time, expanded into one of two
// buffers of FERRY_HAMMING_FILL_PITCH quads a row.
#define FERRY_HAMMING_WORDS_ID 2
#define FERRY_HAMMING_FILL_MAX_WORDS 8
#define FERRY_HAMMING_FILL_MIN_TILE 64
#define FERRY_HAMMING_FILL_MAX_TILE 256
#define FERRY_HAMMING_FILL_PITCH (2 * FERRY_HAMMING_FILL_MAX_WORDS + 1)
// Appends a subgroup holds in shared memory before they go out together.
#define FERRY_HAMMING_FILL_PENDING 64
// flags
#define FERRY_HAMMING_FROM_CODES 1u  // level 0: distances from the codes (else candidates)
#define FERRY_HAMMING_FINAL 2u       // writes distances and indices (else candidates)
// Level 0: each query's threshold starts from its bound, the distance of candidate bound_base +
// query * k + k - 1 (the k-th smallest of a sample's group minima, a run the bound passes wrote):
// no row beyond it can be among the k nearest, so spans may keep fewer than k rows (padding).
#define FERRY_HAMMING_BOUNDED 4u
// The pooled search (hamming_topk.comp, "Pools"), in four dispatches per slice of queries:
// - FROM_CODES | POOLED | MINIMA: the sample's scan, each span (a group of the sample) writing
//   per query its smallest distance as the candidate out_base + query * out_stride + span;
// - POOLED, a merge: the bound pass (the k smallest of those minima), which also zeroes the
//   query's pool count;
// - FROM_CODES | POOLED | BOUNDED: the scan, every row within its query's bound appended to the
//   query's pool: row indices from scratch word query * pool_cap on, their count at word
//   pool_counts + query (entries past pool_cap counted, not written);
// - SELECT, FINAL: per query, its k from the pool (sorted in shared memory, at most
//   FERRY_HAMMING_MAX_POOL entries: the whole pool, or its rows at or within the k-th distance),
//   or from an exact pass over every row when it overflowed.
#define FERRY_HAMMING_POOLED 8u
#define FERRY_HAMMING_MINIMA 16u
#define FERRY_HAMMING_SELECT 32u
#define FERRY_HAMMING_MAX_POOL 2048

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace ferry::shaders {
#define FERRY_UINT std::uint32_t
struct HammingTopkPushConstants {
#else
#define FERRY_UINT uint
layout(push_constant, std430) uniform HammingTopkPushConstants {
#endif
  FERRY_UINT flags;
  FERRY_UINT words;        // 32-bit words per code
  FERRY_UINT k;
  FERRY_UINT items;        // per query: database rows (level 0) or candidates in
  FERRY_UINT groups;       // per query (tile): ceil(items / group_items)
  FERRY_UINT group_items;  // level 0: rows per span; merges: FERRY_HAMMING_MERGE_GROUP
  FERRY_UINT cap;          // level 0: key buffer entries per query
  FERRY_UINT query_begin;  // the slice's first query (outputs are indexed by the whole query)
  FERRY_UINT query_count;  // queries in the slice
  FERRY_UINT in_base;      // merges: first candidate of the input (candidates)
  FERRY_UINT in_stride;    // merges: candidates from a query to the next
  FERRY_UINT out_base;     // not final: first candidate written
  FERRY_UINT out_stride;   // not final: candidates from a query to the next
  FERRY_UINT queries_word;    // where each binding's data starts in its window
  FERRY_UINT database_word;
  FERRY_UINT distances_word;
  FERRY_UINT indices_word;
  FERRY_UINT scratch_word;
  FERRY_UINT bound_base;   // FERRY_HAMMING_BOUNDED: the bounds' run (candidates)
  FERRY_UINT pool_cap;     // FERRY_HAMMING_POOLED: row indices a pool holds
  FERRY_UINT pool_counts;  // FERRY_HAMMING_POOLED: the scratch word of query 0's pool count
#ifdef __cplusplus
};
#undef FERRY_UINT
static_assert(sizeof(HammingTopkPushConstants) == 84);
static_assert(offsetof(HammingTopkPushConstants, pool_counts) == 80);
}  // namespace ferry::shaders
#else
} push;
#undef FERRY_UINT
#endif

#endif  // FERRY_SHADERS_HAMMING_TOPK_ABI_H
