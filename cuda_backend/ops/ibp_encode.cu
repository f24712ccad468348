// The ibp_encode kernels (ops::IbpEncodeArgs): one kernel per pass of runtime/src/ops/
// ibp_encode.hpp, the same algorithm as shaders/ibp_encode.comp with 64-bit values and positions.
// Integer code only.
#include <cstdint>

#include "ibp_encode_launch.hpp"

namespace ferry::cuda {
namespace {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

template <typename T>
__device__ T lesser(T a, T b) { return a < b ? a : b; }
template <typename T>
__device__ T greater(T a, T b) { return a < b ? b : a; }

constexpr u32 kCrcPoly = 0x82f63b78u;
__constant__ u32 kX2n[32] = {
    0x40000000u, 0x20000000u, 0x08000000u, 0x00800000u, 0x00008000u, 0x82f63b78u, 0x6ea2d55cu,
    0x18b8ea18u, 0x510ac59au, 0xb82be955u, 0xb8fdb1e7u, 0x88e56f72u, 0x74c360a4u, 0xe4172b16u,
    0x0d65762au, 0x35d73a62u, 0x28461564u, 0xbf455269u, 0xe2ea32dcu, 0xfe7740e6u, 0xf946610bu,
    0x3c204f8fu, 0x538586e3u, 0x59726915u, 0x734d5309u, 0xbc1ac763u, 0x7d0722ccu, 0xd289cabeu,
    0xe94ca9bcu, 0x05b74f3fu, 0xa51e1f42u, 0x40000000u};

enum Pass : u32 { clear, count, order, hist, choose, masks, lengths, reduce, top, down, groups,
                  offsets, rows_pass, crc, header };

constexpr u32 kHistWords = 17;
constexpr u32 kMaxWords = 64 * kIbpBlock / 32 + 2;
constexpr u32 kTable = 2 * kIbpBlock, kBitmap = 3 * kIbpBlock,
              kWords = 3 * kIbpBlock + 8;
constexpr u64 kLevelZero = ~u64{0};

struct Params {
  IbpEncodeKernelArgs a;
  u64 batch_first = 0, batch_groups = 0;
  u64 items = 0;       // scan: entries of the level read
  u64 level = kLevelZero, above = 0;  // scan: byte offsets in scratch of the level and above
};

struct Ctx {
  const Params& p;
  __device__ u32 bits() const { return p.a.element_size * 8; }
  __device__ u32 record_words() const { return 2 * bits() + 7 + bits() / 4; }
  __device__ u32* scratch() const { return static_cast<u32*>(p.a.scratch); }
  __device__ unsigned char* out() const { return static_cast<unsigned char*>(p.a.stream); }
  __device__ u32* out_word(u64 byte) const { return reinterpret_cast<u32*>(out() + byte); }
  __device__ u32* record(u64 batch_group, u64 column) const {
    return scratch() + (batch_group * p.a.row_elements + column) * record_words();
  }
  __device__ u64 full_mask() const { return bits() == 64 ? ~u64{0} : (u64{1} << bits()) - 1; }
  __device__ u64 load(const unsigned char* at) const {
    switch (p.a.element_size) {
      case 1: return *at;
      case 2: return *reinterpret_cast<const std::uint16_t*>(at);
      case 4: return *reinterpret_cast<const u32*>(at);
      default: return *reinterpret_cast<const u64*>(at);
    }
  }
  __device__ u64 element(u64 row, u64 column) const {
    return load(static_cast<const unsigned char*>(p.a.input) +
                (row * p.a.row_elements + column) * p.a.element_size);
  }
  __device__ u64 row_length(u64 row) const {
    const u64 first = row * p.a.row_elements;
    return lesser(p.a.row_elements, p.a.elements - first);
  }
  __device__ u64 group_end(u64 group) const {
    return lesser(p.a.rows, group * p.a.group_rows + p.a.group_rows);
  }
  __device__ u64 column_count(u64 group, u64 column) const {
    const u64 end = group_end(group);
    u64 n = end - group * p.a.group_rows;
    if (end == p.a.rows && column >= row_length(p.a.rows - 1)) --n;
    return n;
  }
  __device__ u64 slices() const { return (p.a.group_rows + kIbpSliceRows - 1) / kIbpSliceRows; }
  __device__ u64 mask_of(u64 group, u64 column) const {
    return load(out() + p.a.masks_offset + group * p.a.mask_block_bytes + column * p.a.element_size);
  }
  __device__ u64 value_of(u64 group, u64 column) const {
    return load(out() + p.a.masks_offset + group * p.a.mask_block_bytes +
                (p.a.row_elements + column) * p.a.element_size);
  }
  __device__ u64 group_start(u64 group) const {
    return *reinterpret_cast<const u64*>(out() + 64 + 8 * group);
  }
  __device__ u32* row_entry(u64 row) const { return out_word(p.a.row_table_offset + 4 * row); }
  __device__ u64& data_bytes() const {
    return *reinterpret_cast<u64*>(static_cast<unsigned char*>(p.a.scratch) + p.a.data_bytes_offset);
  }
  __device__ u64* sums(u64 offset) const {
    return reinterpret_cast<u64*>(static_cast<unsigned char*>(p.a.scratch) + offset);
  }
};

// Item i of the count and histogram passes: (batch group, row slice, column).
__device__ void slice_of(const Ctx& x, u64 i, u64& batch_group, u64& first_row, u64& end_row,
                         u64& column) {
  column = i % x.p.a.row_elements;
  const u64 rest = i / x.p.a.row_elements;
  batch_group = rest / x.slices();
  const u64 group = x.p.batch_first + batch_group;
  first_row = group * x.p.a.group_rows + (rest % x.slices()) * kIbpSliceRows;
  end_row = lesser(x.group_end(group), first_row + kIbpSliceRows);
}

__device__ void count_item(const Ctx& x, u64 i) {
  u64 batch_group, first_row, end_row, column;
  slice_of(x, i, batch_group, first_row, end_row, column);
  u64 counter[8] = {};  // bit-sliced: counter k holds bit k of every position's count
  for (u64 row = first_row; row < end_row; ++row) {
    if (column >= x.row_length(row)) continue;
    u64 carry = x.element(row, column);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const u64 next = counter[k] & carry;
      counter[k] ^= carry;
      carry = next;
    }
  }
  u32* rec = x.record(batch_group, column);
  for (u32 b = 0; b < x.bits(); ++b) {
    u32 ones = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) ones |= static_cast<u32>((counter[k] >> b) & 1) << k;
    if (ones != 0) atomicAdd(rec + b, ones);
  }
}

