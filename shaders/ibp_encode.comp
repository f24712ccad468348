// ibp_encode (ferry/ops/ibp_encode.hpp): a tensor to its IBP stream (docs/IBP_FORMAT.md), the
// same bytes as ferry::ibp::encode. One pass per dispatch (push.pass; the passes are listed in
// ibp_encode_abi.h and described in runtime/src/ops/ibp_encode.hpp); the host records them in
// order with a barrier between two.
//
// Elements are read as the 32-bit words they lie in and held as uvec2 (low, high word), so the
// shader needs no 8-, 16- or 64-bit feature. Integer code only.
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "ibp_encode_abi.h"

layout(local_size_x = FERRY_IBP_WORKGROUP_SIZE) in;

layout(std430, set = 0, binding = 0) restrict readonly buffer Input {
  uint words[];
} src;
layout(std430, set = 0, binding = 1) restrict buffer Stream {
  uint words[];
} dst;
layout(std430, set = 0, binding = 2) restrict buffer Scratch {
  uint words[];
} scr;

const uint kGroup = FERRY_IBP_WORKGROUP_SIZE;
const uint kMaxWords = 64u * kGroup / 32u + 2u;  // a chunk's fields and the carried word
// One shared array for every pass: the kmax histograms (kGroup x 17 words), or the rows' words,
// the bitmap and the scan, or the CRC table and the lanes' CRCs.
const uint kHistWords = 17u;
shared uint sh[kGroup * kHistWords];
const uint kScan = 0u;                // 2 x kGroup: the scan's two buffers
const uint kTable = 2u * kGroup;      // kGroup: the CRC table
const uint kBitmap = 3u * kGroup;     // 8: a chunk's bitmap words
const uint kWords = 3u * kGroup + 8u;  // kMaxWords: a chunk's packed words

const uint kX2n[32] = uint[32](FERRY_IBP_X2N_TABLE);

uint bits() { return push.element_size * 8u; }
uint record_words() { return 2u * bits() + 7u + bits() / 4u; }
uint record(uint batch_group, uint column) {
  return push.scratch_word + (batch_group * push.row_elements + column) * record_words();
}

uvec2 full_mask() {
  const uint w = bits();
  return w == 64u ? uvec2(0xffffffffu) : uvec2(w == 32u ? 0xffffffffu : (1u << w) - 1u, 0u);
}
uint bit_of(uvec2 v, uint b) { return b < 32u ? (v.x >> b) & 1u : (v.y >> (b - 32u)) & 1u; }
uint popcount2(uvec2 v) { return uint(bitCount(v.x) + bitCount(v.y)); }

// The element_size-byte value at byte `pos` of a window (pos a multiple of the size).
uvec2 load_input(uint pos) {
  const uint w = src.words[pos >> 2u];
  if (push.element_size == 8u) return uvec2(w, src.words[(pos >> 2u) + 1u]);
  if (push.element_size == 4u) return uvec2(w, 0u);
  const uint mask = push.element_size == 1u ? 0xffu : 0xffffu;
  return uvec2((w >> ((pos & 3u) * 8u)) & mask, 0u);
}
uvec2 load_stream(uint pos) {
  const uint word = push.stream_word + (pos >> 2u);
  const uint w = dst.words[word];
  if (push.element_size == 8u) return uvec2(w, dst.words[word + 1u]);
  if (push.element_size == 4u) return uvec2(w, 0u);
  const uint mask = push.element_size == 1u ? 0xffu : 0xffffu;
  return uvec2((w >> ((pos & 3u) * 8u)) & mask, 0u);
}
uvec2 element(uint row, uint column) {
  return load_input(push.input_byte + (row * push.row_elements + column) * push.element_size);
}

uint row_length(uint row) {
  const uint first = row * push.row_elements;
  return min(push.row_elements, push.elements - first);
}
// Elements of column c in group g's rows.
uint column_count(uint group, uint column) {
  const uint first = group * push.group_rows;
  const uint end = min(push.rows, first + min(push.group_rows, push.rows - first));
  uint n = end - first;
  if (end == push.rows && column >= row_length(push.rows - 1u)) n -= 1u;
  return n;
}

