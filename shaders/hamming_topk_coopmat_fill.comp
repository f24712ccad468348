// hamming_topk's pooled search, its fill pass with cooperative matrices (GL_NV_cooperative_matrix,
// int8 x int8 -> int32 at 16 x 16 x 32 on subgroups of 32): every database row whose distance to
// a query is within the query's bound is appended to the query's pool, as hamming_topk.comp's
// fill_pools does with popcounts. The same pools, so the same selection and the same results.
//
// Products as hamming_topk_coopmat.comp's (hamming_topk_signs.h): rows as 0 / 1 bytes, queries as
// -1 / +1, each accumulator started at limit - popc(query), so that a row passes exactly when its
// accumulator is positive. What differs: the pools are in global memory, so a workgroup keeps
// nothing of its own and its subgroups share only the rows. A workgroup of 8 subgroups takes a
// tile of kTile = 64, 128 or 256 queries, kTile / 32 query groups of 32, each query group held by
// 256 / kTile subgroups that split a round's 4 blocks of 16 rows. A subgroup keeps its 32
// queries' start values in registers, and for codes of at most FERRY_HAMMING_FILL_MAX_WORDS
// words (one chunk) their matrices too (2 per step of 32 bits) for the whole pass, so that a
// product step reads only a row matrix from shared memory. Longer codes come in chunks of that
// many words, each step's query matrices expanded again by the subgroup (for all its blocks of
// rows, whose accumulators it keeps over the chunks). Rows come in rounds of 64, a chunk at a
// time, expanded into shared memory by the whole workgroup: the next chunk's words are read from
// global memory before this one's products and expanded after them into the other of two
// buffers, so that one barrier a chunk orders both.
//
// Where a row passes (rare once the bounds hold), each invocation appends its own elements that
// pass, their rows and queries read from a matrix of the same type holding each element's
// position (an implementation places a type's elements alike in every matrix of it): no store
// of the tile, no barrier; they wait in shared memory and go out a subgroup's worth at a time.
//
// With FERRY_HAMMING_MINIMA, the same products make the sample's pass instead (hamming_topk_abi.h):
// started at -popc(query), an accumulator is minus the distance, each invocation keeps the
// largest of each of its elements over the span (a group of the sample), and at the span's end
// they meet per query in shared memory (atomicMax), written as the span's nearest distance.
// Needs subgroups of 32.
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
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
#define PITCH FERRY_HAMMING_FILL_PITCH
#define MAX_STEPS FERRY_HAMMING_FILL_MAX_WORDS
#define SUBGROUP FERRY_HAMMING_COOPMAT_SUBGROUP
#define SUBGROUPS (WG / SUBGROUP)
#define M FERRY_HAMMING_COOPMAT_M
#define N FERRY_HAMMING_COOPMAT_N
#define TILE_ELEMENTS (M * N)
#define GROUP_QUERIES (2 * N)  // a subgroup's queries: the columns of two matrices
#define PENDING FERRY_HAMMING_FILL_PENDING  // they go out once a subgroup's worth wait

#if FERRY_HAMMING_COOPMAT_K != 32
#error "a product step is one 32-bit word of the codes"
#endif
#if ROUND * MAX_STEPS > 2 * WG
#error "a round's words are at most two per invocation"
#endif
#if SUBGROUP != GROUP_QUERIES
#error "a lane per query of its subgroup (the queries' codes and start values)"
#endif
#if SUBGROUPS * GROUP_QUERIES != FERRY_HAMMING_FILL_MAX_TILE
#error "the largest tile is a query group per subgroup"
#endif
#if FERRY_HAMMING_FILL_MAX_TILE > 256 || FERRY_HAMMING_POSITION_BITS > 24
#error "a waiting append is a query in the tile (8 bits) and a position in the span (24 bits)"
#endif
#if SUBGROUPS * PENDING < FERRY_HAMMING_FILL_MAX_TILE
#error "the sample's maxima take the waiting appends' place"
#endif

layout(local_size_x = WG) in;

