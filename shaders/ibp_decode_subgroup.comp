// ibp_decode (ferry/ops/ibp_decode.hpp) with subgroup operations: the variant for devices whose
// compute subgroups can be pinned to one size (runtime/src/vulkan/ops/ibp_decode_variant.hpp picks
// it; shaders/ibp_decode.comp is the portable fallback). Same results, bit for bit, as
// runtime/src/ops/ibp_decode.hpp's algorithm; the bindings and push constants are
// ibp_decode_abi.h's.
//
// A workgroup holds kTeams subgroups ("teams") of kSubgroup invocations (the pipeline requires
// that size and full subgroups). An item (row or gather slot) is decoded by teams_per_row teams,
// each over a segment of consecutive "units": an output word for 1-, 2- and 4-byte elements (the
// elements whose bytes lie in it), an element for 8-byte ones.
//   phase A: each team sums its segment's field bits (subgroupAdd); the teams' sums go through
//            shared memory (one barrier), which gives each segment's first bit and the row's
//            length, checked against the stored one BEFORE anything is stored: a corrupt row is
//            only zeroed and flagged.
//   phase B: each team decodes its segment a chunk of kSubgroup units at a time, the units' bit
//            positions from subgroupInclusiveAdd.
// A unit of narrow elements is decoded at once: its masks, values and matched-element bytes as
// one word each, `free` = the unit's bytes outside the masks of its matched elements, and the
// unit's fields (at most 32 bits together) deposited into `free` by one pdep. Interior output
// words are stored whole; the first and last word of an item (shared with neighbours or bytes
// outside the output) with atomics on the item's bytes only.
//
// Phase B reads a row's words only for rows that passed the length check, so every field lies in
// the row; other reads (bitmaps, the word after a mask or value run) are clamped into the row or
// lie in the stream or tables window (masks and values are followed by the row table).
#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_ballot : require

#include "ibp_decode_abi.h"

layout(constant_id = FERRY_IBP_DECODE_SUBGROUP_ID) const uint kSubgroup = 32;
layout(constant_id = FERRY_IBP_DECODE_TEAMS_ID) const uint kTeams = 8;
layout(local_size_x_id = FERRY_IBP_DECODE_WORKGROUP_ID) in;  // kSubgroup x kTeams

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

// Each team's segment bits, double-buffered by item round so that one barrier per round suffices.
shared uint segment_bits[2][kTeams];

uint lane;  // in the team

// Row table entry i: from the tables window, or in place in the stream's (a gather of few rows).
uint row_table_entry(uint i) {
  return (push.flags & FERRY_IBP_DECODE_ROW_TABLE_IN_STREAM) != 0u
             ? src.words[push.row_table_word + i]
             : tables.words[push.row_table_word + i];
}

// The low `bits` bits set (bits <= 32).
uint low_bits(uint bits) { return bits >= 32u ? 0xffffffffu : (1u << bits) - 1u; }

// pdep: the low bits of `source` deposited, lowest first, into the set bits of `free`, a run of
// set bits at a time (masks leave few runs).
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
  const uint below = uint(bitCount(free.x));
  const uint high_source = below == 0u ? source.x
                           : below >= 32u ? source.y
                                          : (source.x >> below) | (source.y << (32u - below));
  return uvec2(deposit(source.x, free.x), deposit(high_source, free.y));
}

// The 4 tables bytes from window byte `at` (any alignment) as a little-endian word.
uint load_bytes(uint at) {
  const uint shift = 8u * (at & 3u);
  const uint low = tables.words[at >> 2u];
  if (shift == 0u) return low;
  return (low >> shift) | (tables.words[(at >> 2u) + 1u] << (32u - shift));
}

// The row being decoded by this team.
struct Row {
  uint first;     // stream window word of its first word
  uint last;      // the last stream word a read of it may touch (first when it is empty)
  uint n;         // elements
  uint mode;
  uint masks;     // tables window byte of its group's masks
  uint values;    // ... and values
  uint lead;      // output byte of the item's start in its word (1- and 2-byte elements)
};