__device__ u64 agreement(u64 ones, u64 n) { return greater(ones, n - ones); }

__device__ void order_item(const Ctx& x, u64 i) {
  const u64 batch_group = i / x.p.a.row_elements, column = i % x.p.a.row_elements;
  const u64 n = x.column_count(x.p.batch_first + batch_group, column);
  u32* rec = x.record(batch_group, column);
  const u32 w = x.bits();
  u64 majority = 0;
  for (u32 b = 0; b < w; ++b) {
    if (2 * u64{rec[b]} > n) majority |= u64{1} << b;
  }
  rec[2 * w + 1] = static_cast<u32>(majority);
  rec[2 * w + 2] = static_cast<u32>(majority >> 32);
  for (u32 q = 0; q < w / 4; ++q) {
    u32 packed = 0;
    for (u32 j = 0; j < 4; ++j) {
      const u32 b = 4 * q + j;
      const u64 a = agreement(rec[b], n);
      u32 rank = 0;
      for (u32 other = 0; other < w; ++other) {
        const u64 a2 = agreement(rec[other], n);
        if (a2 > a || (a2 == a && other > b)) ++rank;
      }
      packed |= rank << (8 * j);
    }
    rec[2 * w + 7 + q] = packed;
  }
}

__device__ u32 rank_of(const u32* rec, u32 w, u32 b) {
  return (rec[2 * w + 7 + b / 4] >> (8 * (b % 4))) & 0xff;
}
__device__ u64 pair(const u32* at) { return at[0] | u64{at[1]} << 32; }

