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
#version 460
#extension GL_GOOGLE_include_directive : require

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
}

// ---- Level 0: the scan ----

#include "hamming_topk_scan.h"

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
  const uint g = t % kGroups, lane = t / kGroups;
  const uint full_quads = words / 4u;
  const bool half_quad = (words & 2u) != 0u;

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
        for (uint i = 0u; i < kQueries; ++i) dist[r][i] = 0u;
      }
      for (uint w = 0u; w < full_quads; ++w) {
        uvec4 row[MAX_ROWS];
        for (uint r = 0u; r < kRows; ++r) {
          const uint at = row_word[r] + 4u * w;
          row[r] = uvec4(database.words[at], database.words[at + 1u], database.words[at + 2u],
                         database.words[at + 3u]);
        }
        for (uint i = 0u; i < kQueries; ++i) {
          const uvec4 query = s_codes[w * kTile + i * kGroups + g];
          for (uint r = 0u; r < kRows; ++r) {
            const uvec4 bits = uvec4(bitCount(row[r] ^ query));
            dist[r][i] += bits.x + bits.y + bits.z + bits.w;
          }
        }
      }
      if (half_quad) {
        uvec2 row[MAX_ROWS];
        for (uint r = 0u; r < kRows; ++r) {
          const uint at = row_word[r] + 4u * full_quads;
          row[r] = uvec2(database.words[at], database.words[at + 1u]);
        }
        for (uint i = 0u; i < kQueries; ++i) {
          const uvec2 query = s_codes[full_quads * kTile + i * kGroups + g].xy;
          for (uint r = 0u; r < kRows; ++r) {
            const uvec2 bits = uvec2(bitCount(row[r] ^ query));
            dist[r][i] += bits.x + bits.y;
          }
        }
      }
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
  if (kTile == 0u) {
    merge();
  } else {
    scan();
  }
}
