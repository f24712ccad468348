// hamming_topk's level-0 scan with cooperative matrices (GL_NV_cooperative_matrix, int8 x int8 ->
// int32 at 16 x 16 x 32 on subgroups of 32): the scan of hamming_topk.comp for tiles of kTile = 32
// or 16 queries, with the same keys, buffers, compactions and runs (hamming_topk_scan.h), so the
// same results; only the distances come another way. The merges stay in hamming_topk.comp.
//
// Distances from products (hamming_topk_signs.h): a database row's bits as int8 0 / 1, a query's
// as -1 / +1, so that the distance is popc(query) - their dot product. A round of 64 rows x the
// tile's queries is 4 x (kTile / 16) tiles of 16 x 16, one per subgroup (8 or 4 of the 8
// subgroups). The codes are expanded into shared memory a chunk of 128 bits at a time (the 64
// rows, and the tile's queries, which stay when the codes are no longer than one chunk), and each
// subgroup's accumulators start from C0 = limit - popc(query) per query (its column), limit being
// the query's threshold distance. So acc = limit - distance: a row passes (distance < limit)
// exactly when its accumulator is positive, and its distance is limit - acc. Each invocation
// checks its own accumulator elements (their positions are the implementation's; the sign is all
// that is needed); only a subgroup where one passes stores its tile to shared memory and inserts
// the passing keys (rare once the thresholds settle). C0 is kept in that staging tile and
// rewritten after it is used or the thresholds change. Needs subgroups of 32 (8 of the 256
// invocations).
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_NV_integer_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_vote : require

#include "hamming_topk_abi.h"

#define WG FERRY_HAMMING_WORKGROUP_SIZE
#define ROUND FERRY_HAMMING_ROUND_ROWS
#define POSITION_MASK ((1u << FERRY_HAMMING_POSITION_BITS) - 1u)
#define NONE 0xFFFFFFFFu
#define PITCH FERRY_HAMMING_COOPMAT_PITCH
#define CHUNK_WORDS (FERRY_HAMMING_COOPMAT_CHUNK_BITS / 32)
#define SUBGROUPS (WG / FERRY_HAMMING_COOPMAT_SUBGROUP)
#define TILE_ELEMENTS (FERRY_HAMMING_COOPMAT_M * FERRY_HAMMING_COOPMAT_N)

#if ROUND * CHUNK_WORDS != WG
#error "a chunk of a round's rows is one word per invocation"
#endif
#if FERRY_HAMMING_COOPMAT_K != 32
#error "a product step is one 32-bit word of the codes"
#endif

layout(local_size_x = WG) in;

// 32 or 16 (hamming_topk_plan.cpp picks it).
layout(constant_id = FERRY_HAMMING_TILE_ID) const uint kTile = 32u;
const uint kRowBlocks = ROUND / FERRY_HAMMING_COOPMAT_M;          // 4
const uint kBlocks = kRowBlocks * (kTile / FERRY_HAMMING_COOPMAT_N);  // 8 or 4 subgroups compute

layout(std430, set = 0, binding = 0) restrict readonly buffer Queries { uint words[]; } queries;
layout(std430, set = 0, binding = 1) restrict readonly buffer Database { uint words[]; } database;
layout(std430, set = 0, binding = 2) restrict writeonly buffer Distances { uint words[]; } distances;
layout(std430, set = 0, binding = 3) restrict writeonly buffer Indices { uint words[]; } indices;
layout(std430, set = 0, binding = 4) restrict buffer Scratch { uint words[]; } scratch;

// The scan's pool, laid out as in hamming_topk.comp (hamming_topk_abi.h).
shared uint s_pool[FERRY_HAMMING_POOL_WORDS];
// Expanded codes: row r of the round at s_rows[r * PITCH], query j at s_codes[j * PITCH].
shared uvec4 s_rows[ROUND * PITCH];
shared uvec4 s_codes[FERRY_HAMMING_MAX_TILE * PITCH];
// Per subgroup, a 16 x 16 tile (row-major): C0, or the accumulators being inserted.
shared int s_stage[SUBGROUPS * TILE_ELEMENTS];
// popc of each query of the tile (0 past the slice).
shared uint s_query_bits[FERRY_HAMMING_MAX_TILE];