__device__ void hist_item(const Ctx& x, u64 i, u32* sh) {
  u64 batch_group, first_row, end_row, column;
  slice_of(x, i, batch_group, first_row, end_row, column);
  u32* rec = x.record(batch_group, column);
  const u32 w = x.bits();
  const u64 majority = pair(rec + 2 * w + 1);
  u32* mine = sh + threadIdx.x * kHistWords;  // this thread's byte counters
  for (u32 k = 0; k < kHistWords; ++k) mine[k] = 0;
  for (u64 row = first_row; row < end_row; ++row) {
    if (column >= x.row_length(row)) continue;
    u64 differ = x.element(row, column) ^ majority;
    u32 kmax = w;
    while (differ != 0) {
      kmax = lesser(kmax, rank_of(rec, w, static_cast<u32>(__ffsll(static_cast<long long>(differ)) - 1)));
      differ &= differ - 1;
    }
    mine[kmax / 4] += 1u << (8 * (kmax % 4));
  }
  for (u32 k = 0; k <= w; ++k) {
    const u32 n = (mine[k / 4] >> (8 * (k % 4))) & 0xff;
    if (n != 0) atomicAdd(rec + w + k, n);
  }
}

__device__ void choose_item(const Ctx& x, u64 i) {
  const u64 batch_group = i / x.p.a.row_elements, column = i % x.p.a.row_elements;
  u32* rec = x.record(batch_group, column);
  const u32 w = x.bits();
  u64 m = 0, best = 0;
  u32 best_k = 0;
  for (u32 step = 0; step <= w; ++step) {
    const u32 k = w - step;
    m += rec[w + k];
    if (k * m >= best) {  // descending k: equal products go to the smaller k
      best = k * m;
      best_k = k;
    }
  }
  u64 mask = 0;
  for (u32 b = 0; b < w; ++b) {
    if (rank_of(rec, w, b) < best_k) mask |= u64{1} << b;
  }
  const u64 value = pair(rec + 2 * w + 1) & mask;
  rec[2 * w + 3] = static_cast<u32>(mask);
  rec[2 * w + 4] = static_cast<u32>(mask >> 32);
  rec[2 * w + 5] = static_cast<u32>(value);
  rec[2 * w + 6] = static_cast<u32>(value >> 32);
}

__device__ void masks_item(const Ctx& x, u64 i) {
  const u64 block_words = x.p.a.mask_block_bytes / 4;
  const u64 batch_group = i / block_words, word = i % block_words;
  const u64 es = x.p.a.element_size, half = x.p.a.row_elements * es;
  u32 out = 0;
  for (u32 j = 0; j < 4; ++j) {
    const u64 pos = 4 * word + j;
    u32 byte = 0;
    if (pos < 2 * half) {
      const u64 at = pos < half ? pos : pos - half;
      const u64 v = pair(x.record(batch_group, at / es) + 2 * x.bits() + (pos < half ? 3 : 5));
      byte = static_cast<u32>(v >> (8 * (at % es))) & 0xff;
    }
    out |= byte << (8 * j);
  }
  const u64 group = x.p.batch_first + batch_group;
  *x.out_word(x.p.a.masks_offset + group * x.p.a.mask_block_bytes + 4 * word) = out;
}

// Block sum of three values (shared kScan .. 3 x kIbpBlock). Every thread calls it.
__device__ void block_sum3(u64 v[3], u64* sh64) {
  const u32 t = threadIdx.x;
  __syncthreads();
  for (int j = 0; j < 3; ++j) sh64[j * kIbpBlock + t] = v[j];
  __syncthreads();
  for (u32 s = kIbpBlock / 2; s > 0; s >>= 1) {
    if (t < s) {
      for (int j = 0; j < 3; ++j) sh64[j * kIbpBlock + t] += sh64[j * kIbpBlock + t + s];
    }
    __syncthreads();
  }
  for (int j = 0; j < 3; ++j) v[j] = sh64[j * kIbpBlock];
  __syncthreads();
}

__device__ void lengths_row(const Ctx& x, u64 row, u64* sh64) {
  const u32 t = threadIdx.x;
  const u64 group = row / x.p.a.group_rows, n = x.row_length(row);
  const u32 w = x.bits();
  u64 v[3] = {0, 0, 0};  // unmatched, bits in mode 0, bits in mode 1
  for (u64 c = t; c < n; c += kIbpBlock) {
    const u64 e = x.element(row, c), mask = x.mask_of(group, c);
    const u32 variable = w - static_cast<u32>(__popcll(mask));
    v[2] += variable;
    if ((e & mask) == x.value_of(group, c)) {
      v[1] += variable;
    } else {
      v[0] += 1;
      v[1] += w;
    }
  }
  block_sum3(v, sh64);
  if (t != 0) return;
  u64 entry;
  if (v[0] == 0) {
    entry = (v[2] + 31) / 32 * 4 | 1;
  } else {
    const u64 bitmap_size = (n + 31) / 32 * 4 + (v[1] + 31) / 32 * 4;
    const u64 raw_size = (n * x.p.a.element_size + 3) / 4 * 4;
    entry = bitmap_size < raw_size ? bitmap_size : (raw_size | 2);
  }
  *x.row_entry(row) = static_cast<u32>(entry);
}

