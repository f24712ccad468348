// ibp_decode (ferry/ops/ibp_decode.hpp) over the items of one dispatch: rows of an IBP stream
// (docs/IBP_FORMAT.md) back into their elements. The algorithm is runtime/src/ops/ibp_decode.hpp's.
//
// A workgroup of 32 invocations takes an item at a time (a grid stride apart), so every barrier
// is in the workgroup's uniform control flow: the values that steer it (the row's table entries,
// its mode, its length) are read alike by every invocation. Scans go through shared memory: a
// subgroup is not 32 invocations everywhere.
//
// 64-bit elements and table entries are uvec2 (low, high): the shader needs no shaderInt64.
// An invocation decodes a word's worth of narrow elements per chunk and stores them as one word;
// the words an item shares with its neighbours (or with bytes outside the output) are stored
// with atomics on their own bytes only, so no byte outside an item's output is ever changed.
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "ibp_decode_abi.h"

layout(local_size_x = FERRY_IBP_DECODE_WORKGROUP_SIZE) in;

layout(std430, set = 0, binding = 0) restrict readonly buffer Stream {
  uint words[];
} src;
layout(std430, set = 0, binding = 1) restrict buffer Output {
  uint words[];
} dst;
layout(std430, set = 0, binding = 2) restrict buffer Status {
  uint words[];
} status;
// Without a gather the host binds the stream window here; it is never read then.
layout(std430, set = 0, binding = 3) restrict readonly buffer Indices {
  uint words[];
} indices;
// The group table, masks and row table: the stream window again, or a device copy of the
// stream's bytes before its row data (a stream in host memory).
layout(std430, set = 0, binding = 4) restrict readonly buffer Tables {
  uint words[];
} tables;

const uint kCorrupt = 1u;           // kIbpStatusCorrupt
const uint kIndexOutOfRange = 2u;   // kIbpStatusIndexOutOfRange

shared uint scan[2][32];

uint lane;

// Inclusive sum over the workgroup of `value`; `total` gets the sum of all.
uint inclusive_sum(uint value, out uint total) {
  scan[0][lane] = value;
  barrier();
  uint from = 0u;
  [[unroll]] for (uint step = 1u; step < 32u; step <<= 1u) {
    const uint sum = scan[from][lane] + (lane >= step ? scan[from][lane - step] : 0u);
    scan[from ^ 1u][lane] = sum;
    barrier();
    from ^= 1u;
  }
  total = scan[from][31];
  return scan[from][lane];
}

// Row table entry i: from the tables window, or in place in the stream's (a gather of few rows).
uint row_table_entry(uint i) {
  return (push.flags & FERRY_IBP_DECODE_ROW_TABLE_IN_STREAM) != 0u
             ? src.words[push.row_table_word + i]
             : tables.words[push.row_table_word + i];
}

// The low `bits` bits set (bits <= 32).
uint low_bits(uint bits) { return bits >= 32u ? 0xffffffffu : (1u << bits) - 1u; }

// `value` shifted right by `shift` (0 .. 32) as a 64-bit integer.
uvec2 shift_right(uvec2 value, uint shift) {
  if (shift == 0u) return value;
  if (shift >= 32u) return uvec2(value.y, 0u);
  return uvec2((value.x >> shift) | (value.y << (32u - shift)), value.y >> shift);
}

// pdep: the low bits of `source` deposited, lowest first, into the set bits of `free`, a run of
// set bits at a time (the masks leave few runs).
uint deposit(uint source, uint free) {
  uint result = 0u;
  while (free != 0u) {
    const uint low = uint(findLSB(free));
    const uint above = free >> low;  // a run of ones from bit 0
    const uint run = above == 0xffffffffu ? 32u : uint(findLSB(~above));
    result |= (source & low_bits(run)) << low;
    source = run >= 32u ? 0u : source >> run;
    free &= ~(low_bits(run) << low);
  }
  return result;
}

uvec2 deposit64(uvec2 source, uvec2 free) {
  const uint low = deposit(source.x, free.x);
  return uvec2(low, deposit(shift_right(source, uint(bitCount(free.x))).x, free.y));
}