// ---- column statistics -------------------------------------------------------------------

uint slices_per_group() { return (push.group_rows + FERRY_IBP_SLICE_ROWS - 1u) / FERRY_IBP_SLICE_ROWS; }

// Item i of the count and histogram passes: (batch group, row slice, column).
void slice_of(uint i, out uint batch_group, out uint first_row, out uint end_row, out uint column) {
  column = i % push.row_elements;
  const uint rest = i / push.row_elements;
  const uint slices = slices_per_group();
  batch_group = rest / slices;
  const uint group = push.batch_first + batch_group;
  const uint group_end = min(push.rows, group * push.group_rows + min(push.group_rows, push.rows - group * push.group_rows));
  first_row = group * push.group_rows + (rest % slices) * FERRY_IBP_SLICE_ROWS;
  end_row = min(group_end, first_row + FERRY_IBP_SLICE_ROWS);
}

void count_pass(uint i) {
  uint batch_group, first_row, end_row, column;
  slice_of(i, batch_group, first_row, end_row, column);
  // Bit-sliced counters: counter k holds bit k of every bit position's count (at most 255).
  uvec2 counter[8];
  [[unroll]] for (uint k = 0u; k < 8u; ++k) counter[k] = uvec2(0u);
  for (uint row = first_row; row < end_row; ++row) {
    if (column >= row_length(row)) continue;
    uvec2 carry = element(row, column);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uvec2 next = counter[k] & carry;
      counter[k] ^= carry;
      carry = next;
    }
  }
  const uint base = record(batch_group, column);
  for (uint b = 0u; b < bits(); ++b) {
    uint ones = 0u;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) ones |= bit_of(counter[k], b) << k;
    if (ones != 0u) atomicAdd(scr.words[base + b], ones);
  }
}

uint agreement(uint ones, uint n) { return max(ones, n - ones); }

void order_pass(uint i) {
  const uint batch_group = i / push.row_elements, column = i % push.row_elements;
  const uint n = column_count(push.batch_first + batch_group, column);
  const uint base = record(batch_group, column);
  uvec2 majority = uvec2(0u);
  for (uint b = 0u; b < bits(); ++b) {
    if (2u * scr.words[base + b] > n) {
      if (b < 32u) majority.x |= 1u << b; else majority.y |= 1u << (b - 32u);
    }
  }
  scr.words[base + 2u * bits() + 1u] = majority.x;
  scr.words[base + 2u * bits() + 2u] = majority.y;
  // Rank of bit b: the bits ordered before it (more agreement, or as much at a higher position).
  for (uint q = 0u; q < bits() / 4u; ++q) {
    uint packed = 0u;
    for (uint j = 0u; j < 4u; ++j) {
      const uint b = 4u * q + j;
      const uint a = agreement(scr.words[base + b], n);
      uint rank = 0u;
      for (uint other = 0u; other < bits(); ++other) {
        const uint a2 = agreement(scr.words[base + other], n);
        if (a2 > a || (a2 == a && other > b)) ++rank;
      }
      packed |= rank << (8u * j);
    }
    scr.words[base + 2u * bits() + 7u + q] = packed;
  }
}

uint rank_of(uint base, uint b) {
  return (scr.words[base + 2u * bits() + 7u + b / 4u] >> (8u * (b % 4u))) & 0xffu;
}

void hist_pass(uint i) {
  uint batch_group, first_row, end_row, column;
  slice_of(i, batch_group, first_row, end_row, column);
  const uint base = record(batch_group, column);
  const uvec2 majority = uvec2(scr.words[base + 2u * bits() + 1u], scr.words[base + 2u * bits() + 2u]);
  // This invocation's own counts (at most 255 each: a byte) in shared memory.
  const uint mine = gl_LocalInvocationID.x * kHistWords;
  for (uint k = 0u; k < kHistWords; ++k) sh[mine + k] = 0u;
  for (uint row = first_row; row < end_row; ++row) {
    if (column >= row_length(row)) continue;
    uvec2 differ = element(row, column) ^ majority;
    // kmax: the rank of the first bit of the order the element disagrees with (W: none).
    uint kmax = bits();
    while (differ.x != 0u) {
      kmax = min(kmax, rank_of(base, uint(findLSB(differ.x))));
      differ.x &= differ.x - 1u;
    }
    while (differ.y != 0u) {
      kmax = min(kmax, rank_of(base, 32u + uint(findLSB(differ.y))));
      differ.y &= differ.y - 1u;
    }
    sh[mine + kmax / 4u] += 1u << (8u * (kmax % 4u));
  }
  for (uint k = 0u; k <= bits(); ++k) {
    const uint count = (sh[mine + k / 4u] >> (8u * (k % 4u))) & 0xffu;
    if (count != 0u) atomicAdd(scr.words[base + bits() + k], count);
  }
}