// Exclusive scan of one value per thread over the block; the total in `total`.
__device__ u64 block_scan(u64 v, u64& total, u64* sh64) {
  const u32 t = threadIdx.x;
  __syncthreads();
  u32 from = 0, to = kIbpBlock;
  sh64[from + t] = v;
  __syncthreads();
  for (u32 s = 1; s < kIbpBlock; s <<= 1) {
    sh64[to + t] = sh64[from + t] + (t >= s ? sh64[from + t - s] : 0);
    __syncthreads();
    const u32 swap = from;
    from = to;
    to = swap;
  }
  total = sh64[from + kIbpBlock - 1];
  const u64 inclusive = sh64[from + t];
  __syncthreads();
  return inclusive - v;
}

__device__ u64 scan_item(const Ctx& x, u64 i) {
  return x.p.level == kLevelZero ? (*x.row_entry(i) & ~3u) : x.sums(x.p.level)[i];
}

__device__ void block_prefixes(const Ctx& x, u64 block, u64 base, u64 items[4], u64 prefix[4],
                               u64* sh64) {
  const u64 first = block * kIbpScanBlock + 4 * threadIdx.x;
  for (int j = 0; j < 4; ++j) items[j] = first + j < x.p.items ? scan_item(x, first + j) : 0;
  u64 total;
  prefix[0] = base + block_scan(items[0] + items[1] + items[2] + items[3], total, sh64);
  for (int j = 1; j < 4; ++j) prefix[j] = prefix[j - 1] + items[j - 1];
}

__device__ void reduce_block(const Ctx& x, u64 block, u64* sh64) {
  const u64 first = block * kIbpScanBlock + 4 * threadIdx.x;
  u64 v[3] = {0, 0, 0};
  for (u64 j = 0; j < 4; ++j) {
    if (first + j < x.p.items) v[0] += scan_item(x, first + j);
  }
  block_sum3(v, sh64);
  if (threadIdx.x == 0) x.sums(x.p.above)[block] = v[0];
}

__device__ void down_block(const Ctx& x, u64 block, u64* sh64, u32 pass) {
  u64 items[4], prefix[4];
  const u64 base = pass == top ? 0 : x.sums(x.p.above)[block];
  block_prefixes(x, block, base, items, prefix, sh64);
  const u64 first = block * kIbpScanBlock + 4 * threadIdx.x;
  if (x.p.level != kLevelZero) {
    for (u64 j = 0; j < 4; ++j) {
      if (first + j < x.p.items) x.sums(x.p.level)[first + j] = prefix[j];
    }
    if (pass == top && threadIdx.x == kIbpBlock - 1) {
      const u64 data_bytes = prefix[3] + items[3];
      x.data_bytes() = data_bytes;
      *reinterpret_cast<u64*>(x.out() + 64 + 8 * x.p.a.group_count) = data_bytes;
    }
    return;
  }
  for (u64 j = 0; j < 4; ++j) {
    const u64 row = first + j;
    if (row >= x.p.items) continue;
    const u64 group = row / x.p.a.group_rows;
    if (pass == groups) {
      if (row % x.p.a.group_rows == 0) {
        *reinterpret_cast<u64*>(x.out() + 64 + 8 * group) = prefix[j];
      }
    } else {
      u32* entry = x.row_entry(row);
      *entry = static_cast<u32>(prefix[j] - x.group_start(group)) | (*entry & 3u);
    }
  }
  if (pass == offsets && block == 0 && threadIdx.x == 0 && x.p.a.rows % 2 == 1) {
    *x.row_entry(x.p.a.rows) = 0;  // padding
  }
}