// The mask or value of `element_size` bytes at tables window byte `at` (a multiple of the size).
uvec2 load_element(uint at) {
  const uint es = push.element_size;
  const uint word = tables.words[at >> 2u];
  if (es == 8u) return uvec2(word, tables.words[(at >> 2u) + 1u]);
  if (es == 4u) return uvec2(word, 0u);
  return uvec2((word >> (8u * (at & 3u))) & low_bits(8u * es), 0u);
}

// Stores the `count` (<= per_lane()) elements packed in `x` (element k at bits 8 x size x k) at
// output window byte `at`, a multiple of the element size: a word store when they make up a whole
// word, else atomics on their own bytes of the one or two words they share with other items'
// elements (or with bytes outside the output).
void store_elements(uint at, uint count, uvec2 x) {
  const uint es = push.element_size;
  if (count == 0u) return;
  const uint word = at >> 2u;
  if (es == 8u) {
    dst.words[word] = x.x;
    dst.words[word + 1u] = x.y;
    return;
  }
  const uint bytes = count * es;
  const uint lead = at & 3u;
  if (lead == 0u && bytes == 4u) {
    dst.words[word] = x.x;
    return;
  }
  const uint low_mask = low_bits(8u * bytes) << (8u * lead);
  atomicAnd(dst.words[word], ~low_mask);
  atomicOr(dst.words[word], (x.x << (8u * lead)) & low_mask);
  if (lead + bytes > 4u) {
    const uint high_mask = low_bits(8u * (lead + bytes - 4u));
    atomicAnd(dst.words[word + 1u], ~high_mask);
    atomicOr(dst.words[word + 1u], (x.x >> (8u * (4u - lead))) & high_mask);
  }
}

// Elements per invocation and chunk: a word's worth for narrow elements, else one.
uint per_lane() { return push.element_size < 4u ? 4u / push.element_size : 1u; }

// Zeros elements [begin, end) of the item whose output starts at window byte `at`, with the
// invocations' elements of decode_row (so that an invocation rewrites the words it wrote).
void zero_elements(uint at, uint begin, uint end) {
  const uint per = per_lane();
  for (uint c0 = begin; c0 < end; c0 += 32u * per) {
    const uint first_c = c0 + per * lane;
    const uint mine = first_c >= end ? 0u : min(per, end - first_c);
    store_elements(at + first_c * push.element_size, mine, uvec2(0u));
  }
}

// Word `w` of the row (stream window word `first`, `words` long), or 0 past its end.
uint row_word(uint first, uint words, uint w) { return w < words ? src.words[first + w] : 0u; }

// Decodes row `row` (n elements, group g, `mode`, its stored `bytes` from window word `first`)
// into the output at window byte `at`. False when its length is not exactly the stored one.
bool decode_row(uint at, uint n, uint g, uint mode, uint first, uint bytes) {
  const uint words = bytes >> 2u;
  const uint es = push.element_size;
  const uint width = 8u * es;
  const uvec2 width_mask = uvec2(low_bits(min(width, 32u)), es == 8u ? 0xffffffffu : 0u);
  const uint masks = push.masks_byte + g * push.mask_block_bytes;
  const uint values = masks + push.row_elements * es;
  // An invocation takes `per` consecutive elements of each chunk: one scan serves them, and
  // their bitmap bits lie in one word.
  const uint per = per_lane();
  // Bit position of the chunk's first field.
  uint base = mode == 0u ? (n + 31u) / 32u * 32u : 0u;
  for (uint c0 = 0u; c0 < n; c0 += 32u * per) {
    const uint first_c = c0 + per * lane;
    const uint mine = first_c >= n ? 0u : min(per, n - first_c);
    const uint bitmap =
        mode == 0u && mine != 0u ? row_word(first, words, first_c / 32u) >> (first_c % 32u) : 0u;
    uint lane_bits = 0u;
    for (uint k = 0u; k < mine; ++k) {
      if (mode == 2u) {
        lane_bits += width;
      } else {
        const uvec2 mask = load_element(masks + (first_c + k) * es);
        const bool matched = mode == 1u || ((bitmap >> k) & 1u) != 0u;
        lane_bits += matched ? width - uint(bitCount(mask.x) + bitCount(mask.y)) : width;
      }
    }
    uint position, total;
    if (mode == 2u) {
      position = base + per * lane * width;
      total = min(32u * per, n - c0) * width;
    } else {
      position = base + inclusive_sum(lane_bits, total) - lane_bits;
    }
    uvec2 packed = uvec2(0u);
    for (uint k = 0u; k < mine; ++k) {
      uvec2 mask = uvec2(0u), value = uvec2(0u);
      bool matched = false;
      if (mode != 2u) {
        mask = load_element(masks + (first_c + k) * es);
        value = load_element(values + (first_c + k) * es);
        matched = mode == 1u || ((bitmap >> k) & 1u) != 0u;
      }
      const uint length = matched ? width - uint(bitCount(mask.x) + bitCount(mask.y)) : width;
      // The field's bits, read as the words it lies in (up to 3), never past the row's end.
      uvec2 field = uvec2(0u);
      if (length != 0u) {
        const uint w = position >> 5u, shift = position & 31u;
        const uint a = row_word(first, words, w);
        const uint b = shift + length > 32u ? row_word(first, words, w + 1u) : 0u;
        const uint d = shift + length > 64u ? row_word(first, words, w + 2u) : 0u;
        field = shift == 0u ? uvec2(a, b)
                            : uvec2((a >> shift) | (b << (32u - shift)), (b >> shift) | (d << (32u - shift)));
        field = length >= 64u ? field
                : length >= 32u ? uvec2(field.x, field.y & low_bits(length - 32u))
                                : uvec2(field.x & low_bits(length), 0u);
      }
      position += length;
      const uvec2 x = matched ? (value | deposit64(field, ~mask & width_mask)) : field;
      if (es >= 4u) {
        packed = x;
      } else {
        packed.x |= (x.x & low_bits(width)) << (width * k);
      }
    }
    store_elements(at + first_c * es, mine, packed);
    base += total;
  }
  return (base + 31u) / 32u * 4u == bytes;
}