void choose_pass(uint i) {
  const uint batch_group = i / push.row_elements, column = i % push.row_elements;
  const uint base = record(batch_group, column);
  // m_k = elements whose kmax >= k; keep the largest k x m_k, equal products the smallest k.
  uint m = 0u, best_k = 0u, best_hi = 0u, best_lo = 0u;
  for (uint step = 0u; step <= bits(); ++step) {
    const uint k = bits() - step;
    m += scr.words[base + bits() + k];
    uint hi, lo;
    umulExtended(k, m, hi, lo);
    if (hi > best_hi || (hi == best_hi && lo >= best_lo)) {
      best_k = k;
      best_hi = hi;
      best_lo = lo;
    }
  }
  uvec2 mask = uvec2(0u);
  for (uint b = 0u; b < bits(); ++b) {
    if (rank_of(base, b) < best_k) {
      if (b < 32u) mask.x |= 1u << b; else mask.y |= 1u << (b - 32u);
    }
  }
  const uvec2 majority = uvec2(scr.words[base + 2u * bits() + 1u], scr.words[base + 2u * bits() + 2u]);
  scr.words[base + 2u * bits() + 3u] = mask.x;
  scr.words[base + 2u * bits() + 4u] = mask.y;
  scr.words[base + 2u * bits() + 5u] = majority.x & mask.x;
  scr.words[base + 2u * bits() + 6u] = majority.y & mask.y;
}

uint byte_of(uvec2 v, uint k) { return ((k < 4u ? v.x : v.y) >> (8u * (k % 4u))) & 0xffu; }

void masks_pass(uint i) {
  const uint block_words = push.mask_block_bytes / 4u;
  const uint batch_group = i / block_words, word = i % block_words;
  const uint es = push.element_size, half_bytes = push.row_elements * es;
  uint out_word = 0u;
  for (uint j = 0u; j < 4u; ++j) {
    const uint pos = 4u * word + j;
    uint byte = 0u;
    if (pos < 2u * half_bytes) {
      const uint at = pos < half_bytes ? pos : pos - half_bytes;
      const uint field = pos < half_bytes ? 3u : 5u;  // mask or value
      const uint base = record(batch_group, at / es) + 2u * bits() + field;
      byte = byte_of(uvec2(scr.words[base], scr.words[base + 1u]), at % es);
    }
    out_word |= byte << (8u * j);
  }
  const uint group = push.batch_first + batch_group;
  dst.words[push.stream_word + (push.masks_offset + group * push.mask_block_bytes) / 4u + word] = out_word;
}

// ---- rows ----------------------------------------------------------------------------------

uvec2 group_mask(uint group, uint column) {
  return load_stream(push.masks_offset + group * push.mask_block_bytes + column * push.element_size);
}
uvec2 group_value(uint group, uint column) {
  return load_stream(push.masks_offset + group * push.mask_block_bytes +
                     (push.row_elements + column) * push.element_size);
}

// Workgroup sum of three values (shared kScan .. kScan + 3 x kGroup). Uniform control flow.
uvec3 workgroup_sum3(uvec3 v) {
  const uint t = gl_LocalInvocationID.x;
  barrier();
  sh[t] = v.x;
  sh[kGroup + t] = v.y;
  sh[2u * kGroup + t] = v.z;
  barrier();
  for (uint s = kGroup / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      sh[t] += sh[t + s];
      sh[kGroup + t] += sh[kGroup + t + s];
      sh[2u * kGroup + t] += sh[2u * kGroup + t + s];
    }
    barrier();
  }
  const uvec3 total = uvec3(sh[0], sh[kGroup], sh[2u * kGroup]);
  barrier();
  return total;
}