uint row_word(Row row, uint w) { return src.words[min(row.first + w, row.last)]; }

// `count` (<= 32) bits of the row from bit `position`, as 32 bits.
uint row_bits(Row row, uint position, uint count) {
  const uint w = position >> 5u, shift = position & 31u;
  const uint a = row_word(row, w);
  const uint b = row_word(row, w + 1u);
  const uint field = shift == 0u ? a : (a >> shift) | (b << (32u - shift));
  return field & low_bits(count);
}

// Bitmap bits of elements c .. c + 3 (mode 0), in the low bits.
uint bitmap_bits(Row row, uint c) {
  const uint shift = c & 31u;
  const uint a = row_word(row, c >> 5u);
  if (shift == 0u) return a;
  return (a >> shift) | (row_word(row, (c >> 5u) + 1u) << (32u - shift));
}

// ---- units of 1-, 2- and 4-byte elements: output words ----

uint units_of(uint lead, uint elements) { return (lead + elements * push.element_size + 3u) >> 2u; }

// Unit (output word) u of `row`: which bytes of it are the row's, and its bits' layout.
struct Unit {
  uint bytes;   // the word's bytes that are the row's elements
  uint free;    // bits holding field bits: the unit's bytes outside its matched elements' masks
  uint value;   // the matched elements' values (at their bytes)
};

Unit unit_of(Row row, uint u) {
  const uint es = push.element_size;
  const uint lo = max(4u * u, row.lead);               // byte range in the item's words
  const uint hi = min(4u * u + 4u, row.lead + row.n * es);
  Unit unit;
  unit.bytes = low_bits(8u * (hi - lo)) << (8u * (lo - 4u * u));
  if (row.mode == 2u) {
    unit.free = unit.bytes;
    unit.value = 0u;
    return unit;
  }
  // The masks and values whose bytes land in this output word.
  const uint mask = load_bytes(row.masks + 4u * u - row.lead);
  const uint value = load_bytes(row.values + 4u * u - row.lead);
  uint matched = unit.bytes;
  if (row.mode == 0u) {
    const uint c = (lo - row.lead) / es;
    const uint bits = bitmap_bits(row, c);
    const uint width = 8u * es;
    uint selected = 0u;
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      if (k * es < 4u && ((bits >> k) & 1u) != 0u) selected |= low_bits(width) << (k * width);
    }
    matched &= selected << (8u * (lo - 4u * u));
  }
  unit.free = unit.bytes & ~(mask & matched);
  unit.value = value & matched;
  return unit;
}

void store_unit(uint at_word, uint bytes, uint x) {
  if (bytes == 0xffffffffu) {
    dst.words[at_word] = x;
  } else if (bytes != 0u) {
    atomicAnd(dst.words[at_word], ~bytes);
    atomicOr(dst.words[at_word], x & bytes);
  }
}

// ---- units of 8-byte elements: elements ----

struct Unit64 {
  uvec2 free;
  uvec2 value;
};

Unit64 unit64_of(Row row, uint c) {
  Unit64 unit;
  unit.free = uvec2(0xffffffffu);
  unit.value = uvec2(0u);
  if (row.mode == 2u) return unit;
  const bool matched = row.mode == 1u || (row_word(row, c >> 5u) >> (c & 31u) & 1u) != 0u;
  if (!matched) return unit;
  const uint m = (row.masks >> 2u) + 2u * c, v = (row.values >> 2u) + 2u * c;
  unit.free = ~uvec2(tables.words[m], tables.words[m + 1u]);
  unit.value = uvec2(tables.words[v], tables.words[v + 1u]);
  return unit;
}

uint bits_of(uvec2 free) { return uint(bitCount(free.x) + bitCount(free.y)); }

// ---- the item's teams ----

