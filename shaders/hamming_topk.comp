// hamming_topk, one pass of the plan (runtime/src/ops/hamming_topk.hpp has the algorithm): a
// workgroup keeps, per query, the min(k, count) smallest (distance, index) pairs of its group of
// `count` items (a span of database rows at level 0, candidates in merges), sorted, as a run of
// candidates or, in the final pass, as the outputs. The specialization constant kTile picks the
// path: 0 the merges, 32, 16, 8 or 4 the level-0 scan for tiles of that many queries (each a
// pipeline of its own, so that each path's registers are its own).
//
// Merges: selection without sorting everything (padding, distance NONE, counted out: a bounded
// scan pads its short runs): a histogram of the distances gives the threshold
// T (fewer than `keep` items are nearer, at least `keep` are at T or nearer); a bitmask of the
// items at T gives the one whose rank among them makes `keep` (the lowest local positions win,
// which is the lowest indices: positions follow index order among equal distances). The kept
// items, exactly `keep`, are then sorted by key = distance << 16 | position with a bitonic sort
// in shared memory.
//
// Level 0, the scan: a running threshold per query. Keys are distance << 19 | (row - span
// begin), so key order is the (distance, index) order. Rows come in rounds of 64, of increasing
// index; a row's key enters its query's buffer only when its distance is below the distance of
// the query's threshold key (the k-th kept key: a later row at that distance ranks after it).
// After a round, the whole workgroup compacts the buffers the next round could overflow, all at
// once, to their k smallest keys (each k-th found by a radix select, 4 bits at a time) and sets
// their thresholds to the k-th keys. After a few rounds almost nothing passes: the scan costs a
// compare per distance. At the span's end the buffers are cut to their min(k, rows) smallest,
// sorted and written. No subgroup operation: nothing depends on the subgroup size.
//
// Pools (the default where they apply: vulkan/ops/hamming_topk_plan.hpp), the same scan
// pipelines and the merges' with other flags: a bound per query from a sample (scan_minima, then
// a merge), every row within it appended to the query's pool in global memory (fill_pools: no
// buffers, no barrier per round), then a selection per query (select_pool). Same results.
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "hamming_topk_abi.h"

#define WG FERRY_HAMMING_WORKGROUP_SIZE
#define ITEMS_PER_INVOCATION (FERRY_HAMMING_MERGE_GROUP / WG)
#define ROUND FERRY_HAMMING_ROUND_ROWS
#define POSITION_MASK ((1u << FERRY_HAMMING_POSITION_BITS) - 1u)
#define NONE 0xFFFFFFFFu

layout(local_size_x = WG) in;

// 0: the merges; otherwise level 0 with tiles of kTile queries.
layout(constant_id = FERRY_HAMMING_TILE_ID) const uint kTile = 0u;
// The scan's work per invocation and round: kRows rows x kQueries queries, the queries
// i * kGroups + g (g = invocation % kGroups), the rows lane + r * kRowLanes (lane = invocation /
// kGroups): 2 x 4 for tiles of 32, 1 x 4, 1 x 2, 1 x 1 for 16, 8, 4; always 64 rows a round.
const uint kRows = 1u + kTile / 32u;
const uint kQueries = kTile / (4u * kRows);
const uint kGroups = 4u * kRows;  // = kTile / kQueries
const uint kRowLanes = WG / kGroups;
#define MAX_ROWS 2
#define MAX_QUERIES 4

layout(std430, set = 0, binding = 0) restrict readonly buffer Queries { uint words[]; } queries;
layout(std430, set = 0, binding = 1) restrict readonly buffer Database { uint words[]; } database;
layout(std430, set = 0, binding = 2) restrict writeonly buffer Distances { uint words[]; } distances;
layout(std430, set = 0, binding = 3) restrict writeonly buffer Indices { uint words[]; } indices;
layout(std430, set = 0, binding = 4) restrict buffer Scratch { uint words[]; } scratch;