void lengths_pass(uint row) {
  const uint t = gl_LocalInvocationID.x;
  const uint group = row / push.group_rows, n = row_length(row);
  uint unmatched = 0u, bits_bitmap = 0u, bits_matched = 0u;
  for (uint c = t; c < n; c += kGroup) {
    const uvec2 x = element(row, c), mask = group_mask(group, c);
    const uint variable = bits() - popcount2(mask);
    bits_matched += variable;
    if ((x & mask) == group_value(group, c)) {
      bits_bitmap += variable;
    } else {
      ++unmatched;
      bits_bitmap += bits();
    }
  }
  const uvec3 sums = workgroup_sum3(uvec3(unmatched, bits_bitmap, bits_matched));
  if (t != 0u) return;
  uint entry;
  if (sums.x == 0u) {
    entry = (sums.z + 31u) / 32u * 4u | 1u;
  } else {
    const uint bitmap_size = (n + 31u) / 32u * 4u + (sums.y + 31u) / 32u * 4u;
    const uint raw_size = (n * push.element_size + 3u) / 4u * 4u;
    entry = bitmap_size < raw_size ? bitmap_size : (raw_size | 2u);
  }
  dst.words[push.stream_word + push.row_table_offset / 4u + row] = entry;
}

// Exclusive scan of one value per invocation over the workgroup; total in `total`. Uniform.
uint workgroup_scan(uint v, out uint total) {
  const uint t = gl_LocalInvocationID.x;
  barrier();
  uint from = kScan, to = kScan + kGroup;
  sh[from + t] = v;
  barrier();
  for (uint s = 1u; s < kGroup; s <<= 1u) {
    sh[to + t] = sh[from + t] + (t >= s ? sh[from + t - s] : 0u);
    barrier();
    const uint swap = from;
    from = to;
    to = swap;
  }
  total = sh[from + kGroup - 1u];
  const uint inclusive = sh[from + t];
  barrier();
  return inclusive - v;
}

// The scan's items: row lengths (level 0) or sums in scratch.
uint scan_item(uint level_word, uint i) {
  return level_word == 0xffffffffu ? dst.words[push.stream_word + push.row_table_offset / 4u + i] & ~3u
                                   : scr.words[level_word + 2u * i];
}

void reduce_pass(uint block) {
  const uint first = block * FERRY_IBP_SCAN_BLOCK + 4u * gl_LocalInvocationID.x;
  uint sum = 0u;
  for (uint j = 0u; j < 4u; ++j) {
    if (first + j < push.items) sum += scan_item(push.level_word, first + j);
  }
  const uvec3 total = workgroup_sum3(uvec3(sum, 0u, 0u));
  if (gl_LocalInvocationID.x == 0u) {
    scr.words[push.above_word + 2u * block] = total.x;
    scr.words[push.above_word + 2u * block + 1u] = 0u;
  }
}

// Exclusive prefixes of a block's four items per invocation, from `base`.
uvec4 block_prefixes(uint block, uint base, out uvec4 items) {
  const uint first = block * FERRY_IBP_SCAN_BLOCK + 4u * gl_LocalInvocationID.x;
  for (uint j = 0u; j < 4u; ++j) items[j] = first + j < push.items ? scan_item(push.level_word, first + j) : 0u;
  uint total;
  const uint before = workgroup_scan(items.x + items.y + items.z + items.w, total);
  const uint p0 = base + before;
  return uvec4(p0, p0 + items.x, p0 + items.x + items.y, p0 + items.x + items.y + items.z);
}

void top_pass() {
  uvec4 items;
  const uvec4 prefix = block_prefixes(0u, 0u, items);
  const uint first = 4u * gl_LocalInvocationID.x;
  for (uint j = 0u; j < 4u; ++j) {
    if (first + j < push.items) scr.words[push.level_word + 2u * (first + j)] = prefix[j];
  }
  if (gl_LocalInvocationID.x == kGroup - 1u) {
    const uint data_bytes = prefix.w + items.w;
    scr.words[push.data_bytes_word] = data_bytes;
    scr.words[push.data_bytes_word + 1u] = 0u;
    const uint table = push.stream_word + 64u / 4u + 2u * push.group_count;
    dst.words[table] = data_bytes;
    dst.words[table + 1u] = 0u;
  }
}

