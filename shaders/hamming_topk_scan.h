// hamming_topk's level-0 selection, shared by the scan's two paths (hamming_topk.comp, XOR and
// bitCount; hamming_topk_coopmat.comp, cooperative matrices): whatever computes the distances,
// the keys, the buffers, their compaction and the span's runs are these, so both paths give the
// same results. The including shader defines WG, ROUND, NONE, POSITION_MASK, the specialization
// constant kTile, the bindings, the push constants and `shared uint s_pool[]` first.
#ifndef FERRY_SHADERS_HAMMING_TOPK_SCAN_H
#define FERRY_SHADERS_HAMMING_TOPK_SCAN_H

#define THRESHOLD(j) s_pool[FERRY_HAMMING_SCAN_THRESHOLDS + (j)]
#define COUNT(j) s_pool[FERRY_HAMMING_SCAN_COUNTS + (j)]
#define FLAGS(round) s_pool[FERRY_HAMMING_SCAN_FLAGS + (round) % 3u]
#define KTH(j) s_pool[FERRY_HAMMING_SCAN_KTH + (j)]
#define NEED(j) s_pool[FERRY_HAMMING_SCAN_NEED + (j)]
#define KEPT(j) s_pool[FERRY_HAMMING_SCAN_KEPT + (j)]
#define LIST(m) s_pool[FERRY_HAMMING_SCAN_LIST + (m)]
#define HIST(m, digit) s_pool[FERRY_HAMMING_SCAN_HISTOGRAMS + 16u * (m) + (digit)]
#define KEY(j, i) s_pool[FERRY_HAMMING_SCAN_KEYS + (j) * push.cap + (i)]
// A compaction holds an invocation's share of the selected buffers in registers.
#define HELD_PER_INVOCATION ((FERRY_HAMMING_POOL_WORDS - FERRY_HAMMING_SCAN_KEYS + WG - 1) / WG)

// Keeps the `keep` smallest keys of each query j in `selected` (a mask the same in every
// invocation; COUNT(j) > keep, keys distinct) in its buffer, unordered, with COUNT(j) = keep and
// KTH(j) = the keep-th smallest. All the selected queries at once: their keys are spread over
// the workgroup, and the k-th key of each is found 4 bits at a time (a 16-bin histogram per
// query). The whole workgroup, in uniform control flow, after a barrier that made the buffers
// and counts visible; ends with one. (lavapipe ends an invocation's loops after 65535 iterations
// in all, so this takes few: about 8 x (16 + 2 x the selected keys / 256).)
void keep_smallest(uint selected, uint keep) {
  const uint t = gl_LocalInvocationID.x;
  const uint queries = uint(bitCount(selected));
  const uint cap = push.cap, items = queries * cap;
  if (t < kTile && ((selected >> t) & 1u) != 0u) {
    LIST(uint(bitCount(selected & ((1u << t) - 1u)))) = t;
    KTH(t) = 0u;
    NEED(t) = keep;
    KEPT(t) = 0u;
  }
  for (int shift = 28; shift >= 0; shift -= 4) {
    for (uint b = t; b < 16u * queries; b += WG) HIST(b >> 4, b & 15u) = 0u;
    barrier();
    const uint high = shift == 28 ? 0u : ~0u << uint(shift + 4);
    for (uint e = t; e < items; e += WG) {
      const uint m = e / cap, i = e - m * cap, j = LIST(m);
      if (i < COUNT(j)) {
        const uint key = KEY(j, i);
        if ((key & high) == KTH(j)) atomicAdd(HIST(m, (key >> uint(shift)) & 15u), 1u);
      }
    }
    barrier();
    // The digit of the rank-`need` key among those sharing the bits found so far.
    if (t < queries) {
      const uint j = LIST(t);
      uint need = NEED(j), digit = 0u;
      while (HIST(t, digit) < need) need -= HIST(t, digit++);
      KTH(j) |= digit << uint(shift);
      NEED(j) = need;
    }
    barrier();
  }
  // Exactly `keep` keys of each buffer are <= its KTH. Every key is read before any is moved.
  uint held[HELD_PER_INVOCATION];
  for (uint h = 0u; h < HELD_PER_INVOCATION; ++h) {
    const uint e = t + h * WG;
    held[h] = NONE;
    if (e < items) {
      const uint m = e / cap, i = e - m * cap, j = LIST(m);
      if (i < COUNT(j)) held[h] = KEY(j, i);
    }
  }
  barrier();
  for (uint h = 0u; h < HELD_PER_INVOCATION; ++h) {
    if (held[h] != NONE) {
      const uint j = LIST((t + h * WG) / cap);
      if (held[h] <= KTH(j)) KEY(j, atomicAdd(KEPT(j), 1u)) = held[h];
    }
  }
  if (t < queries) COUNT(LIST(t)) = keep;
  barrier();
}