// The pool: merges lay out a histogram, a tie mask, keys and partial sums in it; the scan its
// thresholds, counts, flags, radix select and key buffers (hamming_topk_abi.h).
shared uint s_pool[FERRY_HAMMING_POOL_WORDS];
shared uvec4 s_codes[FERRY_HAMMING_QUERY_QUADS];  // the scan's query codes, quad-major
shared uint s_threshold, s_nearer, s_cut, s_count;

#define MERGE_HIST 0
#define MERGE_TIES (MERGE_HIST + FERRY_HAMMING_MAX_BITS + 1)
#define MERGE_KEYS (MERGE_TIES + FERRY_HAMMING_MERGE_GROUP / 32)
#define MERGE_PARTIAL (MERGE_KEYS + FERRY_HAMMING_MAX_K)
#if MERGE_PARTIAL + WG > FERRY_HAMMING_POOL_WORDS
#error "the merges' shared memory exceeds the pool"
#endif

// ---- Merges ----

// The invocation's items: item i is at local position i * WG + invocation; NONE when absent.
uint g_dist[ITEMS_PER_INVOCATION];

// Keeps the `keep` smallest of the group's items and writes them, sorted: as the outputs of query
// `query` (final) or as a run of candidates at `out_at`. `in_at` turns a local position into the
// candidate that holds its row index. Uniform control flow: every invocation calls.
void select_and_write(uint count, uint keep, uint query, uint in_at, uint out_at) {
  const uint t = gl_LocalInvocationID.x;
  const uint bins = push.words * 32u + 1u;
  for (uint b = t; b < bins; b += WG) s_pool[MERGE_HIST + b] = 0u;
  for (uint w = t; w < (count + 31u) / 32u; w += WG) s_pool[MERGE_TIES + w] = 0u;
  if (t == 0u) s_count = 0u;
  barrier();
  for (uint i = 0u; i < ITEMS_PER_INVOCATION; ++i) {
    if (g_dist[i] != NONE) atomicAdd(s_pool[MERGE_HIST + g_dist[i]], 1u);
  }
  barrier();
  // The threshold: per-invocation sums of consecutive bins, then one invocation walks them.
  const uint per = (bins + WG - 1u) / WG;
  uint sum = 0u;
  for (uint b = t * per; b < min(bins, t * per + per); ++b) sum += s_pool[MERGE_HIST + b];
  s_pool[MERGE_PARTIAL + t] = sum;
  barrier();
  // Inclusive prefix sums of the invocations' bins (log2(WG) steps); the one invocation whose
  // bins hold the keep-th item walks them.
  for (uint offset = 1u; offset < WG; offset <<= 1) {
    const uint add = t >= offset ? s_pool[MERGE_PARTIAL + t - offset] : 0u;
    barrier();
    s_pool[MERGE_PARTIAL + t] += add;
    barrier();
  }
  const uint inclusive = s_pool[MERGE_PARTIAL + t];
  // Padding entries (a bounded scan's short runs) are not counted: keep at most the group's real
  // entries, the rest of the slots written as padding. The count is the workgroup's, so the
  // control flow below stays uniform.
  const uint slots = keep;
  keep = min(keep, s_pool[MERGE_PARTIAL + WG - 1u]);
  if (keep > 0u) {  // else padding only
    if (inclusive - sum < keep && inclusive >= keep) {
      uint nearer = inclusive - sum, threshold = t * per;
      while (nearer + s_pool[MERGE_HIST + threshold] < keep) nearer += s_pool[MERGE_HIST + threshold++];
      s_threshold = threshold;
      s_nearer = nearer;
    }
    barrier();
    const uint threshold = s_threshold;
    for (uint i = 0u; i < ITEMS_PER_INVOCATION; ++i) {
      if (g_dist[i] == threshold) {
        const uint local = i * WG + t;
        atomicOr(s_pool[MERGE_TIES + (local >> 5)], 1u << (local & 31u));
      }
    }
    barrier();
    if (t == 0u) {
      // The position of the (keep - nearer)-th item at the threshold, counted from 1.
      uint need = keep - s_nearer, w = 0u;
      while (uint(bitCount(s_pool[MERGE_TIES + w])) < need) need -= uint(bitCount(s_pool[MERGE_TIES + w++]));
      uint bits = s_pool[MERGE_TIES + w];
      for (uint r = 1u; r < need; ++r) bits &= bits - 1u;
      s_cut = w * 32u + uint(findLSB(bits));
    }
    barrier();
    const uint cut = s_cut;
    for (uint i = 0u; i < ITEMS_PER_INVOCATION; ++i) {
      const uint d = g_dist[i], local = i * WG + t;
      if (d != NONE && (d < threshold || (d == threshold && local <= cut))) {
        s_pool[MERGE_KEYS + atomicAdd(s_count, 1u)] = (d << 16) | local;
      }
    }
    barrier();
    // Bitonic sort of the `keep` keys, padded to a power of two with NONE (sorts last).
    uint size = 1u;
    while (size < keep) size <<= 1;
    for (uint s = keep + t; s < size; s += WG) s_pool[MERGE_KEYS + s] = NONE;
    barrier();
    for (uint block = 2u; block <= size; block <<= 1) {
      for (uint stride = block >> 1; stride > 0u; stride >>= 1) {
        for (uint i = t; i < size / 2u; i += WG) {
          const uint a = (i / stride) * 2u * stride + (i % stride), b = a + stride;
          const uint ka = s_pool[MERGE_KEYS + a], kb = s_pool[MERGE_KEYS + b];
          if ((ka > kb) == ((a & block) == 0u)) {
            s_pool[MERGE_KEYS + a] = kb;
            s_pool[MERGE_KEYS + b] = ka;
          }
        }
        barrier();
      }
    }
  }
  const bool final = (push.flags & FERRY_HAMMING_FINAL) != 0u;
  for (uint s = t; s < (final ? push.k : slots); s += WG) {
    uint d = NONE, index = NONE;
    if (s < keep) {
      const uint key = s_pool[MERGE_KEYS + s], local = key & 0xFFFFu;
      d = key >> 16;
      index = scratch.words[push.scratch_word + 2u * (in_at + local) + 1u];
    }
    if (final) {
      const uint at = (push.query_begin + query) * push.k + s;
      distances.words[push.distances_word + at] = d;
      indices.words[push.indices_word + at] = index;
    } else {
      scratch.words[push.scratch_word + 2u * (out_at + s)] = d;
      scratch.words[push.scratch_word + 2u * (out_at + s) + 1u] = index;
    }
  }
  barrier();  // shared memory is reused by the next call
}