void down_pass(uint block) {
  uvec4 items;
  const uvec4 prefix = block_prefixes(block, scr.words[push.above_word + 2u * block], items);
  const uint first = block * FERRY_IBP_SCAN_BLOCK + 4u * gl_LocalInvocationID.x;
  if (push.level_word == 0xffffffffu) {
    for (uint j = 0u; j < 4u; ++j) {
      const uint row = first + j;
      if (row >= push.items) continue;
      const uint table = push.stream_word + 64u / 4u + 2u * (row / push.group_rows);
      if (push.pass == FERRY_IBP_PASS_GROUPS) {
        if (row % push.group_rows == 0u) {
          dst.words[table] = prefix[j];
          dst.words[table + 1u] = 0u;
        }
      } else {
        const uint entry = push.stream_word + push.row_table_offset / 4u + row;
        dst.words[entry] = (prefix[j] - dst.words[table]) | (dst.words[entry] & 3u);
      }
    }
    if (push.pass == FERRY_IBP_PASS_OFFSETS && block == 0u && gl_LocalInvocationID.x == 0u &&
        push.rows % 2u == 1u) {
      dst.words[push.stream_word + push.row_table_offset / 4u + push.rows] = 0u;  // padding
    }
  } else {
    for (uint j = 0u; j < 4u; ++j) {
      if (first + j < push.items) scr.words[push.level_word + 2u * (first + j)] = prefix[j];
    }
  }
}

// The bits of pext(x, m): x's bits where m is set, packed from bit 0.
uint pext32(uint x, uint m) {
  uint result = 0u, k = 0u;
  while (m != 0u) {
    const uint b = uint(findLSB(m));
    result |= ((x >> b) & 1u) << k;
    ++k;
    m &= m - 1u;
  }
  return result;
}
uvec2 pext(uvec2 x, uvec2 m) {
  const uint low = pext32(x.x, m.x), high = pext32(x.y, m.y);
  const uint k = uint(bitCount(m.x));
  if (k == 0u) return uvec2(high, 0u);
  if (k == 32u) return uvec2(low, high);
  return uvec2(low | (high << k), high >> (32u - k));
}

// ORs a field of up to 64 bits (nothing above its length set) at bit `pos` of the chunk's words.
void place(uint pos, uvec2 v) {
  const uint w = kWords + (pos >> 5u), s = pos & 31u;
  if ((v.x << s) != 0u) atomicOr(sh[w], v.x << s);
  const uint second = s == 0u ? v.y : (v.x >> (32u - s)) | (v.y << s);
  const uint third = s == 0u ? 0u : v.y >> (32u - s);
  if (second != 0u) atomicOr(sh[w + 1u], second);
  if (third != 0u) atomicOr(sh[w + 2u], third);
}

