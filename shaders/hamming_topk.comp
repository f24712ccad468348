// hamming_topk, one pass of the plan (runtime/src/ops/hamming_topk.hpp has the algorithm): a
// workgroup keeps, per query, the min(k, count) smallest (distance, index) pairs of its group of
// `count` items (database rows at level 0, candidates in merges), sorted, as a run of candidates
// or, in the final pass, as the outputs.
//
// Selection without sorting everything: a histogram of the distances gives the threshold T (fewer
// than `keep` items are nearer, at least `keep` are at T or nearer); a bitmask of the items at T
// gives the one whose rank among them makes `keep` (the lowest local positions win, which is the
// lowest indices: positions follow index order among equal distances). The kept items, exactly
// `keep`, are then sorted by key = distance << 16 | position with a bitonic sort in shared memory.
#version 460
#extension GL_GOOGLE_include_directive : require

#include "hamming_topk_abi.h"

#define WG FERRY_HAMMING_WORKGROUP_SIZE
#define QT FERRY_HAMMING_QUERY_TILE
#define ROWS_PER_INVOCATION (FERRY_HAMMING_CHUNK_ROWS / WG)
#define ITEMS_PER_INVOCATION (FERRY_HAMMING_MERGE_GROUP / WG)
#define MAX_WORDS (FERRY_HAMMING_MAX_BITS / 32)
#define NONE 0xFFFFFFFFu

layout(local_size_x = WG) in;

layout(std430, set = 0, binding = 0) restrict readonly buffer Queries { uint words[]; } queries;
layout(std430, set = 0, binding = 1) restrict readonly buffer Database { uint words[]; } database;
layout(std430, set = 0, binding = 2) restrict writeonly buffer Distances { uint words[]; } distances;
layout(std430, set = 0, binding = 3) restrict writeonly buffer Indices { uint words[]; } indices;
layout(std430, set = 0, binding = 4) restrict buffer Scratch { uint words[]; } scratch;

shared uint s_hist[FERRY_HAMMING_MAX_BITS + 1];
shared uint s_ties[FERRY_HAMMING_MERGE_GROUP / 32];
shared uint s_keys[FERRY_HAMMING_MAX_K];
shared uint s_query[QT * MAX_WORDS];
shared uint s_partial[WG];
shared uint s_threshold, s_nearer, s_cut, s_count;

// The invocation's items: item i is at local position i * WG + invocation; NONE when absent.
uint g_dist[ITEMS_PER_INVOCATION];