void merge() {
  const uint t = gl_LocalInvocationID.x;
  const uint q = gl_WorkGroupID.y;
  const uint keep_full = min(push.k, FERRY_HAMMING_MERGE_GROUP);
  for (uint g = gl_WorkGroupID.x; g < push.groups; g += gl_NumWorkGroups.x) {
    const uint first = g * FERRY_HAMMING_MERGE_GROUP;
    const uint count = min(FERRY_HAMMING_MERGE_GROUP, push.items - first);
    const uint in_at = push.in_base + q * push.in_stride + first;
    for (uint i = 0u; i < ITEMS_PER_INVOCATION; ++i) {
      const uint local = i * WG + t;
      g_dist[i] = local < count ? scratch.words[push.scratch_word + 2u * (in_at + local)] : NONE;
    }
    select_and_write(count, min(push.k, count), q, in_at,
                     push.out_base + q * push.out_stride + g * keep_full);
  }
  // The pooled search's bound pass: the query's pool starts empty (the scan after it appends).
  if ((push.flags & FERRY_HAMMING_POOLED) != 0u && t == 0u && gl_WorkGroupID.x == 0u) {
    scratch.words[push.scratch_word + push.pool_counts + q] = 0u;
  }
}

// ---- Level 0: the scan ----

#include "hamming_topk_scan.h"