// Before a span: no keys; queries past the slice never take one (threshold 0). With bounds, a
// query's threshold starts as a key of distance bound + 1, so that rows up to the bound enter.
// Uniform control flow; ends with a barrier.
void scan_span_begin(uint tile, uint tile_queries) {
  const uint t = gl_LocalInvocationID.x;
  const bool bounded = (push.flags & FERRY_HAMMING_BOUNDED) != 0u;
  for (uint j = t; j < kTile; j += WG) {
    COUNT(j) = 0u;
    uint start = 0u;
    if (j < tile_queries) {
      start = NONE;
      if (bounded) {
        const uint at = push.bound_base + (tile + j) * push.k + push.k - 1u;
        start = (scratch.words[push.scratch_word + 2u * at] + 1u) << FERRY_HAMMING_POSITION_BITS;
      }
    }
    THRESHOLD(j) = start;
  }
  if (t == 0u) {
    FLAGS(0u) = 0u;
    FLAGS(1u) = 0u;
    FLAGS(2u) = 0u;
  }
  barrier();
}

// The key of a row nearer than query j's threshold distance enters its buffer. Rare once the
// thresholds settle. A round adds at most ROUND keys to a buffer; the add that takes it past
// cap - ROUND flags it for compaction.
void scan_insert(uint j, uint dist, uint position, uint round) {
  const uint slot = atomicAdd(COUNT(j), 1u);
  KEY(j, slot) = (dist << FERRY_HAMMING_POSITION_BITS) | position;
  if (slot == push.cap - ROUND) atomicOr(FLAGS(round), 1u << j);
}

// After a round's barrier: compacts the flagged buffers and lowers their thresholds. Returns
// whether it did (then THRESHOLD changed, behind a barrier). Uniform control flow.
bool scan_round_end(uint round) {
  const uint t = gl_LocalInvocationID.x;
  // The flags of this round are read by all before the next barrier; those of round + 2 were
  // read before this one and are next set after the next one.
  const uint flagged = FLAGS(round);
  if (t == 0u) FLAGS(round + 2u) = 0u;
  if (flagged == 0u) return false;  // uniform: every invocation read the same word
  keep_smallest(flagged, push.k);
  if (t < kTile && ((flagged >> t) & 1u) != 0u) THRESHOLD(t) = KTH(t);
  barrier();
  return true;
}

// At a span's end: its run per query written (as outputs in the final pass, else as candidates).
// Uniform control flow; ends with a barrier.
void scan_span_end(uint span, uint span_begin, uint span_rows, uint tile, uint tile_queries) {
  const uint t = gl_LocalInvocationID.x;
  const uint k = push.k;
  // The span's run per query: its min(k, rows) smallest keys, sorted; with bounds a buffer may
  // hold fewer (rows past the bound never entered), and the rest of the run is padding.
  const uint keep = min(k, span_rows);
  uint over = 0u;
  for (uint j = 0u; j < tile_queries; ++j) over |= COUNT(j) > keep ? 1u << j : 0u;
  if (over != 0u) keep_smallest(over, keep);
  // Bitonic sort of every buffer at once, each padded to a power of two with NONE (cap holds
  // it).
  const uint size_bits = uint(findMSB(keep)) + (bitCount(keep) == 1 ? 0u : 1u);
  const uint size = 1u << size_bits;
  for (uint e = t; e < tile_queries << size_bits; e += WG) {
    const uint i = e & (size - 1u);
    if (i >= min(keep, COUNT(e >> size_bits))) KEY(e >> size_bits, i) = NONE;
  }
  barrier();
  for (uint block = 2u; block <= size; block <<= 1) {
    for (uint stride = block >> 1; stride > 0u; stride >>= 1) {
      for (uint e = t; e < tile_queries << (size_bits - 1u); e += WG) {
        const uint j = e >> (size_bits - 1u), i = e & ((size >> 1) - 1u);
        const uint a = 2u * i - (i & (stride - 1u)), b = a + stride;
        const uint ka = KEY(j, a), kb = KEY(j, b);
        if ((ka > kb) == ((a & block) == 0u)) {
          KEY(j, a) = kb;
          KEY(j, b) = ka;
        }
      }
      barrier();
    }
  }
  const bool final = (push.flags & FERRY_HAMMING_FINAL) != 0u;
  const uint written = final ? k : keep;
  for (uint e = t; e < tile_queries * written; e += WG) {
    const uint j = e / written, i = e % written, q = tile + j;
    uint d = NONE, index = NONE;
    const uint key = i < keep ? KEY(j, i) : NONE;
    if (key != NONE) {  // a real key is below NONE: distance <= 4096 takes 13 bits
      d = key >> FERRY_HAMMING_POSITION_BITS;
      index = span_begin + (key & POSITION_MASK);
    }
    if (final) {
      const uint at = (push.query_begin + q) * k + i;
      distances.words[push.distances_word + at] = d;
      indices.words[push.indices_word + at] = index;
    } else {
      const uint at = push.out_base + q * push.out_stride + span * min(k, push.group_items) + i;
      scratch.words[push.scratch_word + 2u * at] = d;
      scratch.words[push.scratch_word + 2u * at + 1u] = index;
    }
  }
  barrier();  // the buffers are reset for the next span
}

#endif  // FERRY_SHADERS_HAMMING_TOPK_SCAN_H