// Units [begin, end) of `units` for team `segment` of `teams`: whole chunks of kSubgroup units.
uvec2 segment_of(uint units, uint segment, uint teams) {
  const uint chunks = (units + kSubgroup - 1u) / kSubgroup;
  const uint per_team = (chunks + teams - 1u) / teams;
  const uint begin = min(segment * per_team * kSubgroup, units);
  return uvec2(begin, min(begin + per_team * kSubgroup, units));
}

// Zeros bytes [lead + begin x es, lead + end x es) of the item's words from output word `at_word`,
// this team's share of them.
void zero_elements(uint at_word, uint lead, uint begin, uint end, uint segment, uint teams) {
  const uint es = push.element_size;
  const uint lo = lead + begin * es, hi = lead + end * es;
  if (lo >= hi) return;
  const uint first = lo >> 2u;
  const uvec2 range = segment_of(((hi + 3u) >> 2u) - first, segment, teams);
  for (uint w = first + range.x + lane; w < first + range.y; w += kSubgroup) {
    const uint from = max(4u * w, lo), to = min(4u * w + 4u, hi);
    store_unit(at_word + w, low_bits(8u * (to - from)) << (8u * (from - 4u * w)), 0u);
  }
}

// The bits of this team's units of the row (phase A), summed over the team.
uint segment_bits_of(Row row, uvec2 range) {
  const uint es = push.element_size;
  uint bits = 0u;
  if (row.mode == 2u) {
    if (es == 8u) return (range.y - range.x) * 64u;
    // The elements of the units: from the first whole element of unit range.x to that of range.y.
    const uint lo = max(4u * range.x, row.lead), hi = min(4u * range.y, row.lead + row.n * es);
    return lo >= hi ? 0u : (hi - lo) * 8u;
  }
  for (uint u = range.x + lane; u < range.y; u += kSubgroup) {
    bits += es == 8u ? bits_of(unit64_of(row, u).free) : uint(bitCount(unit_of(row, u).free));
  }
  return subgroupAdd(bits);
}

// Decodes this team's units of the row from row bit `base` (phase B).
void decode_segment(Row row, uint at_word, uvec2 range, uint base) {
  const uint es = push.element_size;
  for (uint u0 = range.x; u0 < range.y; u0 += kSubgroup) {
    const uint u = u0 + lane;
    const bool mine = u < range.y;
    if (es == 8u) {
      const Unit64 unit = unit64_of(row, mine ? u : range.x);
      const uint bits = mine ? bits_of(unit.free) : 0u;
      const uint inclusive = subgroupInclusiveAdd(bits);
      const uint position = base + inclusive - bits;
      base += subgroupBroadcast(inclusive, kSubgroup - 1u);
      if (mine) {
        uvec2 field = uvec2(row_bits(row, position, min(bits, 32u)), 0u);
        if (bits > 32u) field.y = row_bits(row, position + 32u, bits - 32u);
        const uvec2 x = unit.value | deposit64(field, unit.free);
        dst.words[at_word + 2u * u] = x.x;
        dst.words[at_word + 2u * u + 1u] = x.y;
      }
    } else {
      const Unit unit = unit_of(row, mine ? u : range.x);
      const uint bits = mine ? uint(bitCount(unit.free)) : 0u;
      uint position;
      if (row.mode == 2u) {
        // Raw: the unit's elements start at the row's byte of its first element.
        position = 8u * (max(4u * u, row.lead) - row.lead);
      } else {
        const uint inclusive = subgroupInclusiveAdd(bits);
        position = base + inclusive - bits;
        base += subgroupBroadcast(inclusive, kSubgroup - 1u);
      }
      if (mine) {
        const uint field = row_bits(row, position, bits);
        const uint x = unit.free == 0xffffffffu ? field : unit.value | deposit(field, unit.free);
        store_unit(at_word + u, unit.bytes, x);
      }
    }
  }
}