// The distances of the invocation's kRows rows (their first words at row_word) to its kQueries
// queries (i * kGroups + g of the tile, their codes in s_codes).
void row_distances(const uint row_word[MAX_ROWS], uint g, out uint dist[MAX_ROWS][MAX_QUERIES]) {
  const uint full_quads = push.words / 4u;
  [[unroll]] for (uint r = 0u; r < kRows; ++r) {
    [[unroll]] for (uint i = 0u; i < kQueries; ++i) dist[r][i] = 0u;
  }
  for (uint w = 0u; w < full_quads; ++w) {
    uvec4 row[MAX_ROWS];
    [[unroll]] for (uint r = 0u; r < kRows; ++r) {
      const uint at = row_word[r] + 4u * w;
      row[r] = uvec4(database.words[at], database.words[at + 1u], database.words[at + 2u],
                     database.words[at + 3u]);
    }
    [[unroll]] for (uint i = 0u; i < kQueries; ++i) {
      const uvec4 query = s_codes[w * kTile + i * kGroups + g];
      [[unroll]] for (uint r = 0u; r < kRows; ++r) {
        const uvec4 bits = uvec4(bitCount(row[r] ^ query));
        dist[r][i] += bits.x + bits.y + bits.z + bits.w;
      }
    }
  }
  if ((push.words & 2u) != 0u) {  // half a quad: codes are 64-bit multiples
    uvec2 row[MAX_ROWS];
    [[unroll]] for (uint r = 0u; r < kRows; ++r) {
      const uint at = row_word[r] + 4u * full_quads;
      row[r] = uvec2(database.words[at], database.words[at + 1u]);
    }
    [[unroll]] for (uint i = 0u; i < kQueries; ++i) {
      const uvec2 query = s_codes[full_quads * kTile + i * kGroups + g].xy;
      [[unroll]] for (uint r = 0u; r < kRows; ++r) {
        const uvec2 bits = uvec2(bitCount(row[r] ^ query));
        dist[r][i] += bits.x + bits.y;
      }
    }
  }
}

// ---- Pools: the pooled search (hamming_topk_abi.h has its dispatches) ----
//
// A query's bound is the k-th smallest of the nearest distances of a sample's groups (k
// different rows lie within it), so its k nearest rows are among the rows within it: about k per
// sample's worth of the database. The scan appends those to the query's pool in global memory
// and keeps nothing itself: no key buffers, no barrier per round, a compare per distance. The
// selection then sorts each pool; a pool that overflowed (many rows tied at the bound) takes an
// exact pass over every row instead.

#include "hamming_topk_pools.h"

// The sample's scan: query j's smallest distance in the span (the scan's count words are free).
#define MINIMUM(j) s_pool[FERRY_HAMMING_SCAN_COUNTS + (j)]

// MINIMA: per query of the tile, each span's nearest distance, written as the candidate
// out_base + query * out_stride + span (the bound pass reads them). Rows and queries as the
// buffered scan's (row_distances); each invocation keeps its own minima, taken over the
// workgroup at the span's end. Uniform control flow.
void scan_minima(uint tile, uint tile_queries) {
  const uint t = gl_LocalInvocationID.x;
  const uint g = t % kGroups, lane = t / kGroups;
  const uint words = push.words;
  barrier();  // the tile's codes, which scan() stored
  for (uint span = gl_WorkGroupID.x; span < push.groups; span += gl_NumWorkGroups.x) {
    const uint span_begin = span * push.group_items;
    const uint span_rows = min(push.group_items, push.items - span_begin);
    const uint span_word = push.database_word + span_begin * words;
    for (uint j = t; j < kTile; j += WG) MINIMUM(j) = NONE;
    barrier();
    uint least[MAX_QUERIES];
    for (uint i = 0u; i < kQueries; ++i) least[i] = NONE;
    const uint rounds = (span_rows + ROUND - 1u) / ROUND;
    for (uint round = 0u; round < rounds; ++round) {
      uint position[MAX_ROWS], row_word[MAX_ROWS];
      for (uint r = 0u; r < kRows; ++r) {
        position[r] = round * ROUND + lane + r * kRowLanes;
        // Rows past the span read the span's last row (and are not counted).
        row_word[r] = span_word + min(position[r], span_rows - 1u) * words;
      }
      uint dist[MAX_ROWS][MAX_QUERIES];
      row_distances(row_word, g, dist);
      for (uint r = 0u; r < kRows; ++r) {
        for (uint i = 0u; i < kQueries; ++i) {
          if (position[r] < span_rows) least[i] = min(least[i], dist[r][i]);
        }
      }
    }
    for (uint i = 0u; i < kQueries; ++i) {
      if (i * kGroups + g < tile_queries) atomicMin(MINIMUM(i * kGroups + g), least[i]);
    }
    barrier();
    for (uint j = t; j < tile_queries; j += WG) {
      const uint at = push.out_base + (tile + j) * push.out_stride + span;
      scratch.words[push.scratch_word + 2u * at] = MINIMUM(j);
      scratch.words[push.scratch_word + 2u * at + 1u] = span_begin;
    }
    barrier();  // MINIMUM is reset for the next span
  }
}