void rows_pass(uint row) {
  const uint t = gl_LocalInvocationID.x;
  const uint group = row / push.group_rows, n = row_length(row);
  const uint entry = dst.words[push.stream_word + push.row_table_offset / 4u + row];
  const uint mode = entry & 3u;
  const uint start = push.stream_word +
                     (push.data_offset + dst.words[push.stream_word + 64u / 4u + 2u * group] +
                      (entry & ~3u)) / 4u;
  const uint bitmap_words = mode == 0u ? (n + 31u) / 32u : 0u;
  uint cursor = start + bitmap_words;  // the next word of fields
  uint carry = 0u, carry_bits = 0u;
  for (uint first = 0u; first < n; first += kGroup) {
    const uint c = first + t;
    uvec2 field = uvec2(0u);
    uint length = 0u;
    bool matched = false;
    if (c < n) {
      const uvec2 x = element(row, c);
      if (mode == 2u) {
        field = x;
        length = bits();
      } else {
        const uvec2 mask = group_mask(group, c);
        matched = (x & mask) == group_value(group, c);
        if (matched) {
          const uvec2 variable = ~mask & full_mask();
          field = pext(x, variable);
          length = popcount2(variable);
        } else {
          field = x;
          length = bits();
        }
      }
    }
    barrier();
    for (uint w = t; w < kMaxWords; w += kGroup) sh[kWords + w] = w == 0u ? carry : 0u;
    if (t < 8u) sh[kBitmap + t] = 0u;
    uint total;
    const uint offset = workgroup_scan(length, total);  // barriers: the clearing is seen
    if (length != 0u) place(carry_bits + offset, field);
    if (mode == 0u && matched) atomicOr(sh[kBitmap + t / 32u], 1u << (t % 32u));
    barrier();
    const uint end_bits = carry_bits + total, full = end_bits / 32u;
    for (uint w = t; w < full; w += kGroup) dst.words[cursor + w] = sh[kWords + w];
    if (mode == 0u && t < 8u && first / 32u + t < bitmap_words) {
      dst.words[start + first / 32u + t] = sh[kBitmap + t];
    }
    carry = sh[kWords + full];
    carry_bits = end_bits % 32u;
    cursor += full;
  }
  if (t == 0u && carry_bits != 0u) dst.words[cursor] = carry;
}

// ---- checksums ------------------------------------------------------------------------------

// a x b mod P (bit 31 is x^0), as zlib's multmodp.
uint multmodp(uint a, uint b) {
  uint m = 1u << 31u, p = 0u;
  for (uint i = 0u; i < 32u; ++i) {
    if ((a & m) != 0u) p ^= b;
    m >>= 1u;
    b = (b & 1u) != 0u ? (b >> 1u) ^ FERRY_IBP_CRC_POLY : b >> 1u;
  }
  return p;
}
// x^(8 n) mod P: the operator that moves a CRC past n bytes.
uint shift_bytes(uint n) {
  uint p = 1u << 31u, k = 3u;
  while (n != 0u) {
    if ((n & 1u) != 0u) p = multmodp(kX2n[k & 31u], p);
    n >>= 1u;
    ++k;
  }
  return p;
}

void make_crc_table() {
  const uint t = gl_LocalInvocationID.x;
  uint c = t;
  for (uint k = 0u; k < 8u; ++k) c = (c & 1u) != 0u ? (c >> 1u) ^ FERRY_IBP_CRC_POLY : c >> 1u;
  sh[kTable + t] = c;
  barrier();
}
uint crc_word(uint crc, uint word) {
  for (uint k = 0u; k < 4u; ++k) crc = sh[kTable + ((crc ^ (word >> (8u * k))) & 0xffu)] ^ (crc >> 8u);
  return crc;
}

// The CRC-32C of stream bytes [first, first + length) (multiples of 4), by the workgroup: the
// bytes are placed at the end of kGroup lanes of `lane` bytes each (leading zero bytes leave a
// CRC register of 0 unchanged), each lane's CRC is combined with the next by the shift operator.
uint workgroup_crc(uint first, uint length, uint lane) {
  const uint t = gl_LocalInvocationID.x;
  const uint lead = kGroup * lane - length;
  uint crc = 0u;
  for (uint v = t * lane; v < (t + 1u) * lane; v += 4u) {
    if (v >= lead) crc = crc_word(crc, dst.words[push.stream_word + (first + v - lead) / 4u]);
  }
  barrier();
  sh[kScan + t] = crc;
  barrier();
  for (uint s = 1u; s < kGroup; s <<= 1u) {
    if (t % (2u * s) == 0u) sh[kScan + t] = multmodp(sh[kScan + t], shift_bytes(s * lane)) ^ sh[kScan + t + s];
    barrier();
  }
  const uint raw = sh[kScan];
  barrier();
  return ~(multmodp(shift_bytes(length), 0xffffffffu) ^ raw);
}

uint payload_end() { return push.data_offset + scr.words[push.data_bytes_word]; }
uint chunk_count() { return (payload_end() - 64u + 65535u) / 65536u; }

void crc_pass(uint chunk) {
  const uint first = 64u + chunk * 65536u;
  const uint length = min(65536u, payload_end() - first);
  const uint crc = workgroup_crc(first, length, 65536u / kGroup);
  if (gl_LocalInvocationID.x == 0u) dst.words[push.stream_word + payload_end() / 4u + chunk] = crc;
}