#include "hamming_topk_scan.h"
#include "hamming_topk_signs.h"

#define ROW_MATRIX icoopmatNV<8, gl_ScopeSubgroup, FERRY_HAMMING_COOPMAT_M, FERRY_HAMMING_COOPMAT_K>
#define QUERY_MATRIX icoopmatNV<8, gl_ScopeSubgroup, FERRY_HAMMING_COOPMAT_K, FERRY_HAMMING_COOPMAT_N>
#define ACCUMULATOR icoopmatNV<32, gl_ScopeSubgroup, FERRY_HAMMING_COOPMAT_M, FERRY_HAMMING_COOPMAT_N>

// A code word's 32 bits as 32 bytes (2 quads: planes 0-3, 4-7); absent words (past the code,
// queries past the slice) as zeros, which add nothing to any product.
void row_planes(uint word, bool present, out uvec4 low, out uvec4 high) {
  low = uvec4(0u);
  high = uvec4(0u);
  for (uint p = 0u; present && p < 4u; ++p) {
    low[p] = ferry_hamming_row_plane(word, p);
    high[p] = ferry_hamming_row_plane(word, p + 4u);
  }
}

void query_planes(uint word, bool present, out uvec4 low, out uvec4 high) {
  low = uvec4(0u);
  high = uvec4(0u);
  for (uint p = 0u; present && p < 4u; ++p) {
    low[p] = ferry_hamming_query_plane(word, p);
    high[p] = ferry_hamming_query_plane(word, p + 4u);
  }
}

// Chunk `chunk` of the tile's query codes: one word per invocation.
void expand_query_chunk(uint chunk, uint tile, uint tile_queries) {
  const uint t = gl_LocalInvocationID.x;
  if (t < kTile * CHUNK_WORDS) {
    const uint j = t / CHUNK_WORDS, w = t % CHUNK_WORDS, word = chunk * CHUNK_WORDS + w;
    const bool present = j < tile_queries && word < push.words;
    uint bits = 0u;
    const uint code = push.queries_word + (push.query_begin + tile + j) * push.words;
    if (present) bits = queries.words[code + word];
    query_planes(bits, present, s_codes[j * PITCH + 2u * w], s_codes[j * PITCH + 2u * w + 1u]);
  }
}