// A row passes query j when its distance is below LIMIT(j): the query's bound + 1 (0 for the
// tile's absent queries: nothing passes).
#define LIMIT(j) s_pool[FERRY_HAMMING_SCAN_THRESHOLDS + (j)]

// The scan filling the pools: an invocation per row (WG rows a round), its code a chunk of 8
// words at a time against every query of the tile, whose codes every invocation reads alike (a
// broadcast from shared memory), then one compare per distance: a plain popcount kernel. The
// queries' loops run kTile times (a constant once the pipeline is made: the driver unrolls them
// and keeps the distances in registers; on the H200 this ran 1.2x faster than loops of a fixed 8
// queries, which read each row once per 8). No barrier after the start. Uniform control flow.
void fill_pools(uint tile, uint tile_queries) {
  const uint t = gl_LocalInvocationID.x;
  const uint words = push.words, quads = (words + 3u) / 4u;
  for (uint j = t; j < kTile; j += WG) {
    LIMIT(j) = j < tile_queries ? pool_limit(tile + j) : 0u;
  }
  barrier();  // the limits, and the tile's codes, which scan() stored
  for (uint span = gl_WorkGroupID.x; span < push.groups; span += gl_NumWorkGroups.x) {
    const uint span_begin = span * push.group_items;
    const uint span_rows = min(push.group_items, push.items - span_begin);
    for (uint first = 0u; first < span_rows; first += WG) {
      const uint position = first + t;
      // Rows past the span read the span's last row (and are not counted).
      const uint at = push.database_word + (span_begin + min(position, span_rows - 1u)) * words;
      uint dist[FERRY_HAMMING_MAX_TILE];
      for (uint j = 0u; j < kTile; ++j) dist[j] = 0u;
      for (uint c = 0u; c < quads; c += 2u) {  // words 4c to 4c + 7; zeros past the code
        const uint w = 4u * c;
        const uvec4 a = uvec4(database.words[at + w], database.words[at + w + 1u],
                              w + 2u < words ? database.words[at + w + 2u] : 0u,
                              w + 2u < words ? database.words[at + w + 3u] : 0u);
        const uvec4 b = uvec4(w + 4u < words ? database.words[at + w + 4u] : 0u,
                              w + 4u < words ? database.words[at + w + 5u] : 0u,
                              w + 6u < words ? database.words[at + w + 6u] : 0u,
                              w + 6u < words ? database.words[at + w + 7u] : 0u);
        const bool second = c + 1u < quads;
        for (uint j = 0u; j < kTile; ++j) {
          const uvec4 qa = s_codes[c * kTile + j];
          const uvec4 qb = second ? s_codes[(c + 1u) * kTile + j] : uvec4(0u);
          const uvec4 bits = uvec4(bitCount(a ^ qa)) + uvec4(bitCount(b ^ qb));
          dist[j] += bits.x + bits.y + bits.z + bits.w;
        }
      }
      if (position < span_rows) {
        for (uint j = 0u; j < kTile; ++j) {
          if (dist[j] < LIMIT(j)) pool_append(tile + j, span_begin + position);
        }
      }
    }
  }
}