// 64, 128 or 256 (hamming_coopmat_fill_tile picks it); the code's words.
layout(constant_id = FERRY_HAMMING_TILE_ID) const uint kTile = FERRY_HAMMING_FILL_MAX_TILE;
layout(constant_id = FERRY_HAMMING_WORDS_ID) const uint kWords = MAX_STEPS;
const uint kRowSplit = SUBGROUPS * GROUP_QUERIES / kTile;  // subgroups per query group: 4, 2, 1
const uint kRowBlocks = ROUND / M;                          // 4 blocks of 16 rows a round
const uint kBlocks = kRowBlocks / kRowSplit;                // a subgroup's blocks: 1, 2, 4
#define MAX_BLOCKS 4
const uint kChunks = (kWords + MAX_STEPS - 1u) / MAX_STEPS;
// One chunk: the queries' matrices stay in registers.
const bool kHeld = kChunks == 1u;

// The words of chunk c of the code.
uint chunk_words(uint c) { return min(MAX_STEPS, kWords - c * MAX_STEPS); }

layout(std430, set = 0, binding = 0) restrict readonly buffer Queries { uint words[]; } queries;
layout(std430, set = 0, binding = 1) restrict readonly buffer Database { uint words[]; } database;
layout(std430, set = 0, binding = 2) restrict writeonly buffer Distances { uint words[]; } distances;
layout(std430, set = 0, binding = 3) restrict writeonly buffer Indices { uint words[]; } indices;
layout(std430, set = 0, binding = 4) restrict buffer Scratch { uint words[]; } scratch;

// Two buffers of a round's expanded rows: row r of buffer b from quad (b * ROUND + r) * PITCH on,
// word w of its code as quads 2w (planes 0-3) and 2w + 1 (planes 4-7). The pitch's spare quad
// spreads a matrix's 16 rows over the banks.
shared uvec4 s_rows[2 * ROUND * PITCH];
// Per subgroup, 16 x 16 words: a step of its queries' codes on their way to matrices, and their
// start values.
shared int s_stage[SUBGROUPS * TILE_ELEMENTS];
// Element (r, c) of a 16 x 16 tile holds r * 16 + c (row-major).
shared int s_places[TILE_ELEMENTS];
// Per subgroup, appends waiting to go out together (query in the tile << 24 | position in the
// span), and their count (which may pass the capacity: those past it went out at once).
shared uint s_pending[SUBGROUPS * PENDING];
shared uint s_pending_count[SUBGROUPS];
// The sample's pass appends nothing: the tile's queries' largest accumulators take the appends'
// place, + kBias (an accumulator is above -kBias), so that unsigned order is theirs.
#define MAXIMUM(j) s_pending[j]
const uint kBias = 0x40000000u;
const int kLeast = -2147483647 - 1;

#include "hamming_topk_pools.h"
#include "hamming_topk_signs.h"

#define ROW_MATRIX icoopmatNV<8, gl_ScopeSubgroup, M, FERRY_HAMMING_COOPMAT_K>
#define QUERY_MATRIX icoopmatNV<8, gl_ScopeSubgroup, FERRY_HAMMING_COOPMAT_K, N>
#define ACCUMULATOR icoopmatNV<32, gl_ScopeSubgroup, M, N>

// The invocation's words of a round's chunk (word e = invocation + i * WG of the chunk's, i < 2);
// rows past the span read its last row (never appended).
uvec2 read_round(uint span_word, uint span_rows, uint round, uint chunk) {
  const uint words = chunk_words(chunk);
  uvec2 bits = uvec2(0u);
  [[unroll]] for (uint i = 0u; i < 2u; ++i) {
    const uint e = gl_LocalInvocationID.x + i * WG;
    if (e < ROUND * words) {
      const uint position = min(round * ROUND + e / words, span_rows - 1u);
      bits[i] = database.words[span_word + position * kWords + chunk * MAX_STEPS + e % words];
    }
  }
  return bits;
}