void decode_item(uint item) {
  const bool gather = (push.flags & FERRY_IBP_DECODE_GATHER) != 0u;
  const uint at = push.output_byte + item * push.slot_bytes;
  uint row = push.first_row + item;
  if (gather) row = indices.words[push.indices_word + item];
  if (row >= push.rows) {  // gather only
    zero_elements(at, 0u, push.row_elements);
    if (lane == 0u) atomicOr(status.words[push.status_word], kIndexOutOfRange);
    return;
  }
  const uint n = row == push.rows - 1u ? push.last_row_elements : push.row_elements;
  const uint g = row / push.group_rows;
  const uvec2 group_start = uvec2(tables.words[push.group_table_word + 2u * g],
                                  tables.words[push.group_table_word + 2u * g + 1u]);
  const uvec2 group_end = uvec2(tables.words[push.group_table_word + 2u * g + 2u],
                                tables.words[push.group_table_word + 2u * g + 3u]);
  const uint entry = row_table_entry(row);
  const uint mode = entry & 3u, offset = entry & ~3u;
  const bool last_in_group = (row + 1u) % push.group_rows == 0u || row + 1u == push.rows;
  bool ok = group_start.y == 0u && group_end.y == 0u && group_start.x <= group_end.x &&
            group_end.x <= push.data_bytes && (group_start.x & 3u) == 0u && mode <= 2u;
  const uint group_bytes = group_end.x - group_start.x;
  uint next = group_bytes;
  if (!last_in_group) next = row_table_entry(row + 1u) & ~3u;
  ok = ok && offset <= next && next <= group_bytes;
  if (ok) {
    const uint first = push.data_word + ((group_start.x + offset) >> 2u);
    ok = decode_row(at, n, g, mode, first, next - offset);
    if (!ok) {
      // Rewrite what was stored, after every store of it.
      memoryBarrierBuffer();
      barrier();
    }
  }
  if (!ok) {
    zero_elements(at, 0u, n);
    if (lane == 0u) atomicOr(status.words[push.status_word], kCorrupt);
  }
  if (gather) zero_elements(at, n, push.row_elements);
}

void main() {
  lane = gl_LocalInvocationID.x;
  if ((push.flags & FERRY_IBP_DECODE_CLEAR_STATUS) != 0u) {
    if (gl_WorkGroupID.x == 0u && lane == 0u) status.words[push.status_word] = 0u;
    return;
  }
  for (uint item = gl_WorkGroupID.x; item < push.items; item += gl_NumWorkGroups.x) {
    decode_item(item);
  }
}