// C0 of the subgroup's tile (columns: queries column * 16 ...): limit - popc(query) in every row.
// Subgroup-uniform control flow; the tile is visible to the subgroup's loads after it.
void stage_start(uint stage, uint column) {
  for (uint e = gl_SubgroupInvocationID; e < TILE_ELEMENTS; e += gl_SubgroupSize) {
    const uint j = column * FERRY_HAMMING_COOPMAT_N + e % FERRY_HAMMING_COOPMAT_N;
    const uint limit = THRESHOLD(j) >> FERRY_HAMMING_POSITION_BITS;
    s_stage[stage + e] = ferry_hamming_coopmat_start(limit, s_query_bits[j]);
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint words = push.words;
  const uint chunks = (words + CHUNK_WORDS - 1u) / CHUNK_WORDS;
  const uint tile = gl_WorkGroupID.y * kTile;  // the tile's first query in the slice
  const uint tile_queries = min(kTile, push.query_count - tile);
  // Subgroup s computes rows (s % 4) * 16 ... of a round for queries (s / 4) * 16 ... .
  const uint subgroup = gl_SubgroupID;
  const bool computes = subgroup < kBlocks;  // uniform in the subgroup
  const uint row_block = subgroup % kRowBlocks, column = subgroup / kRowBlocks;
  const uint stage = subgroup * TILE_ELEMENTS;
  // The queries' popcounts, and codes of one chunk expanded once (the first span's
  // scan_span_begin barrier orders them).
  if (t < kTile) {
    const uint code = push.queries_word + (push.query_begin + tile + t) * words;
    uint bits = 0u;
    for (uint w = 0u; t < tile_queries && w < words; ++w) {
      bits += uint(bitCount(queries.words[code + w]));
    }
    s_query_bits[t] = bits;
  }
  if (chunks == 1u) expand_query_chunk(0u, tile, tile_queries);

  for (uint span = gl_WorkGroupID.x; span < push.groups; span += gl_NumWorkGroups.x) {
    const uint span_begin = span * push.group_items;
    const uint span_rows = min(push.group_items, push.items - span_begin);
    scan_span_begin(tile, tile_queries);
    if (computes) stage_start(stage, column);
    const uint span_word = push.database_word + span_begin * words;
    const uint rounds = (span_rows + ROUND - 1u) / ROUND;
    for (uint round = 0u; round < rounds; ++round) {
      ACCUMULATOR acc;
      if (computes) coopMatLoadNV(acc, s_stage, stage, FERRY_HAMMING_COOPMAT_N, false);
      for (uint chunk = 0u; chunk < chunks; ++chunk) {
        // The previous chunk's products have read the codes this one replaces (the round's
        // barrier orders the previous round's).
        if (chunk > 0u) barrier();
        {
          const uint r = t / CHUNK_WORDS, w = t % CHUNK_WORDS, word = chunk * CHUNK_WORDS + w;
          // Rows past the span read the span's last row (never kept: see below).
          const uint position = min(round * ROUND + r, span_rows - 1u);
          const bool present = word < words;
          uint bits = 0u;
          if (present) bits = database.words[span_word + position * words + word];
          row_planes(bits, present, s_rows[r * PITCH + 2u * w], s_rows[r * PITCH + 2u * w + 1u]);
        }
        if (chunks > 1u) expand_query_chunk(chunk, tile, tile_queries);
        barrier();
        if (computes) {
          const uint steps = min(CHUNK_WORDS, words - chunk * CHUNK_WORDS);
          // Step s: word s of the chunk, 32 bytes (2 quads) of each expanded row; the queries'
          // matrix (K x N) column-major, a query per column.
          const uint rows_at = row_block * FERRY_HAMMING_COOPMAT_M * PITCH;
          const uint codes_at = column * FERRY_HAMMING_COOPMAT_N * PITCH;
          for (uint s = 0u; s < steps; ++s) {
            ROW_MATRIX a;
            QUERY_MATRIX b;
            coopMatLoadNV(a, s_rows, rows_at + 2u * s, PITCH, false);
            coopMatLoadNV(b, s_codes, codes_at + 2u * s, PITCH, true);
            acc = coopMatMulAddNV(a, b, acc);
          }
        }
      }
      if (computes) {
        bool passes = false;
        for (int i = 0; i < acc.length(); ++i) passes = passes || acc[i] > 0;
        if (subgroupAny(passes)) {
          coopMatStoreNV(acc, s_stage, stage, FERRY_HAMMING_COOPMAT_N, false);
          subgroupMemoryBarrierShared();
          subgroupBarrier();
          for (uint e = gl_SubgroupInvocationID; e < TILE_ELEMENTS; e += gl_SubgroupSize) {
            const int value = s_stage[stage + e];
            const uint position = round * ROUND + row_block * FERRY_HAMMING_COOPMAT_M +
                                  e / FERRY_HAMMING_COOPMAT_N;
            if (value > 0 && position < span_rows) {
              const uint j = column * FERRY_HAMMING_COOPMAT_N + e % FERRY_HAMMING_COOPMAT_N;
              const uint limit = THRESHOLD(j) >> FERRY_HAMMING_POSITION_BITS;
              scan_insert(j, ferry_hamming_coopmat_distance(limit, value), position, round);
            }
          }
          subgroupBarrier();  // every value read before C0 replaces it
          stage_start(stage, column);
        }
      }
      barrier();
      if (scan_round_end(round) && computes) stage_start(stage, column);
    }
    scan_span_end(span, span_begin, span_rows, tile, tile_queries);
  }
}