__device__ u64 pext(u64 v, u64 m) {
  u64 result = 0;
  u32 k = 0;
  while (m != 0) {
    const int b = __ffsll(static_cast<long long>(m)) - 1;
    result |= ((v >> b) & 1) << k;
    ++k;
    m &= m - 1;
  }
  return result;
}

// ORs a field (nothing above its length set) at bit `pos` of the chunk's words.
__device__ void place(u32* words, u32 pos, u64 v) {
  const u32 w = pos >> 5, s = pos & 31;
  const u32 lo = static_cast<u32>(v), hi = static_cast<u32>(v >> 32);
  if ((lo << s) != 0) atomicOr(words + w, lo << s);
  const u32 second = s == 0 ? hi : (lo >> (32 - s)) | (hi << s);
  const u32 third = s == 0 ? 0 : hi >> (32 - s);
  if (second != 0) atomicOr(words + w + 1, second);
  if (third != 0) atomicOr(words + w + 2, third);
}

__device__ void write_row(const Ctx& x, u64 row, u32* sh, u64* sh64) {
  const u32 t = threadIdx.x;
  const u64 group = row / x.p.a.group_rows, n = x.row_length(row);
  const u32 entry = *x.row_entry(row);
  const u32 mode = entry & 3;
  u32* start = x.out_word(x.p.a.data_offset + x.group_start(group) + (entry & ~3u));
  const u64 bitmap_words = mode == 0 ? (n + 31) / 32 : 0;
  u32* cursor = start + bitmap_words;
  u32* words = sh + 2 * kWords;  // after the 64-bit scan buffers
  u32* bitmap = sh + 2 * kBitmap;
  u32 carry = 0, carry_bits = 0;
  const u32 w = x.bits();
  for (u64 first = 0; first < n; first += kIbpBlock) {
    const u64 c = first + t;
    u64 field = 0;
    u32 length = 0;
    bool matched = false;
    if (c < n) {
      const u64 e = x.element(row, c);
      if (mode == 2) {
        field = e;
        length = w;
      } else {
        const u64 mask = x.mask_of(group, c);
        matched = (e & mask) == x.value_of(group, c);
        if (matched) {
          const u64 variable = ~mask & x.full_mask();
          field = pext(e, variable);
          length = static_cast<u32>(__popcll(variable));
        } else {
          field = e;
          length = w;
        }
      }
    }
    __syncthreads();
    for (u32 i = t; i < kMaxWords; i += kIbpBlock) words[i] = i == 0 ? carry : 0;
    if (t < 8) bitmap[t] = 0;
    u64 total;
    const u64 offset = block_scan(length, total, sh64);
    if (length != 0) place(words, carry_bits + static_cast<u32>(offset), field);
    if (mode == 0 && matched) atomicOr(bitmap + t / 32, 1u << (t % 32));
    __syncthreads();
    const u32 end_bits = carry_bits + static_cast<u32>(total), full = end_bits / 32;
    for (u32 i = t; i < full; i += kIbpBlock) cursor[i] = words[i];
    if (mode == 0 && t < 8 && first / 32 + t < bitmap_words) start[first / 32 + t] = bitmap[t];
    carry = words[full];
    carry_bits = end_bits % 32;
    cursor += full;
  }
  if (t == 0 && carry_bits != 0) *cursor = carry;
}

__device__ u32 multmodp(u32 a, u32 b) {
  u32 m = 1u << 31, p = 0;
  for (int i = 0; i < 32; ++i) {
    if (a & m) p ^= b;
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kCrcPoly : b >> 1;
  }
  return p;
}
__device__ u32 shift_bytes(u64 n) {
  u32 p = 1u << 31, k = 3;
  while (n != 0) {
    if (n & 1) p = multmodp(kX2n[k & 31], p);
    n >>= 1;
    ++k;
  }
  return p;
}
__device__ void make_crc_table(u32* table) {
  u32 c = threadIdx.x;
  for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrcPoly : c >> 1;
  table[threadIdx.x] = c;
  __syncthreads();
}
__device__ u32 crc_word(const u32* table, u32 crc, u32 word) {
  for (int k = 0; k < 4; ++k) crc = table[(crc ^ (word >> (8 * k))) & 0xff] ^ (crc >> 8);
  return crc;
}