// The selection's shared memory: (distance, row) pairs from word 0 (the exact pass's histogram
// there first), two tie masks of a 256-row chunk (used in turn), the query's code.
#define SELECT_KEYS 0
#define SELECT_HIST 0
#define SELECT_TIES (FERRY_HAMMING_MAX_BITS + 32)
#define SELECT_CODE (SELECT_TIES + 2 * WG / 32)
#if SELECT_CODE + FERRY_HAMMING_MAX_BITS / 32 > FERRY_HAMMING_POOL_WORDS || \
    FERRY_HAMMING_MAX_BITS + 1 > SELECT_TIES || 2 * FERRY_HAMMING_MAX_POOL > SELECT_TIES
#error "the selection's shared memory exceeds the pool"
#endif

uint row_distance(uint row) {
  const uint at = push.database_word + row * push.words;
  uint d = 0u;
  for (uint w = 0u; w < push.words; ++w) {
    d += uint(bitCount(database.words[at + w] ^ s_pool[SELECT_CODE + w]));
  }
  return d;
}

// The pool's row i of query q.
uint pool_row(uint q, uint i) { return scratch.words[push.scratch_word + q * push.pool_cap + i]; }

void set_pair(uint i, uint d, uint row) {
  s_pool[SELECT_KEYS + 2u * i] = d;
  s_pool[SELECT_KEYS + 2u * i + 1u] = row;
}

// Sorts the pairs [0, size) by (distance, row); size a power of two. Uniform control flow,
// after a barrier that made the pairs visible; ends with one.
void sort_pairs(uint size) {
  const uint t = gl_LocalInvocationID.x;
  for (uint block = 2u; block <= size; block <<= 1) {
    for (uint stride = block >> 1; stride > 0u; stride >>= 1) {
      for (uint i = t; i < size / 2u; i += WG) {
        const uint a = 2u * i - (i & (stride - 1u)), b = a + stride;
        const uvec2 ka = uvec2(s_pool[SELECT_KEYS + 2u * a], s_pool[SELECT_KEYS + 2u * a + 1u]);
        const uvec2 kb = uvec2(s_pool[SELECT_KEYS + 2u * b], s_pool[SELECT_KEYS + 2u * b + 1u]);
        const bool greater = ka.x > kb.x || (ka.x == kb.x && ka.y > kb.y);
        if (greater == ((a & block) == 0u)) {
          set_pair(a, kb.x, kb.y);
          set_pair(b, ka.x, ka.y);
        }
      }
      barrier();
    }
  }
}

// Counts the distances of n rows at SELECT_HIST (bins 0 .. words * 32): rows 0 .. n - 1 of the
// database, or of query q's pool. Uniform control flow; ends with a barrier.
void fill_histogram(uint q, uint n, bool from_pool) {
  const uint t = gl_LocalInvocationID.x;
  const uint bins = push.words * 32u + 1u;
  for (uint b = t; b < bins; b += WG) s_pool[SELECT_HIST + b] = 0u;
  barrier();
  for (uint i = t; i < n; i += WG) {
    atomicAdd(s_pool[SELECT_HIST + row_distance(from_pool ? pool_row(q, i) : i)], 1u);
  }
  barrier();
}

// From the histogram: the keep-th smallest distance T into s_threshold and the count of the
// distances below it into s_nearer. One invocation, between barriers.
void find_threshold(uint keep) {
  uint nearer = 0u, b = 0u;
  while (nearer + s_pool[SELECT_HIST + b] < keep) nearer += s_pool[SELECT_HIST + b++];
  s_threshold = b;
  s_nearer = nearer;
}