// Keeps the `keep` smallest of the group's items and writes them, sorted: as the outputs of query
// `query` (final) or as a run of candidates at `out_at`. `row0` (level 0) or `in_at` (merges)
// turn a local position into a database row index. Uniform control flow: every invocation calls.
void select_and_write(uint count, uint keep, uint query, uint row0, uint in_at, uint out_at) {
  const uint t = gl_LocalInvocationID.x;
  const bool from_codes = (push.flags & FERRY_HAMMING_FROM_CODES) != 0u;
  const uint bins = push.words * 32u + 1u;
  for (uint b = t; b < bins; b += WG) s_hist[b] = 0u;
  for (uint w = t; w < (count + 31u) / 32u; w += WG) s_ties[w] = 0u;
  if (t == 0u) s_count = 0u;
  barrier();
  for (uint i = 0u; i < ITEMS_PER_INVOCATION; ++i) {
    if (g_dist[i] != NONE) atomicAdd(s_hist[g_dist[i]], 1u);
  }
  barrier();
  // The threshold: per-invocation sums of consecutive bins, then one invocation walks them.
  const uint per = (bins + WG - 1u) / WG;
  uint sum = 0u;
  for (uint b = t * per; b < min(bins, t * per + per); ++b) sum += s_hist[b];
  s_partial[t] = sum;
  barrier();
  // Inclusive prefix sums of the invocations' bins (log2(WG) steps); the one invocation whose
  // bins hold the keep-th item walks them.
  for (uint offset = 1u; offset < WG; offset <<= 1) {
    const uint add = t >= offset ? s_partial[t - offset] : 0u;
    barrier();
    s_partial[t] += add;
    barrier();
  }
  const uint inclusive = s_partial[t];
  if (inclusive - sum < keep && inclusive >= keep) {
    uint nearer = inclusive - sum, threshold = t * per;
    while (nearer + s_hist[threshold] < keep) nearer += s_hist[threshold++];
    s_threshold = threshold;
    s_nearer = nearer;
  }
  barrier();
  const uint threshold = s_threshold;
  for (uint i = 0u; i < ITEMS_PER_INVOCATION; ++i) {
    if (g_dist[i] == threshold) {
      const uint local = i * WG + t;
      atomicOr(s_ties[local >> 5], 1u << (local & 31u));
    }
  }
  barrier();
  if (t == 0u) {
    // The position of the (keep - nearer)-th item at the threshold, counted from 1.
    uint need = keep - s_nearer, w = 0u;
    while (uint(bitCount(s_ties[w])) < need) need -= uint(bitCount(s_ties[w++]));
    uint bits = s_ties[w];
    for (uint r = 1u; r < need; ++r) bits &= bits - 1u;
    s_cut = w * 32u + uint(findLSB(bits));
  }
  barrier();
  const uint cut = s_cut;
  for (uint i = 0u; i < ITEMS_PER_INVOCATION; ++i) {
    const uint d = g_dist[i], local = i * WG + t;
    if (d != NONE && (d < threshold || (d == threshold && local <= cut))) {
      s_keys[atomicAdd(s_count, 1u)] = (d << 16) | local;
    }
  }
  barrier();
  // Bitonic sort of the `keep` keys, padded to a power of two with NONE (sorts last).
  uint size = 1u;
  while (size < keep) size <<= 1;
  for (uint s = keep + t; s < size; s += WG) s_keys[s] = NONE;
  barrier();
  for (uint block = 2u; block <= size; block <<= 1) {
    for (uint stride = block >> 1; stride > 0u; stride >>= 1) {
      for (uint i = t; i < size / 2u; i += WG) {
        const uint a = (i / stride) * 2u * stride + (i % stride), b = a + stride;
        const uint ka = s_keys[a], kb = s_keys[b];
        if ((ka > kb) == ((a & block) == 0u)) {
          s_keys[a] = kb;
          s_keys[b] = ka;
        }
      }
      barrier();
    }
  }
  const bool final = (push.flags & FERRY_HAMMING_FINAL) != 0u;
  for (uint s = t; s < (final ? push.k : keep); s += WG) {
    uint d = NONE, index = NONE;
    if (s < keep) {
      const uint key = s_keys[s], local = key & 0xFFFFu;
      d = key >> 16;
      index = from_codes ? row0 + local : scratch.words[push.scratch_word + 2u * (in_at + local) + 1u];
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

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint k = push.k;
  if ((push.flags & FERRY_HAMMING_FROM_CODES) != 0u) {
    const uint tile = gl_WorkGroupID.y * QT;  // the tile's first query in the slice
    const uint words = push.words;
    for (uint i = t; i < QT * words; i += WG) {
      const uint j = i / words, q = tile + j;
      s_query[j * MAX_WORDS + i % words] =
          q < push.query_count
              ? queries.words[push.queries_word + (push.query_begin + q) * words + i % words]
              : 0u;
    }
    barrier();
    const uint keep_full = min(k, FERRY_HAMMING_CHUNK_ROWS);
    for (uint g = gl_WorkGroupID.x; g < push.groups; g += gl_NumWorkGroups.x) {
      const uint row0 = g * FERRY_HAMMING_CHUNK_ROWS;
      const uint count = min(FERRY_HAMMING_CHUNK_ROWS, push.items - row0);
      uint acc[QT][ROWS_PER_INVOCATION];
      for (uint i = 0u; i < ROWS_PER_INVOCATION; ++i) {
        for (uint j = 0u; j < QT; ++j) acc[j][i] = 0u;
        const uint local = i * WG + t;
        if (local < count) {
          const uint base = push.database_word + (row0 + local) * words;
          for (uint w = 0u; w < words; ++w) {
            const uint x = database.words[base + w];
            for (uint j = 0u; j < QT; ++j) acc[j][i] += uint(bitCount(x ^ s_query[j * MAX_WORDS + w]));
          }
        }
      }
      for (uint j = 0u; j < QT; ++j) {
        if (tile + j >= push.query_count) break;  // uniform: the tile is the workgroup's
        for (uint i = 0u; i < ITEMS_PER_INVOCATION; ++i) {
          const bool mine = i < ROWS_PER_INVOCATION && i * WG + t < count;
          g_dist[i] = mine ? acc[j][min(i, ROWS_PER_INVOCATION - 1u)] : NONE;
        }
        const uint q = tile + j;
        select_and_write(count, min(k, count), q, row0, 0u,
                         push.out_base + q * push.out_stride + g * keep_full);
      }
    }
  } else {
    const uint q = gl_WorkGroupID.y;
    const uint keep_full = min(k, FERRY_HAMMING_MERGE_GROUP);
    for (uint g = gl_WorkGroupID.x; g < push.groups; g += gl_NumWorkGroups.x) {
      const uint first = g * FERRY_HAMMING_MERGE_GROUP;
      const uint count = min(FERRY_HAMMING_MERGE_GROUP, push.items - first);
      const uint in_at = push.in_base + q * push.in_stride + first;
      for (uint i = 0u; i < ITEMS_PER_INVOCATION; ++i) {
        const uint local = i * WG + t;
        g_dist[i] = local < count ? scratch.words[push.scratch_word + 2u * (in_at + local)] : NONE;
      }
      select_and_write(count, min(k, count), q, 0u, in_at,
                       push.out_base + q * push.out_stride + g * keep_full);
    }
  }
}