// CRC-32C of stream bytes [first, first + length) by the block (shaders/ibp_encode.comp's
// workgroup_crc: lanes of `lane` bytes, the bytes at their end, lanes combined by shifts).
__device__ u32 block_crc(const Ctx& x, u64 first, u64 length, u64 lane, const u32* table,
                         u32* lanes) {
  const u32 t = threadIdx.x;
  const u64 lead = kIbpBlock * lane - length;
  u32 crc = 0;
  for (u64 v = t * lane; v < (t + 1) * lane; v += 4) {
    if (v >= lead) crc = crc_word(table, crc, *x.out_word(first + v - lead));
  }
  __syncthreads();
  lanes[t] = crc;
  __syncthreads();
  for (u32 s = 1; s < kIbpBlock; s <<= 1) {
    if (t % (2 * s) == 0) lanes[t] = multmodp(lanes[t], shift_bytes(s * lane)) ^ lanes[t + s];
    __syncthreads();
  }
  const u32 raw = lanes[0];
  __syncthreads();
  return ~(multmodp(shift_bytes(length), 0xffffffffu) ^ raw);
}

__global__ void __launch_bounds__(kIbpBlock) ibp_encode_kernel(const __grid_constant__ Params params,
                                                               u32 pass) {
  __shared__ u64 sh64[kIbpBlock * kHistWords / 2 + 1];
  u32* sh = reinterpret_cast<u32*>(sh64);
  const Ctx x{params};
  const u64 stride = u64{gridDim.x} * kIbpBlock;
  const u64 thread = u64{blockIdx.x} * kIbpBlock + threadIdx.x;
  const u64 columns = params.batch_groups * params.a.row_elements;
  switch (pass) {
    case clear: {
      const u64 words = columns * x.record_words();
      for (u64 i = thread; i < words; i += stride) x.scratch()[i] = 0;
      break;
    }
    case count:
    case hist:
      for (u64 i = thread; i < columns * x.slices(); i += stride) {
        if (pass == count) count_item(x, i); else hist_item(x, i, sh);
      }
      break;
    case order:
    case choose:
      for (u64 i = thread; i < columns; i += stride) {
        if (pass == order) order_item(x, i); else choose_item(x, i);
      }
      break;
    case masks:
      for (u64 i = thread; i < params.batch_groups * (params.a.mask_block_bytes / 4); i += stride)
        masks_item(x, i);
      break;
    case lengths:
    case rows_pass:
      for (u64 row = blockIdx.x; row < params.a.rows; row += gridDim.x) {
        if (pass == lengths) lengths_row(x, row, sh64); else write_row(x, row, sh, sh64);
      }
      break;
    case reduce:
    case down:
    case groups:
    case offsets: {
      const u64 blocks = (params.items + kIbpScanBlock - 1) / kIbpScanBlock;
      for (u64 block = blockIdx.x; block < blocks; block += gridDim.x) {
        if (pass == reduce) reduce_block(x, block, sh64); else down_block(x, block, sh64, pass);
      }
      break;
    }
    case top:
      down_block(x, 0, sh64, top);
      break;
    case crc: {
      u32* table = sh + 2 * kTable;
      u32* lanes = sh + 2 * kTable + kIbpBlock;
      make_crc_table(table);
      const u64 end = params.a.data_offset + x.data_bytes();
      const u64 chunks = (end - 64 + 65535) / 65536;
      for (u64 chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const u64 first = 64 + chunk * 65536;
        const u32 value = block_crc(x, first, lesser(u64{65536}, end - first), 65536 / kIbpBlock,
                                    table, lanes);
        if (threadIdx.x == 0) *x.out_word(end + 4 * chunk) = value;
      }
      break;
    }
    case header: {
      u32* table = sh + 2 * kTable;
      u32* lanes = sh + 2 * kTable + kIbpBlock;
      make_crc_table(table);
      const u64 data_bytes = x.data_bytes();
      const u64 end = params.a.data_offset + data_bytes;
      const u64 chunks = (end - 64 + 65535) / 65536;
      const u32 table_crc = block_crc(x, end, 4 * chunks, 4 * ((chunks + kIbpBlock - 1) / kIbpBlock),
                                      table, lanes);
      if (threadIdx.x != 0) break;
      u32 h[16];
      h[0] = 0x52524546u;  // "FERR"
      h[1] = 0x50424959u;  // "YIBP"
      h[2] = 1u | (params.a.element_size << 16) | ((params.a.header >> 8) << 24);
      h[3] = params.a.header & 0xff;
      h[4] = params.a.group_rows;
      h[5] = 0;
      const u64 fields[4] = {params.a.rows, params.a.row_elements, params.a.elements, data_bytes};
      for (int i = 0; i < 4; ++i) {
        h[6 + 2 * i] = static_cast<u32>(fields[i]);
        h[7 + 2 * i] = static_cast<u32>(fields[i] >> 32);
      }
      h[14] = table_crc;
      u32 c = 0xffffffffu;
      for (int i = 0; i < 15; ++i) c = crc_word(table, c, h[i]);
      h[15] = ~c;
      for (int i = 0; i < 16; ++i) *x.out_word(4 * i) = h[i];
      break;
    }
    default:
      break;
  }
}

