// The ibp_decode kernel (ops::IbpDecodeArgs): rows of an IBP stream (docs/IBP_FORMAT.md) back
// into their elements, the algorithm of runtime/src/ops/ibp_decode.hpp. One instantiation per
// element size.
//
// A row is decoded chunk by chunk (32 x kPer elements: lane l takes elements kPer l .. kPer l +
// kPer - 1, kPer = 1 for 4- and 8-byte elements, a word's worth for narrower ones): per chunk a
// warp prefix sum of the lanes' field lengths (the bitmap and the masks say them), each field
// read from the two (three for 8-byte elements) 32-bit words it lies in and deposited into the
// free bits of its column's mask. Arithmetic is 32-bit for elements of up to 4 bytes; raw rows
// (mode 2) take the same path with every element unmatched.
//
// The fields are read from a per-warp window of the row in shared memory (Window), filled with
// 16-byte loads; the tables (group table, masks, row table) from `tables`, a device copy when the
// stream is in host memory (ibp_decode_kernel.cpp): over the bus, each row then crosses once. A
// gather of few rows from host memory reads its row table entries in place (`row_tables`).
//
// Items are rows (or gather slots). When there are many, a warp decodes an item alone in one
// pass, its reads clamped to the word after the row's end, and compares the row's length at the
// end (a wrong one: the row is rewritten with zeros). When they are few (a piece of a staged upload, a
// range), a team of 2, 4 or 8 warps of a block takes each item, one segment of its chunks per
// warp: A. each warp sums its segment's field lengths; one block barrier shares the sums, which
// give each segment its first bit and the row its length, checked before anything is stored;
// B. each warp decodes its segment.
#include <cstdint>
#include <type_traits>

#include "../kernels/launch.hpp"
#include "ibp_decode_launch.hpp"