// A query whose pool overflowed: its `keep` nearest rows, exactly, by a pass of its own over
// every row. A histogram of the distances gives the keep-th distance T; every row nearer than T
// belongs, and of the rows at T the first ones in index order (ranked a chunk of WG rows at a
// time with a bitmask). Leaves the pairs [0, keep) sorted. Slow (two passes over the database for
// one query); only for ties beyond the pool.
void exact_select(uint keep) {
  const uint t = gl_LocalInvocationID.x;
  if (t < 2u * WG / 32u) s_pool[SELECT_TIES + t] = 0u;
  if (t == 0u) s_count = 0u;
  fill_histogram(0u, push.items, false);
  if (t == 0u) find_threshold(keep);
  barrier();
  const uint threshold = s_threshold, nearer = s_nearer, need = keep - nearer;
  uint taken = 0u;  // rows at the threshold met so far (the same in every invocation)
  for (uint first = 0u, chunk = 0u; first < push.items; first += WG, ++chunk) {
    const uint ties = SELECT_TIES + (WG / 32u) * (chunk & 1u);
    const uint row = first + t;
    const uint d = row < push.items ? row_distance(row) : NONE;
    if (d < threshold) set_pair(atomicAdd(s_count, 1u), d, row);
    if (d == threshold) atomicOr(s_pool[ties + (t >> 5)], 1u << (t & 31u));
    barrier();
    uint rank = taken, chunk_ties = 0u;
    for (uint w = 0u; w < WG / 32u; ++w) {
      const uint n = uint(bitCount(s_pool[ties + w]));
      chunk_ties += n;
      if (w < (t >> 5)) rank += n;
    }
    rank += uint(bitCount(s_pool[ties + (t >> 5)] & ((1u << (t & 31u)) - 1u)));
    if (d == threshold && rank < need) set_pair(nearer + rank, d, row);
    taken += chunk_ties;
    // The other mask, read in the chunk before (before the last barrier), is the next chunk's.
    if (t < WG / 32u) s_pool[SELECT_TIES + (WG / 32u) * ((chunk + 1u) & 1u) + t] = 0u;
    // The count is read between the barrier after this chunk's nearer rows and the next chunk's.
    const bool done = taken >= need && s_count >= nearer;
    barrier();
    if (done) break;
  }
  uint size = 1u;
  while (size < keep) size <<= 1;
  for (uint i = keep + t; i < size; i += WG) set_pair(i, NONE, NONE);
  barrier();
  sort_pairs(size);
}

// The selection: per query of the slice (a workgroup each), its k nearest from its pool (the
// bound has k rows within it, so a pool that did not overflow holds them), their distances
// recomputed: a pool the sort holds (FERRY_HAMMING_MAX_POOL) is sorted whole; a larger one gives
// a histogram of its distances first, and only its rows at or within the keep-th distance are
// sorted. A pool that overflowed, or whose rows at or within that distance are more than the sort
// holds (ties), takes exact_select.
void select_pool() {
  const uint t = gl_LocalInvocationID.x, q = gl_WorkGroupID.y;
  const uint words = push.words;
  const uint code = push.queries_word + (push.query_begin + q) * words;
  for (uint w = t; w < words; w += WG) s_pool[SELECT_CODE + w] = queries.words[code + w];
  const uint n = scratch.words[push.scratch_word + push.pool_counts + q];
  const uint keep = min(push.k, push.items);
  barrier();
  uint kept = keep;
  // Uniform control flow below: every invocation read the same words.
  if (n <= FERRY_HAMMING_MAX_POOL && n <= push.pool_cap) {
    uint size = 1u;
    while (size < n) size <<= 1;
    for (uint i = t; i < size; i += WG) {
      const uint row = i < n ? pool_row(q, i) : NONE;
      set_pair(i, i < n ? row_distance(row) : NONE, row);
    }
    barrier();
    sort_pairs(size);
    kept = min(keep, n);
  } else if (n <= push.pool_cap) {
    fill_histogram(q, n, true);
    if (t == 0u) {
      find_threshold(keep);
      s_nearer += s_pool[SELECT_HIST + s_threshold];  // the rows at or within it
      s_count = 0u;
    }
    barrier();  // the histogram is read: the pairs take its words
    const uint threshold = s_threshold, within = s_nearer;
    if (within <= FERRY_HAMMING_MAX_POOL) {
      for (uint i = t; i < n; i += WG) {
        const uint row = pool_row(q, i), d = row_distance(row);
        if (d <= threshold) set_pair(atomicAdd(s_count, 1u), d, row);
      }
      uint size = 1u;
      while (size < within) size <<= 1;
      for (uint i = within + t; i < size; i += WG) set_pair(i, NONE, NONE);
      barrier();
      sort_pairs(size);
    } else {
      exact_select(keep);
    }
  } else {
    exact_select(keep);
  }
  for (uint i = t; i < push.k; i += WG) {
    const uint at = (push.query_begin + q) * push.k + i;
    distances.words[push.distances_word + at] = i < kept ? s_pool[SELECT_KEYS + 2u * i] : NONE;
    indices.words[push.indices_word + at] = i < kept ? s_pool[SELECT_KEYS + 2u * i + 1u] : NONE;
  }
}