unsigned grid(u64 blocks, unsigned max_blocks) {
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}
u64 per_thread(u64 items) { return (items + kIbpBlock - 1) / kIbpBlock; }

}  // namespace

cudaError_t launch_ibp_encode(const IbpEncodeKernelArgs& launch, unsigned max_blocks,
                              cudaStream_t stream) {
  (void)cudaGetLastError();  // see launch_fill
  if (launch.rows == 0 || launch.row_elements == 0 || launch.group_rows == 0 ||
      launch.scan_levels == 0 || launch.scan_levels > kIbpMaxScanLevels ||
      launch.batch_groups == 0 || launch.input == nullptr || launch.stream == nullptr ||
      launch.scratch == nullptr) {
    return cudaErrorInvalidValue;
  }
  // The row and scan passes take one block per row or block of entries: many more than the
  // grid-stride cap when there are many (up to the grid's limit).
  const unsigned max_row_blocks = 1u << 30;
  Params p;
  p.a = launch;
  auto run = [&](u32 pass, u64 blocks, unsigned cap) {
    ibp_encode_kernel<<<grid(blocks, cap), kIbpBlock, 0, stream>>>(p, pass);
  };
  const u64 slices = (launch.group_rows + kIbpSliceRows - 1) / kIbpSliceRows;
  const u64 record_words = 2 * 8 * launch.element_size + 7 + 8 * launch.element_size / 4;
  for (u64 batch = 0; batch < launch.group_count; batch += launch.batch_groups) {
    p.batch_first = batch;
    p.batch_groups = launch.group_count - batch < launch.batch_groups ? launch.group_count - batch
                                                                        : launch.batch_groups;
    const u64 columns = p.batch_groups * launch.row_elements;
    run(clear, per_thread(columns * record_words), max_blocks);
    run(count, per_thread(columns * slices), max_row_blocks);
    run(order, per_thread(columns), max_row_blocks);
    run(hist, per_thread(columns * slices), max_row_blocks);
    run(choose, per_thread(columns), max_row_blocks);
    run(masks, per_thread(p.batch_groups * launch.mask_block_bytes / 4), max_blocks);
  }
  run(lengths, launch.rows, max_row_blocks);
  const unsigned levels = launch.scan_levels;
  for (unsigned level = 0; level < levels; ++level) {
    p.items = level == 0 ? launch.rows : launch.scan_items[level - 1];
    p.level = level == 0 ? kLevelZero : launch.scan_offsets[level - 1];
    p.above = launch.scan_offsets[level];
    run(reduce, launch.scan_items[level], max_row_blocks);
  }
  p.items = launch.scan_items[levels - 1];
  p.level = launch.scan_offsets[levels - 1];
  run(top, 1, 1);
  for (unsigned level = levels; level-- > 1;) {
    p.items = launch.scan_items[level - 1];
    p.level = launch.scan_offsets[level - 1];
    p.above = launch.scan_offsets[level];
    run(down, launch.scan_items[level], max_row_blocks);
  }
  p.items = launch.rows;
  p.level = kLevelZero;
  p.above = launch.scan_offsets[0];
  run(groups, launch.scan_items[0], max_row_blocks);
  run(offsets, launch.scan_items[0], max_row_blocks);
  run(rows_pass, launch.rows, max_row_blocks);
  const u64 payload = launch.max_stream_bytes - 64;
  run(crc, (payload + 65535) / 65536, max_row_blocks);
  run(header, 1, 1);
  return cudaGetLastError();
}

}  // namespace ferry::cuda