namespace ferry::cuda {
namespace {

constexpr unsigned kWarpsPerBlock = 8;
constexpr unsigned kFull = 0xffffffffu;
constexpr std::uint32_t kCorrupt = 1u;          // kIbpStatusCorrupt
constexpr std::uint32_t kIndexOutOfRange = 2u;  // kIbpStatusIndexOutOfRange

template <unsigned kSize> struct Element;
template <> struct Element<1> { using type = std::uint8_t; };
template <> struct Element<2> { using type = std::uint16_t; };
template <> struct Element<4> { using type = std::uint32_t; };
template <> struct Element<8> { using type = std::uint64_t; };

// Elements per lane and chunk: a word's worth of narrow elements, else one.
template <typename T> constexpr unsigned kPer = sizeof(T) < 4 ? 4 / sizeof(T) : 1;
// The arithmetic type of an element's bits.
template <typename T>
using Bits = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;

template <typename B> __device__ __forceinline__ B low_bits(unsigned bits) {
  return bits >= 8 * sizeof(B) ? ~B{0} : (B{1} << bits) - 1;
}

template <typename B> __device__ __forceinline__ unsigned lowest_set(B x) {
  if constexpr (sizeof(B) == 8) {
    return __ffsll(static_cast<long long>(x)) - 1;
  } else {
    return __ffs(static_cast<int>(x)) - 1;
  }
}

// pdep: the low bits of `source` deposited, lowest first, into the set bits of `free`, a run of
// set bits at a time (masks leave few runs; most leave one, from bit 0).
template <typename B> __device__ __forceinline__ B deposit(B source, B free) {
  if ((free & (free + 1)) == 0) return source & free;  // one run from bit 0 (or none)
  B result = 0;
  while (free != 0) {
    const unsigned low = lowest_set(free);
    const B above = free >> low;
    const unsigned run = ~above == 0 ? 8 * sizeof(B) - low : lowest_set(B(~above));
    result |= (source & low_bits<B>(run)) << low;
    source = run >= 8 * sizeof(B) ? 0 : source >> run;
    free &= ~(low_bits<B>(run) << low);
  }
  return result;
}

__device__ __forceinline__ std::uint64_t warp_sum(std::uint64_t x) {
#pragma unroll
  for (unsigned step = 16; step != 0; step >>= 1) x += __shfl_xor_sync(kFull, x, step);
  return x;
}

// What a team knows of its item's row.
template <typename T> struct Row {
  const std::uint32_t* words = nullptr;  // the row's stored words
  std::uint64_t word_count = 0;
  std::uint64_t n = 0;                   // elements
  unsigned mode = 0;
  const T* masks = nullptr;              // the group's masks, then its values
  const T* values = nullptr;
  bool values_aligned = false;           // narrow elements: values start on a word
};

// The lane's `mine` (<= kPer) elements from p (T-aligned; word-aligned when `aligned`), packed
// low first; zeros past them.
template <typename T>
__device__ __forceinline__ Bits<T> load_lane(const T* p, unsigned mine, bool aligned) {
  if constexpr (kPer<T> > 1) {
    if (aligned && mine == kPer<T>) return __ldg(reinterpret_cast<const std::uint32_t*>(p));
    std::uint32_t word = 0;
    for (unsigned k = 0; k < mine; ++k) word |= std::uint32_t{__ldg(p + k)} << (8 * sizeof(T) * k);
    return word;
  } else {
    return mine != 0 ? Bits<T>{__ldg(p)} : Bits<T>{0};
  }
}

template <typename T> __device__ __forceinline__ Bits<T> part(Bits<T> packed, unsigned k) {
  return kPer<T> > 1 ? (packed >> (8 * sizeof(T) * k)) & low_bits<Bits<T>>(8 * sizeof(T)) : packed;
}

template <typename B> __device__ __forceinline__ unsigned popcount(B x) {
  if constexpr (sizeof(B) == 8) {
    return __popcll(x);
  } else {
    return __popc(x);
  }
}

// A lane's place in a row, a chunk at a time: its first element's mask, value, output and
// bitmap word (mode 0; the caller checked that the row holds its bitmap), and the elements left
// from the chunk's first.
template <typename T> struct Cursor {
  const std::uint32_t* bitmap;
  const T* masks;
  const T* values;
  T* out;
  std::uint64_t remaining;

  __device__ Cursor(const Row<T>& r, std::uint64_t chunk, T* row_out, unsigned lane) {
    const std::uint64_t first = chunk * 32 * kPer<T> + kPer<T> * lane;
    bitmap = r.words + first / 32;
    masks = r.masks + first;
    values = r.values + first;
    out = row_out + first;
    remaining = r.n - chunk * 32 * kPer<T>;
  }
  __device__ void next() {
    bitmap += kPer<T>;
    masks += 32 * kPer<T>;
    values += 32 * kPer<T>;
    out += 32 * kPer<T>;
    remaining -= 32 * kPer<T>;
  }
};

// The lane's share of the cursor's chunk: how many of its elements, their matched bits (bit k:
// element k), their masks packed.
template <typename T> struct LaneShare {
  unsigned mine;
  std::uint32_t matched;
  Bits<T> masks;
};

template <typename T>
__device__ __forceinline__ LaneShare<T> lane_share(const Row<T>& r, const Cursor<T>& c, unsigned lane) {
  LaneShare<T> s;
  const unsigned first = kPer<T> * lane;
  const unsigned count = c.remaining < 32 * kPer<T> ? static_cast<unsigned>(c.remaining) : 32 * kPer<T>;
  s.mine = first >= count ? 0 : min(kPer<T>, count - first);
  const std::uint32_t in_row = (1u << s.mine) - 1;
  if (r.mode == 0) {
    s.matched = s.mine != 0 ? (__ldg(c.bitmap) >> (first % 32)) & in_row : 0;
  } else {
    s.matched = r.mode == 1 ? in_row : 0;
  }
  s.masks = r.mode != 2 ? load_lane<T>(c.masks, s.mine, true) : Bits<T>{0};
  return s;
}

template <typename T>
__device__ __forceinline__ unsigned field_length(const LaneShare<T>& s, unsigned k) {
  constexpr unsigned kWidth = 8 * sizeof(T);
  return k >= s.mine ? 0 : ((s.matched >> k) & 1u) != 0 ? kWidth - popcount(part<T>(s.masks, k)) : kWidth;
}

template <typename T>
__device__ __forceinline__ unsigned lane_bits(const LaneShare<T>& s) {
  unsigned bits = 0;
#pragma unroll
  for (unsigned k = 0; k < kPer<T>; ++k) bits += field_length<T>(s, k);
  return bits;
}

// Stores the lane's `mine` elements (packed in `word` for narrow ones) at out[0...].
template <typename T>
__device__ __forceinline__ void store_lane(T* out, unsigned mine, Bits<T> word, bool word_stores) {
  if constexpr (kPer<T> > 1) {
    if (word_stores && mine == kPer<T>) {
      *reinterpret_cast<std::uint32_t*>(out) = word;
    } else {
      for (unsigned k = 0; k < mine; ++k) out[k] = static_cast<T>(word >> (8 * sizeof(T) * k));
    }
  } else {
    if (mine != 0) out[0] = static_cast<T>(word);
  }
}

// Zeros out[begin, end), the elements split among `lanes` lanes of which this is `lane`.
template <typename T>
__device__ void zero_elements(T* out, std::uint64_t begin, std::uint64_t end, unsigned lane,
                              unsigned lanes) {
  for (std::uint64_t c = begin + lane; c < end; c += lanes) out[c] = T{0};
}

// A warp's copy of kWindowWords words of a row, in shared memory: the fields are read from it,
// and it is filled with 16-byte loads, a whole line per load instruction where the row allows
// (reads of pinned host memory over the bus cost per request: 4-byte reads waste most of it).
constexpr unsigned kWindowWords = 256;

struct Window {
  std::uint32_t* words;    // shared, kWindowWords
  std::int64_t first = 0;  // the row word words[0] holds (a few before the row's first at most)
  std::int64_t end = 0;    // one past the last valid; empty at first