void main() {
  const uint team = gl_SubgroupID;
  lane = gl_SubgroupInvocationID;
  if ((push.flags & FERRY_IBP_DECODE_CLEAR_STATUS) != 0u) {
    if (gl_WorkGroupID.x == 0u && gl_LocalInvocationIndex == 0u) status.words[push.status_word] = 0u;
    return;
  }
  const bool gather = (push.flags & FERRY_IBP_DECODE_GATHER) != 0u;
  const uint es = push.element_size;
  const uint teams = push.teams_per_row;  // a power of two dividing kTeams
  const uint rows_per_group = kTeams / teams;
  const uint segment = team % teams;
  uint round = 0u;
  // The same number of rounds for every invocation: the barrier is in uniform control flow.
  for (uint first_item = gl_WorkGroupID.x * rows_per_group; first_item < push.items;
       first_item += gl_NumWorkGroups.x * rows_per_group, round ^= 1u) {
    const uint item = first_item + team / teams;
    const bool has_item = item < push.items;
    const uint at = push.output_byte + item * push.slot_bytes;
    const uint at_word = at >> 2u;
    Row row;
    row.lead = at & 3u;
    row.n = 0u;
    row.mode = 0u;
    uint bytes = 0u, bitmap = 0u;
    uint row_index = push.first_row + item;
    bool in_range = true, ok = false;
    uvec2 range = uvec2(0u);
    uint bits = 0u;
    if (has_item) {
      if (gather) row_index = indices.words[push.indices_word + item];
      in_range = row_index < push.rows;
      if (in_range) {
        row.n = row_index == push.rows - 1u ? push.last_row_elements : push.row_elements;
        const uint g = row_index / push.group_rows;
        const uint table = push.group_table_word + 2u * g;
        const uvec2 group_start = uvec2(tables.words[table], tables.words[table + 1u]);
        const uvec2 group_end = uvec2(tables.words[table + 2u], tables.words[table + 3u]);
        const uint entry = row_table_entry(row_index);
        row.mode = entry & 3u;
        const uint offset = entry & ~3u;
        const bool last_in_group =
            (row_index + 1u) % push.group_rows == 0u || row_index + 1u == push.rows;
        ok = group_start.y == 0u && group_end.y == 0u && group_start.x <= group_end.x &&
             group_end.x <= push.data_bytes && (group_start.x & 3u) == 0u && row.mode <= 2u;
        const uint group_bytes = group_end.x - group_start.x;
        const uint next = last_in_group ? group_bytes
                                        : row_table_entry(row_index + 1u) & ~3u;
        ok = ok && offset <= next && next <= group_bytes;
        if (ok) {
          bytes = next - offset;
          row.first = push.data_word + ((group_start.x + offset) >> 2u);
          row.last = row.first + max(bytes >> 2u, 1u) - 1u;
          row.masks = push.masks_byte + g * push.mask_block_bytes;
          row.values = row.masks + push.row_elements * es;
          bitmap = row.mode == 0u ? (row.n + 31u) / 32u * 32u : 0u;
          range = segment_of(es == 8u ? row.n : units_of(row.lead, row.n), segment, teams);
          bits = segment_bits_of(row, range);
        }
      }
    }
    if (lane == 0u) segment_bits[round][team] = bits;
    barrier();
    if (!has_item) continue;
    if (ok) {
      // This segment's first bit and the row's length, from its teams' sums.
      uint before = bitmap, total = bitmap;
      const uint first_team = team - segment;
      for (uint t = 0u; t < teams; ++t) {
        const uint b = segment_bits[round][first_team + t];
        if (t < segment) before += b;
        total += b;
      }
      ok = (total + 31u) / 32u * 4u == bytes;
      if (ok) decode_segment(row, at_word, range, before);
    }
    if (!in_range) {
      zero_elements(at_word, row.lead, 0u, push.row_elements, segment, teams);
      if (segment == 0u && lane == 0u) atomicOr(status.words[push.status_word], kIndexOutOfRange);
      continue;
    }
    if (!ok) {
      zero_elements(at_word, row.lead, 0u, row.n, segment, teams);
      if (segment == 0u && lane == 0u) atomicOr(status.words[push.status_word], kCorrupt);
    }
    if (gather) zero_elements(at_word, row.lead, row.n, push.row_elements, segment, teams);
  }
}