// Those words as bytes of 0 or 1 into buffer `slot`.
void expand_round(uvec2 bits, uint slot, uint chunk) {
  const uint words = chunk_words(chunk);
  [[unroll]] for (uint i = 0u; i < 2u; ++i) {
    const uint e = gl_LocalInvocationID.x + i * WG;
    if (e < ROUND * words) {
      const uint at = (slot * ROUND + e / words) * PITCH + 2u * (e % words);
      uvec4 low, high;
      [[unroll]] for (uint p = 0u; p < 4u; ++p) {
        low[p] = ferry_hamming_row_plane(bits[i], p);
        high[p] = ferry_hamming_row_plane(bits[i], p + 4u);
      }
      s_rows[at] = low;
      s_rows[at + 1u] = high;
    }
  }
}

// Step `word` of the subgroup's queries' codes (lane l's query is its query l) as the matrices of
// its queries 0-15 and 16-31 (K x N, column-major: a query's 32 bytes a column), zeros for a
// query past the slice. Subgroup-uniform control flow.
void load_query_step(bool present, uint word, uint stage, out QUERY_MATRIX low,
                     out QUERY_MATRIX high) {
  const uint bits = present ? queries.words[word] : 0u;
  for (uint p = 0u; p < 8u; ++p) {
    s_stage[stage + 8u * gl_SubgroupInvocationID + p] =
        present ? int(ferry_hamming_query_plane(bits, p)) : 0;
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  coopMatLoadNV(low, s_stage, stage, 8u, true);
  coopMatLoadNV(high, s_stage, stage + 8u * N, 8u, true);
  subgroupBarrier();  // loaded before the next step's codes replace them
}

// The workgroup's tile, the span (set per span), the subgroup's waiting appends.
uint g_tile, g_span_begin, g_pending;

// The subgroup's waiting appends go out, one per invocation (an atomic's wait for up to 32 of
// them). Subgroup-uniform control flow.
void flush_pending() {
  const uint count = min(s_pending_count[gl_SubgroupID], PENDING);
  for (uint e = gl_SubgroupInvocationID; e < count; e += SUBGROUP) {
    const uint entry = s_pending[g_pending + e];
    pool_append(g_tile + (entry >> 24), g_span_begin + (entry & 0xFFFFFFu));
  }
  subgroupBarrier();  // every entry read before the count restarts
  if (subgroupElect()) s_pending_count[gl_SubgroupID] = 0u;
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

// A tile of accumulators where some row passes: rows position0 ... of the span, queries
// `column` ... of the workgroup's tile. Each invocation takes its own elements that pass: they
// wait in shared memory (or, past its room, go out at once), and go out once a subgroup's
// worth wait. Subgroup-uniform control flow.
void append_passing(ACCUMULATOR acc, uint column, uint position0, uint span_rows) {
  ACCUMULATOR places;
  coopMatLoadNV(places, s_places, 0, N, false);
  uint passing = 0u;
  for (int i = 0; i < acc.length(); ++i) {
    const uint position = position0 + uint(places[i]) / N;
    if (acc[i] > 0 && position < span_rows) ++passing;
  }
  uint at = 0u;
  if (passing > 0u) at = atomicAdd(s_pending_count[gl_SubgroupID], passing);
  for (int i = 0; i < acc.length(); ++i) {
    const uint place = uint(places[i]), position = position0 + place / N;
    if (acc[i] > 0 && position < span_rows) {
      const uint query = column + place % N;
      if (at < PENDING) {
        s_pending[g_pending + at] = query << 24 | position;
      } else {
        pool_append(g_tile + query, g_span_begin + position);
      }
      ++at;
    }
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  if (s_pending_count[gl_SubgroupID] >= SUBGROUP) flush_pending();
}

// The products of a block of rows (rows position0 ... of the span) with the subgroup's queries,
// `first` ... of the tile: what passes appended. Subgroup-uniform control flow.
void check_block(ACCUMULATOR acc_low, ACCUMULATOR acc_high, uint first, uint position0,
                 uint span_rows) {
  bool passes_low = false, passes_high = false;
  for (int i = 0; i < acc_low.length(); ++i) {
    passes_low = passes_low || acc_low[i] > 0;
    passes_high = passes_high || acc_high[i] > 0;
  }
  if (subgroupAny(passes_low)) {
    append_passing(acc_low, first, position0, span_rows);
  }
  if (subgroupAny(passes_high)) {
    append_passing(acc_high, first + N, position0, span_rows);
  }
}

// The sample's pass: each element's largest accumulator so far (rows past the span repeat its
// last row: no other minimum).
void keep_largest(ACCUMULATOR acc_low, ACCUMULATOR acc_high, inout ACCUMULATOR best_low,
                  inout ACCUMULATOR best_high) {
  for (int i = 0; i < acc_low.length(); ++i) {
    best_low[i] = max(best_low[i], acc_low[i]);
    best_high[i] = max(best_high[i], acc_high[i]);
  }
}

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint subgroup = gl_SubgroupID;
  const uint first = (subgroup / kRowSplit) * GROUP_QUERIES;  // the subgroup's queries in the tile
  const uint part = subgroup % kRowSplit;  // its row blocks: part, part + kRowSplit, ...
  const uint stage = subgroup * TILE_ELEMENTS;
  const uint tile = gl_WorkGroupID.y * kTile;  // the tile's first query in the slice
  const uint tile_queries = min(kTile, push.query_count - tile);
  g_tile = tile;
  g_pending = subgroup * PENDING;
  // Read after the first span's barrier.
  for (uint e = gl_LocalInvocationID.x; e < TILE_ELEMENTS; e += WG) s_places[e] = int(e);
  if (subgroupElect()) s_pending_count[subgroup] = 0u;

  // Lane l's query is the subgroup's query l (past the slice: none).
  const bool present = first + lane < tile_queries;
  const uint code = push.queries_word + (push.query_begin + tile + first + lane) * kWords;
  uint query_bits = 0u;
  for (uint w = 0u; present && w < kWords; ++w) query_bits += uint(bitCount(queries.words[code + w]));
  QUERY_MATRIX low[MAX_STEPS], high[MAX_STEPS];  // queries 0-15 and 16-31 of the subgroup's
  if (kHeld) {
    [[unroll]] for (uint s = 0u; s < kWords; ++s) load_query_step(present, code + s, stage, low[s], high[s]);
  }
  // The accumulators' start values, the same in every row of a query's column; 0 past the slice
  // (the query's matrices are zeros: its accumulators stay 0 and nothing passes).
  // The sample's pass has no limit yet: 0.
  const bool minima = (push.flags & FERRY_HAMMING_MINIMA) != 0u;
  const uint limit = minima || !present ? 0u : pool_limit(tile + first + lane);
  const int start = present ? ferry_hamming_coopmat_start(limit, query_bits) : 0;
  ACCUMULATOR start_low, start_high;
  for (uint side = 0u; side < 2u; ++side) {
    if (lane / N == side) {
      for (uint r = 0u; r < M; ++r) s_stage[stage + r * N + lane % N] = start;
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    ACCUMULATOR c;
    coopMatLoadNV(c, s_stage, stage, N, false);
    if (side == 0u) {
      start_low = c;
    } else {
      start_high = c;
    }
    subgroupBarrier();
  }
  barrier();  // every subgroup's setup done before the first span's writes

  for (uint span = gl_WorkGroupID.x; span < push.groups; span += gl_NumWorkGroups.x) {
    const uint span_begin = span * push.group_items;
    const uint span_rows = min(push.group_items, push.items - span_begin);
    const uint span_word = push.database_word + span_begin * kWords;
    g_span_begin = span_begin;
    const uint rounds = (span_rows + ROUND - 1u) / ROUND;
    // The sample's pass: each query's largest accumulator in the span, minus its distance (the
    // invocation that resets a query's is the one that writes it out).
    const uint t = gl_LocalInvocationID.x;
    if (minima && t < kTile) MAXIMUM(t) = 0u;
    ACCUMULATOR best_low = ACCUMULATOR(kLeast), best_high = ACCUMULATOR(kLeast);
    // The previous span's last barrier ordered its reads of buffer 0.
    expand_round(read_round(span_word, span_rows, 0u, 0u), 0u, 0u);
    barrier();
    // Chunk c of round r is unit r * kChunks + c, its rows in buffer unit & 1.
    uint unit = 0u;
    for (uint round = 0u; round < rounds; ++round) {
      // Longer codes: the accumulators of the subgroup's blocks over the chunks.
      ACCUMULATOR acc_lows[MAX_BLOCKS], acc_highs[MAX_BLOCKS];
      if (!kHeld) {
        for (uint b = 0u; b < kBlocks; ++b) {
          acc_lows[b] = start_low;
          acc_highs[b] = start_high;
        }
      }
      for (uint chunk = 0u; chunk < kChunks; ++chunk, ++unit) {
        const uint slot = unit & 1u;
        const bool last = chunk + 1u == kChunks;
        const uint next_round = last ? round + 1u : round, next_chunk = last ? 0u : chunk + 1u;
        const bool more = next_round < rounds;
        uvec2 next = uvec2(0u);
        if (more) next = read_round(span_word, span_rows, next_round, next_chunk);
        if (kHeld) {
          for (uint block = part; block < kRowBlocks; block += kRowSplit) {
            ACCUMULATOR acc_low = start_low, acc_high = start_high;
            const uint rows_at = (slot * ROUND + block * M) * PITCH;
            [[unroll]] for (uint s = 0u; s < kWords; ++s) {
              ROW_MATRIX a;
              coopMatLoadNV(a, s_rows, rows_at + 2u * s, PITCH, false);
              acc_low = coopMatMulAddNV(a, low[s], acc_low);
              acc_high = coopMatMulAddNV(a, high[s], acc_high);
            }
            if (minima) {
              keep_largest(acc_low, acc_high, best_low, best_high);
            } else {
              check_block(acc_low, acc_high, first, round * ROUND + block * M, span_rows);
            }
          }
        } else {
          for (uint s = 0u; s < chunk_words(chunk); ++s) {
            QUERY_MATRIX step_low, step_high;
            load_query_step(present, code + chunk * MAX_STEPS + s, stage, step_low, step_high);
            [[unroll]] for (uint b = 0u; b < kBlocks; ++b) {
              const uint block = part + b * kRowSplit;
              ROW_MATRIX a;
              coopMatLoadNV(a, s_rows, (slot * ROUND + block * M) * PITCH + 2u * s, PITCH, false);
              acc_lows[b] = coopMatMulAddNV(a, step_low, acc_lows[b]);
              acc_highs[b] = coopMatMulAddNV(a, step_high, acc_highs[b]);
            }
          }
        }
        // This chunk's buffer is read; the other one was read a chunk ago, before the barrier.
        if (more) expand_round(next, slot ^ 1u, next_chunk);
        barrier();
      }
      if (!kHeld) {
        [[unroll]] for (uint b = 0u; b < kBlocks; ++b) {
          if (minima) {
            keep_largest(acc_lows[b], acc_highs[b], best_low, best_high);
          } else {
            const uint position0 = round * ROUND + (part + b * kRowSplit) * M;
            check_block(acc_lows[b], acc_highs[b], first, position0, span_rows);
          }
        }
      }
    }
    if (minima) {
      ACCUMULATOR places;
      coopMatLoadNV(places, s_places, 0, N, false);
      for (int i = 0; i < best_low.length(); ++i) {
        atomicMax(MAXIMUM(first + uint(places[i]) % N), uint(best_low[i] + int(kBias)));
        atomicMax(MAXIMUM(first + N + uint(places[i]) % N), uint(best_high[i] + int(kBias)));
      }
      barrier();
      if (t < tile_queries) {
        const uint at = push.out_base + (tile + t) * push.out_stride + span;
        scratch.words[push.scratch_word + 2u * at] = kBias - MAXIMUM(t);  // the nearest distance
        scratch.words[push.scratch_word + 2u * at + 1u] = span_begin;
      }
    } else {
      flush_pending();  // the waiting appends are of this span's rows
    }
  }
}
