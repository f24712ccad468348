// rescore (ferry/ops/rescore.hpp), the algorithm of runtime/src/ops/rescore.hpp: a workgroup per
// query, its candidates ranked in rounds through FERRY_RESCORE_SLOTS slots of
// (score key, row index) pairs in shared memory, sorted by a bitonic sort; duplicates dropped;
// the first k written with padding.
//
// float32 scores are fma chains in dimension order (rescore_score.h): on a device whose fma() is
// known to be fused, the hardware fma, checked, with an integer fallback wherever a flushing
// device could differ from IEEE, so that the result does not depend on the denormal mode; on any
// other device the integer fma for every step. Vectors are read as 32-bit words (an int8 element is
// a byte of its word), so the shader needs no 8-bit storage; shaderInt64 is for the integer fma.
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

#include "rescore_abi.h"

#define WG FERRY_RESCORE_WORKGROUP_SIZE
#define SLOTS FERRY_RESCORE_SLOTS
#define NONE 0xFFFFFFFFu

layout(local_size_x = WG) in;

// Whether the device's fma() is fused (the host knows it by driver): else the integer fma.
layout(constant_id = FERRY_RESCORE_HARDWARE_FMA_ID) const bool kHardwareFma = false;
#define FERRY_RESCORE_HARDWARE_FMA kHardwareFma
#include "rescore_score.h"

layout(std430, set = 0, binding = 0) restrict readonly buffer Queries { uint words[]; } queries;
layout(std430, set = 0, binding = 1) restrict readonly buffer Database { uint words[]; } database;
layout(std430, set = 0, binding = 2) restrict readonly buffer Candidates { uint words[]; }
    candidates;
layout(std430, set = 0, binding = 3) restrict writeonly buffer Scores { uint words[]; } scores;
layout(std430, set = 0, binding = 4) restrict writeonly buffer Indices { uint words[]; } indices;

// (score key, row index); (NONE, NONE) is a skipped entry, sorting after every real one.
shared uvec2 s_keys[SLOTS];

// One dimension of the score: the next s from query element q and database element x (bits).
uint float_step(uint q, uint x, bool l2, uint s) {
  const uint e = l2 ? ferry_rescore_sub_step(q, x) : 0u;
  return ferry_rescore_fma_step(l2 ? e : q, l2 ? e : x, s);
}
int int8_term(uint query_byte, uint row_byte, uint j, bool l2) {
  const uint qb = query_byte + j, xb = row_byte + j;
  const int q = bitfieldExtract(int(queries.words[qb >> 2]), int((qb & 3u) * 8u), 8);
  const int x = bitfieldExtract(int(database.words[xb >> 2]), int((xb & 3u) * 8u), 8);
  return l2 ? (q - x) * (q - x) : q * x;
}

// The score bits of the query (its first byte in the queries window) against database row `row`.
// The loops take FERRY_RESCORE_FLOAT_UNROLL or FERRY_RESCORE_INT8_UNROLL dimensions per
// iteration (lavapipe ends an invocation's loops after 65535 iterations in all:
// ops::rescore_loop_iterations in runtime/src/ops/rescore.hpp).
#if FERRY_RESCORE_FLOAT_UNROLL != 2 || FERRY_RESCORE_INT8_UNROLL != 8
#error "score_of's loop bodies are written for 2 float32 and 8 int8 dimensions per iteration"
#endif
uint score_of(uint query_byte, uint row) {
  const uint row_byte = push.database_byte + row * push.database_pitch;
  const bool l2 = (push.flags & FERRY_RESCORE_L2) != 0u;
  const uint dims = push.dims;
  if ((push.flags & FERRY_RESCORE_INT8) != 0u) {
    int s = 0;
    for (uint j = 0u; j < dims; j += FERRY_RESCORE_INT8_UNROLL) {
      s += int8_term(query_byte, row_byte, j, l2);  // the sums are exact: any order will do
      if (j + 1u < dims) s += int8_term(query_byte, row_byte, j + 1u, l2);
      if (j + 2u < dims) s += int8_term(query_byte, row_byte, j + 2u, l2);
      if (j + 3u < dims) s += int8_term(query_byte, row_byte, j + 3u, l2);
      if (j + 4u < dims) s += int8_term(query_byte, row_byte, j + 4u, l2);
      if (j + 5u < dims) s += int8_term(query_byte, row_byte, j + 5u, l2);
      if (j + 6u < dims) s += int8_term(query_byte, row_byte, j + 6u, l2);
      if (j + 7u < dims) s += int8_term(query_byte, row_byte, j + 7u, l2);
    }
    return uint(s);
  }
  const uint query_word = query_byte >> 2, row_word = row_byte >> 2;
  uint s = 0u;  // +0.0f
  // A NaN stays NaN (and the steps make every NaN this one): the chain may stop there.
  for (uint j = 0u; j < dims && s != FERRY_RESCORE_NAN_BITS; j += FERRY_RESCORE_FLOAT_UNROLL) {
    s = float_step(queries.words[query_word + j], database.words[row_word + j], l2, s);
    if (j + 1u < dims) {
      s = float_step(queries.words[query_word + j + 1u], database.words[row_word + j + 1u], l2, s);
    }
  }
  return s;
}