  // Makes words [from, to) of the row (to - from <= kWindowWords - 3) present, reading no word
  // at or past `limit` (the row's words + 1) or `stream_end`; every lane calls it.
  __device__ __forceinline__ void hold(const std::uint32_t* row, std::uint64_t from, std::uint64_t to,
                                       std::uint64_t limit, const std::uint32_t* stream_end,
                                       unsigned lane) {
    if (static_cast<std::int64_t>(from) >= first && static_cast<std::int64_t>(to) <= end) return;
    // Start on a 16-byte boundary of memory, at most 3 words before `from` (the stream's tables
    // precede its rows).
    const std::int64_t lead = (reinterpret_cast<std::uintptr_t>(row + from) & 15) / 4;
    first = static_cast<std::int64_t>(from) - lead;
    const std::int64_t stop = static_cast<std::int64_t>(limit > to ? limit : to);
    end = first + kWindowWords < stop ? first + kWindowWords : stop;
    const std::uint32_t* base = row + first;
    const std::uint32_t* const last = base + (end - first);
    __syncwarp();  // every lane done reading the previous words
#pragma unroll
    for (unsigned v = lane; v < kWindowWords / 4; v += 32) {
      const std::uint32_t* at = base + 4 * v;
      if (at >= last) break;
      if (at + 4 <= stream_end) {
        reinterpret_cast<uint4*>(words)[v] = __ldg(reinterpret_cast<const uint4*>(at));
      } else {
        for (unsigned k = 0; k < 4; ++k) words[4 * v + k] = at + k < stream_end ? __ldg(at + k) : 0u;
      }
    }
    __syncwarp();
  }
};

// Decodes chunks [begin, end) of the row, the first of them starting at bit `base`, into the
// row's output; returns the bit after the last field. Unless kChecked every field lies inside the
// row (the caller checked its length); kChecked: reads past the row's end read the word after it
// instead, and the caller compares the returned end with the row's. Either way the word after the
// row is in the stream (the next row, or the checksum table that follows the row data).
template <typename T, bool kChecked>
__device__ __forceinline__ std::uint64_t decode_segment(const Row<T>& r, std::uint64_t begin,
                                                        std::uint64_t end, std::uint64_t base, T* out,
                                                        Window& window, const std::uint32_t* stream_end,
                                                        unsigned lane) {
  constexpr unsigned kWidth = 8 * sizeof(T);
  const bool word_stores = (reinterpret_cast<std::uintptr_t>(out) & 3) == 0;
  Cursor<T> c(r, begin, out, lane);
  for (std::uint64_t chunk = begin; chunk < end; ++chunk, c.next()) {
    const LaneShare<T> s = lane_share(r, c, lane);
    const Bits<T> values = s.matched != 0 ? load_lane<T>(c.values, s.mine, r.values_aligned) : Bits<T>{0};
    const unsigned bits = lane_bits(s);
    unsigned sum = bits;
#pragma unroll
    for (unsigned step = 1; step < 32; step <<= 1) {
      const unsigned other = __shfl_up_sync(kFull, sum, step);
      if (lane >= step) sum += other;
    }
    const unsigned chunk_bits = __shfl_sync(kFull, sum, 31);
    // The chunk's fields lie in words [first_word, last_word] of the row (kChecked: if the row
    // is as long as it says; reads past its end read the word after it instead).
    std::uint64_t first_word = base >> 5;
    std::uint64_t last_word = (base + chunk_bits) >> 5;
    if constexpr (kChecked) {
      first_word = first_word < r.word_count ? first_word : r.word_count;
      last_word = last_word < r.word_count ? last_word : r.word_count;
    }
    window.hold(r.words, first_word, last_word + 2, r.word_count + 1, stream_end, lane);
    const std::uint32_t* data = window.words + (static_cast<std::int64_t>(first_word) - window.first);
    // The last word index from `data` a read may take.
    const unsigned limit = kChecked ? static_cast<unsigned>(last_word - first_word) : ~0u;
    unsigned position = static_cast<unsigned>(base & 31) + sum - bits;
    Bits<T> packed = 0;
#pragma unroll
    for (unsigned k = 0; k < kPer<T>; ++k) {
      const unsigned length = field_length<T>(s, k);
      Bits<T> field = 0;
      if (length != 0) {
        const unsigned w = position >> 5, shift = position & 31;
        const std::uint32_t first = data[min(w, limit)];
        const std::uint32_t second = data[min(w + 1, limit)];
        if constexpr (sizeof(T) == 8) {
          const std::uint32_t third = shift + length > 64 ? data[min(w + 2, limit)] : 0u;
          field = (std::uint64_t{__funnelshift_r(first, second, shift)} |
                   std::uint64_t{__funnelshift_r(second, third, shift)} << 32) &
                  low_bits<std::uint64_t>(length);
        } else {
          field = __funnelshift_r(first, second, shift) & low_bits<std::uint32_t>(length);
        }
      }
      position += length;
      const Bits<T> mask = part<T>(s.masks, k);
      const Bits<T> x = ((s.matched >> k) & 1u) != 0
                            ? part<T>(values, k) | deposit<Bits<T>>(field, ~mask & low_bits<Bits<T>>(kWidth))
                            : field;
      packed |= kPer<T> > 1 ? x << (kWidth * k) : x;
    }
    store_lane<T>(c.out, s.mine, packed, word_stores);
    base += chunk_bits;
  }
  return base;
}

// The bits of the fields of chunks [begin, end) of the row.
template <typename T>
__device__ __forceinline__ std::uint64_t segment_bits_of(const Row<T>& r, std::uint64_t begin, std::uint64_t end,
                                         unsigned lane) {
  constexpr unsigned kChunk = 32 * kPer<T>;
  if (r.mode == 2) {
    const std::uint64_t first = begin * kChunk, last = end * kChunk < r.n ? end * kChunk : r.n;
    return first < last ? (last - first) * 8 * sizeof(T) : 0;
  }
  std::uint64_t bits = 0;
  Cursor<T> c(r, begin, nullptr, lane);
  for (std::uint64_t chunk = begin; chunk < end; ++chunk, c.next()) bits += lane_bits(lane_share(r, c, lane));
  return warp_sum(bits);
}

// Whether a mode 0 row holds at least its bitmap (the cursors read it unchecked).
template <typename T> __device__ __forceinline__ bool holds_bitmap(const Row<T>& r) {
  return r.mode != 0 || (r.n + 31) / 32 <= r.word_count;
}

__device__ __forceinline__ const std::uint32_t* stream_end(const IbpDecodeKernelArgs& a) {
  return reinterpret_cast<const std::uint32_t*>(static_cast<const unsigned char*>(a.stream) + a.stream_bytes);
}

// Finds row `row`'s group, mode and stored words in r; false when the tables say nothing
// sensible of it (a corrupt stream).
template <typename T>
__device__ bool open_row(const IbpDecodeKernelArgs& a, std::uint64_t row, Row<T>& r) {
  const auto* stream = static_cast<const unsigned char*>(a.stream);
  const auto* tables = static_cast<const unsigned char*>(a.tables);
  const auto* group_table = reinterpret_cast<const std::uint64_t*>(tables + a.group_table_offset);
  const auto* row_table = reinterpret_cast<const std::uint32_t*>(
      static_cast<const unsigned char*>(a.row_tables) + a.row_table_offset);
  r.n = row == a.rows - 1 ? a.last_row_elements : a.row_elements;
  const std::uint64_t g = row / a.group_rows;
  const std::uint64_t group_start = __ldg(group_table + g);
  const std::uint64_t group_end = __ldg(group_table + g + 1);
  const std::uint32_t entry = __ldg(row_table + row);
  r.mode = entry & 3u;
  const std::uint64_t offset = entry & ~3u;
  const bool last_in_group = (row + 1) % a.group_rows == 0 || row + 1 == a.rows;
  if (!(group_start <= group_end && group_end <= a.data_bytes && group_start % 4 == 0 && r.mode <= 2)) {
    return false;
  }
  const std::uint64_t group_bytes = group_end - group_start;
  const std::uint64_t next = last_in_group ? group_bytes : (__ldg(row_table + row + 1) & ~3u);
  if (!(offset <= next && next <= group_bytes)) return false;
  r.masks = reinterpret_cast<const T*>(tables + a.masks_offset + g * a.mask_block_bytes);
  r.values = r.masks + a.row_elements;
  r.values_aligned = (reinterpret_cast<std::uintptr_t>(r.values) & 3) == 0;
  r.words = reinterpret_cast<const std::uint32_t*>(stream + a.data_offset + group_start + offset);
  r.word_count = (next - offset) / 4;
  return true;
}

// Warp `warp` of `warps` decodes items warp, warp + warps, ... alone, in one pass over each row,
// checking the row's length at its end (a wrong one: the row is rewritten with zeros).
template <typename T>
__device__ void decode_items_by_warps(const IbpDecodeKernelArgs& a, std::uint64_t warp,
                                      std::uint64_t warps, unsigned lane,
                                      std::uint32_t (*windows)[kWindowWords]) {
  constexpr unsigned kChunk = 32 * kPer<T>;
  for (std::uint64_t item = warp; item < a.items; item += warps) {
    T* out = static_cast<T*>(a.output) + item * a.row_elements;
    const std::uint64_t row = a.gather ? std::uint64_t{__ldg(a.indices + item)} : a.first_row + item;
    if (row >= a.rows) {  // gather only
      zero_elements<T>(out, 0, a.row_elements, lane, 32);
      if (lane == 0) atomicOr(a.status, kIndexOutOfRange);
      continue;
    }
    Row<T> r;
    bool ok = open_row(a, row, r) && holds_bitmap(r);
    if (ok) {
      const std::uint64_t chunks = (r.n + kChunk - 1) / kChunk;
      const std::uint64_t bitmap_bits = r.mode == 0 ? (r.n + 31) / 32 * 32 : 0;
      Window window{windows[threadIdx.x / 32]};
      const std::uint64_t end =
          decode_segment<T, true>(r, 0, chunks, bitmap_bits, out, window, stream_end(a), lane);
      ok = (end + 31) / 32 == r.word_count;
      __syncwarp();  // the zeros below after every lane's stores
    }
    if (!ok) {
      zero_elements<T>(out, 0, r.n, lane, 32);
      if (lane == 0) atomicOr(a.status, kCorrupt);
    }
    if (a.gather) zero_elements<T>(out, r.n, a.row_elements, lane, 32);
  }
}

// Teams of `team_warps` (2, 4 or 8) warps of the block decode its items, a team per item.
template <typename T>
__device__ void decode_items_by_teams(const IbpDecodeKernelArgs& a, unsigned team_warps,
                                      std::uint32_t (*windows)[kWindowWords]) {
  constexpr unsigned kChunk = 32 * kPer<T>;
  __shared__ std::uint64_t segment_bits[2][kWarpsPerBlock];
  const unsigned lane = threadIdx.x & 31;
  const unsigned warp = threadIdx.x / 32;
  const unsigned teams = kWarpsPerBlock / team_warps;
  const unsigned team = warp / team_warps, member = warp % team_warps;
  const unsigned team_lane = member * 32 + lane, team_lanes = team_warps * 32;
  unsigned parity = 0;
  // Every warp of the block runs the same number of rounds: the barrier is in uniform flow.
  for (std::uint64_t first_item = std::uint64_t{blockIdx.x} * teams; first_item < a.items;
       first_item += std::uint64_t{gridDim.x} * teams, parity ^= 1) {
    const std::uint64_t item = first_item + team;
    const bool active = item < a.items;
    T* out = static_cast<T*>(a.output) + item * a.row_elements;
    bool in_range = false, ok = false;
    Row<T> r;
    std::uint64_t chunk_begin = 0, chunk_end = 0, bitmap_bits = 0, my_bits = 0;
    if (active) {
      const std::uint64_t row = a.gather ? std::uint64_t{__ldg(a.indices + item)} : a.first_row + item;
      in_range = row < a.rows;
      ok = in_range && open_row(a, row, r) && holds_bitmap(r);
    }
    if (ok) {
      // A. This warp's segment of the row's chunks, and the bits of its fields.
      const std::uint64_t chunks = (r.n + kChunk - 1) / kChunk;
      const std::uint64_t per_warp = (chunks + team_warps - 1) / team_warps;
      chunk_begin = member * per_warp < chunks ? member * per_warp : chunks;
      chunk_end = chunk_begin + per_warp < chunks ? chunk_begin + per_warp : chunks;
      bitmap_bits = r.mode == 0 ? (r.n + 31) / 32 * 32 : 0;
      my_bits = segment_bits_of(r, chunk_begin, chunk_end, lane);
    }
    if (lane == 0) segment_bits[parity][warp] = my_bits;
    __syncthreads();
    if (!active) continue;
    if (!in_range) {  // gather only
      zero_elements<T>(out, 0, a.row_elements, team_lane, team_lanes);
      if (team_lane == 0) atomicOr(a.status, kIndexOutOfRange);
      continue;
    }
    std::uint64_t base = bitmap_bits, total = bitmap_bits;
    for (unsigned m = 0; m < team_warps; ++m) {
      const std::uint64_t bits = segment_bits[parity][team * team_warps + m];
      if (m < member) base += bits;
      total += bits;
    }
    ok = ok && (total + 31) / 32 == r.word_count;
    if (ok) {
      // B. Decode the segment from its first bit.
      Window window{windows[warp]};
      decode_segment<T, false>(r, chunk_begin, chunk_end, base, out, window, stream_end(a), lane);
    } else {
      zero_elements<T>(out, 0, r.n, team_lane, team_lanes);
      if (team_lane == 0) atomicOr(a.status, kCorrupt);
    }
    if (a.gather) zero_elements<T>(out, r.n, a.row_elements, team_lane, team_lanes);
  }
}

template <unsigned kSize>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, 4)
    ibp_decode_kernel(const __grid_constant__ IbpDecodeKernelArgs a, unsigned team_warps) {
  using T = typename Element<kSize>::type;
  __shared__ __align__(16) std::uint32_t windows[kWarpsPerBlock][kWindowWords];
  if (team_warps == 1) {
    decode_items_by_warps<T>(a, std::uint64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32,
                             std::uint64_t{gridDim.x} * kWarpsPerBlock, threadIdx.x & 31, windows);
  } else {
    decode_items_by_teams<T>(a, team_warps, windows);
  }
}

// Warps per item: one, unless the items are too few to keep the GPU busy (about 24 warps per
// SM; fewer leave memory latency exposed); then 2, 4 or 8, while each keeps >= 8 chunks of a row.
template <unsigned kSize>
unsigned team_warps(std::uint64_t items, std::uint64_t row_elements, unsigned sm_count) {
  constexpr std::uint64_t kChunk = 32 * (kSize < 4 ? 4 / kSize : 1);
  const std::uint64_t chunks = (row_elements + kChunk - 1) / kChunk;
  const std::uint64_t wanted = std::uint64_t{sm_count} * 24;
  unsigned warps = 1;
  while (warps < kWarpsPerBlock && items * warps < wanted && chunks >= 16 * std::uint64_t{warps}) {
    warps *= 2;
  }
  return warps;
}

template <unsigned kSize>
cudaError_t enqueue(const IbpDecodeKernelArgs& launch, unsigned max_blocks, cudaStream_t stream) {
  const unsigned team =
      team_warps<kSize>(launch.items, launch.row_elements, max_blocks / kBlocksPerSm);
  const unsigned items_per_block = kWarpsPerBlock / team;
  const std::uint64_t wanted = (launch.items + items_per_block - 1) / items_per_block;
  const unsigned blocks =
      static_cast<unsigned>(wanted < max_blocks ? wanted : (max_blocks == 0 ? 1 : max_blocks));
  ibp_decode_kernel<kSize><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(launch, team);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_ibp_decode(const IbpDecodeKernelArgs& launch, unsigned max_blocks,
                              cudaStream_t stream) {
  (void)cudaGetLastError();  // see launch_fill
  const auto misaligned = [](const void* p, std::uintptr_t unit) {
    return (reinterpret_cast<std::uintptr_t>(p) & (unit - 1)) != 0;
  };
  const std::uint32_t es = launch.element_size;
  if ((es != 1 && es != 2 && es != 4 && es != 8) || launch.items == 0 || launch.rows == 0 ||
      launch.group_rows == 0 || launch.stream == nullptr || misaligned(launch.stream, 8) ||
      launch.tables == nullptr || misaligned(launch.tables, 8) || launch.row_tables == nullptr ||
      misaligned(launch.row_tables, 8) || misaligned(launch.output, es) ||
      misaligned(launch.status, 4) ||
      (launch.gather && (launch.indices == nullptr || misaligned(launch.indices, 4)))) {
    return cudaErrorInvalidValue;
  }
  if (const cudaError_t error = cudaMemsetAsync(launch.status, 0, 4, stream);
      error != cudaSuccess) {
    return error;
  }
  switch (es) {
    case 1: return enqueue<1>(launch, max_blocks, stream);
    case 2: return enqueue<2>(launch, max_blocks, stream);
    case 4: return enqueue<4>(launch, max_blocks, stream);
    default: return enqueue<8>(launch, max_blocks, stream);
  }
}

}  // namespace ferry::cuda