void scan() {
  const uint t = gl_LocalInvocationID.x;
  const uint words = push.words, k = push.k, cap = push.cap;
  const uint quads = (words + 3u) / 4u;
  const uint tile = gl_WorkGroupID.y * kTile;  // the tile's first query in the slice
  const uint tile_queries = min(kTile, push.query_count - tile);
  // The tile's codes: quad w of query j at s_codes[w * kTile + j]; zeros past a code's end (64-
  // bit multiples: a last quad may be half) and for queries past the slice.
  for (uint e = t; e < quads * kTile; e += WG) {
    const uint w = e / kTile, j = e % kTile;
    uvec4 quad = uvec4(0u);
    if (j < tile_queries) {
      const uint at = push.queries_word + (push.query_begin + tile + j) * words + 4u * w;
      quad.xy = uvec2(queries.words[at], queries.words[at + 1u]);
      if (4u * w + 2u < words) quad.zw = uvec2(queries.words[at + 2u], queries.words[at + 3u]);
    }
    s_codes[e] = quad;
  }
  if ((push.flags & FERRY_HAMMING_MINIMA) != 0u) {
    scan_minima(tile, tile_queries);
    return;
  }
  if ((push.flags & FERRY_HAMMING_POOLED) != 0u) {
    fill_pools(tile, tile_queries);
    return;
  }
  const uint g = t % kGroups, lane = t / kGroups;

  for (uint span = gl_WorkGroupID.x; span < push.groups; span += gl_NumWorkGroups.x) {
    const uint span_begin = span * push.group_items;
    const uint span_rows = min(push.group_items, push.items - span_begin);
    scan_span_begin(tile, tile_queries);
    // A row enters query i's buffer when its distance is below limit[i], the distance of the
    // query's threshold key (8191 before it has one: every row passes).
    uint limit[MAX_QUERIES];
    for (uint i = 0u; i < kQueries; ++i) limit[i] = THRESHOLD(i * kGroups + g) >> FERRY_HAMMING_POSITION_BITS;
    const uint span_word = push.database_word + span_begin * words;
    const uint rounds = (span_rows + ROUND - 1u) / ROUND;
    for (uint round = 0u; round < rounds; ++round) {
      uint position[MAX_ROWS], row_word[MAX_ROWS];
      uint dist[MAX_ROWS][MAX_QUERIES];
      for (uint r = 0u; r < kRows; ++r) {
        position[r] = round * ROUND + lane + r * kRowLanes;
        // Rows past the span read the span's last row (never kept: see below).
        row_word[r] = span_word + min(position[r], span_rows - 1u) * words;
      }
      row_distances(row_word, g, dist);
      // Rare once the thresholds settle. A round adds at most ROUND keys to a buffer; the add
      // that takes it past cap - ROUND flags it for compaction.
      for (uint r = 0u; r < kRows; ++r) {
        for (uint i = 0u; i < kQueries; ++i) {
          if (dist[r][i] < limit[i] && position[r] < span_rows) {
            scan_insert(i * kGroups + g, dist[r][i], position[r], round);
          }
        }
      }
      barrier();
      if (scan_round_end(round)) {  // the thresholds changed
        for (uint i = 0u; i < kQueries; ++i) limit[i] = THRESHOLD(i * kGroups + g) >> FERRY_HAMMING_POSITION_BITS;
      }
    }
    scan_span_end(span, span_begin, span_rows, tile, tile_queries);
  }
}

void main() {
  if (kTile == 0u && (push.flags & FERRY_HAMMING_SELECT) != 0u) {
    select_pool();
  } else if (kTile == 0u) {
    merge();
  } else {
    scan();
  }
}