void header_pass() {
  const uint count = chunk_count();
  const uint table_crc = workgroup_crc(payload_end(), 4u * count, 4u * ((count + kGroup - 1u) / kGroup));
  if (gl_LocalInvocationID.x != 0u) return;
  uint header[16];
  header[0] = 0x52524546u;  // "FERR"
  header[1] = 0x50424959u;  // "YIBP"
  header[2] = 1u | (push.element_size << 16u) | ((push.header >> 8u) << 24u);
  header[3] = push.header & 0xffu;
  header[4] = push.group_rows;
  header[5] = 0u;
  header[6] = push.rows;
  header[7] = 0u;
  header[8] = push.row_elements;
  header[9] = 0u;
  header[10] = push.elements;
  header[11] = 0u;
  header[12] = scr.words[push.data_bytes_word];
  header[13] = 0u;
  header[14] = table_crc;
  uint crc = 0xffffffffu;
  for (uint w = 0u; w < 15u; ++w) crc = crc_word(crc, header[w]);
  header[15] = ~crc;
  for (uint w = 0u; w < 16u; ++w) dst.words[push.stream_word + w] = header[w];
}

// ---- dispatch ----------------------------------------------------------------------------

void main() {
  const uint pass = push.pass;
  const uint stride = gl_NumWorkGroups.x * kGroup;
  if (pass == FERRY_IBP_PASS_CLEAR) {
    const uint words = push.batch_groups * push.row_elements * record_words();
    for (uint i = gl_GlobalInvocationID.x; i < words; i += stride) scr.words[push.scratch_word + i] = 0u;
  } else if (pass == FERRY_IBP_PASS_COUNT || pass == FERRY_IBP_PASS_HIST) {
    const uint items = push.batch_groups * slices_per_group() * push.row_elements;
    for (uint i = gl_GlobalInvocationID.x; i < items; i += stride) {
      if (pass == FERRY_IBP_PASS_COUNT) count_pass(i); else hist_pass(i);
    }
  } else if (pass == FERRY_IBP_PASS_ORDER || pass == FERRY_IBP_PASS_CHOOSE) {
    const uint items = push.batch_groups * push.row_elements;
    for (uint i = gl_GlobalInvocationID.x; i < items; i += stride) {
      if (pass == FERRY_IBP_PASS_ORDER) order_pass(i); else choose_pass(i);
    }
  } else if (pass == FERRY_IBP_PASS_MASKS) {
    const uint items = push.batch_groups * (push.mask_block_bytes / 4u);
    for (uint i = gl_GlobalInvocationID.x; i < items; i += stride) masks_pass(i);
  } else if (pass == FERRY_IBP_PASS_LENGTHS || pass == FERRY_IBP_PASS_ROWS) {
    for (uint row = gl_WorkGroupID.x; row < push.rows; row += gl_NumWorkGroups.x) {
      if (pass == FERRY_IBP_PASS_LENGTHS) lengths_pass(row); else rows_pass(row);
    }
  } else if (pass == FERRY_IBP_PASS_REDUCE || pass == FERRY_IBP_PASS_DOWN ||
             pass == FERRY_IBP_PASS_GROUPS || pass == FERRY_IBP_PASS_OFFSETS) {
    const uint blocks = (push.items + FERRY_IBP_SCAN_BLOCK - 1u) / FERRY_IBP_SCAN_BLOCK;
    for (uint block = gl_WorkGroupID.x; block < blocks; block += gl_NumWorkGroups.x) {
      if (pass == FERRY_IBP_PASS_REDUCE) reduce_pass(block); else down_pass(block);
    }
  } else if (pass == FERRY_IBP_PASS_TOP) {
    top_pass();
  } else if (pass == FERRY_IBP_PASS_CRC) {
    make_crc_table();
    for (uint chunk = gl_WorkGroupID.x; chunk < chunk_count(); chunk += gl_NumWorkGroups.x) crc_pass(chunk);
  } else if (pass == FERRY_IBP_PASS_HEADER) {
    make_crc_table();
    header_pass();
  }
}