bool after(uvec2 a, uvec2 b) { return a.x > b.x || (a.x == b.x && a.y > b.y); }

// Sorts s_keys[0, size) ascending; size a power of two. Uniform control flow.
void sort_slots(uint size) {
  const uint t = gl_LocalInvocationID.x;
  for (uint block = 2u; block <= size; block <<= 1) {
    for (uint stride = block >> 1; stride > 0u; stride >>= 1) {
      for (uint i = t; i < size / 2u; i += WG) {
        const uint a = (i / stride) * 2u * stride + (i % stride), b = a + stride;
        const uvec2 ka = s_keys[a], kb = s_keys[b];
        if (after(ka, kb) == ((a & block) == 0u)) {
          s_keys[a] = kb;
          s_keys[b] = ka;
        }
      }
      barrier();
    }
  }
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const bool is_float = (push.flags & FERRY_RESCORE_INT8) == 0u;
  const bool larger_better = (push.flags & FERRY_RESCORE_L2) == 0u;
  // One query per workgroup (a 2D grid: lavapipe's loop budget is per workgroup).
  const uint q = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (q >= push.queries) return;  // uniform: the whole workgroup
  const uint query_byte = push.queries_byte + q * push.query_pitch;
  const uint first_candidate = push.candidates_word + q * push.candidates;
  uint kept = 0u, next = 0u;
  for (;;) {  // rounds; uniform: every invocation computes the same kept and next
    const uint fresh = min(SLOTS - kept, push.candidates - next);
    const uint filled = kept + fresh;
    uint size = 1u;
    while (size < filled) size <<= 1;
    for (uint slot = kept + t; slot < size; slot += WG) {
      uvec2 key = uvec2(NONE, NONE);
      if (slot < filled) {
        const uint row = candidates.words[first_candidate + next + slot - kept];
        if (row < push.rows) {
          key = uvec2(ferry_rescore_key(score_of(query_byte, row), is_float, larger_better), row);
        }
      }
      s_keys[slot] = key;
    }
    next += fresh;
    barrier();
    sort_slots(size);
    // Duplicates (the same pair as the slot before) become skipped entries, then sort last.
    uint duplicates = 0u;  // bit i: slot t + i * WG
    for (uint slot = t, i = 0u; slot < size; slot += WG, ++i) {
      if (slot > 0u && s_keys[slot].y != NONE && s_keys[slot] == s_keys[slot - 1u]) {
        duplicates |= 1u << i;
      }
    }
    barrier();
    for (uint slot = t, i = 0u; slot < size; slot += WG, ++i) {
      if ((duplicates & (1u << i)) != 0u) s_keys[slot] = uvec2(NONE, NONE);
    }
    barrier();
    sort_slots(size);
    // kept: the real entries (before the first skipped one), at most k.
    uint low = 0u, high = size;
    while (low < high) {
      const uint middle = (low + high) / 2u;
      if (s_keys[middle].y != NONE) low = middle + 1u; else high = middle;
    }
    kept = min(push.k, low);
    barrier();  // every invocation has read the slots before the next round refills them
    if (next >= push.candidates) break;
  }
  for (uint i = t; i < push.k; i += WG) {
    uint score = NONE, row = NONE;
    if (i < kept) {
      const uvec2 key = s_keys[i];
      row = key.y;
      score = ferry_rescore_key_score(key.x, is_float, larger_better);
      // A zero's key does not say its sign: a -0.0 score is recomputed for it (rare).
      if (is_float && score == 0u) score = score_of(query_byte, row);
    }
    scores.words[push.scores_word + q * push.k + i] = score;
    indices.words[push.indices_word + q * push.k + i] = row;
  }
}
