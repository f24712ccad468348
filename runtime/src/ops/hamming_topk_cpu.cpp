// hamming_topk on the CPU backend: the reference every backend must match, and a fast search
// (ops/hamming_topk.hpp has the scheme). Distances are at most 4096, so they are kept as uint16.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/host_workers.hpp"
#include "ops/hamming_topk.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 reports the _mm512_undefined_epi32() inside its own unpack intrinsics as maybe
// uninitialized (a false positive in the header, fixed in later releases).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define FERRY_HAMMING_X86 1
// The instruction sets of the vectorized paths, as [[gnu::target]] strings.
#define FERRY_TARGET_POPCNT gnu::target("popcnt")
#define FERRY_TARGET_AVX2 gnu::target("avx2,popcnt")
#define FERRY_TARGET_AVX512 \
  gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx512vpopcntdq,avx2,popcnt")
#endif

namespace ferry::ops {

namespace {

constexpr std::uint32_t kBlockQueries = 8;       // queries whose distances one kernel call computes
constexpr std::uint32_t kGroupRows = 8;          // rows side by side in the blocked layout
constexpr std::uint32_t kMaxBlockRows = 1024;    // rows per block (fewer for long codes)
constexpr std::uint64_t kBlockBytes = 32 << 10;  // a block's codes: they stay in the L1 cache
constexpr std::uint16_t kAnyDistance = 0x7FFF;   // a limit above every distance (<= 4096)
constexpr std::uint32_t kMaxWords = kHammingMaxCodeBits / 64;

// A block of rows is first copied into the blocked layout: groups of kGroupRows rows, and in a
// group word w of its rows side by side (group[w * kGroupRows + lane]), the last group padded
// with zeros. A vector register then holds one word of 8 (or 4) rows, and the distances of a
// query to them are sums of popcounts lane by lane, with no sums across lanes. The copy is made
// once per block and used by all the task's queries.
//
// A kernel: the distances of `count` <= kBlockQueries queries (`words` 64-bit words each,
// contiguous) to the `groups` groups at `blocked`: out[q * kMaxBlockRows + row] (padding rows
// included).
using DistanceKernel = void (*)(const std::uint64_t* queries, std::uint32_t count,
                                const std::uint64_t* blocked, std::uint32_t groups,
                                std::uint32_t words, std::uint16_t* out);
// `groups` full groups of rows (`words` words each) at `codes` into the blocked layout.
using BlockKernel = void (*)(const std::byte* codes, std::uint32_t groups, std::uint32_t words,
                             std::uint64_t* blocked);
// The first i in [begin, end) with distance[i] < limit (limit <= kAnyDistance), else end.
using BelowKernel = std::uint32_t (*)(const std::uint16_t* distance, std::uint32_t begin,
                                      std::uint32_t end, std::uint16_t limit);

struct Kernels {
  BlockKernel block;
  DistanceKernel distances;
  BelowKernel first_below;
};

std::uint64_t load_word(const std::byte* at) {
  std::uint64_t word = 0;
  std::memcpy(&word, at, sizeof word);
  return word;
}

template <std::uint32_t kWords>  // 0: `words` at run time
[[gnu::always_inline]] inline void scalar_block(const std::byte* codes, std::uint32_t groups,
                                                std::uint32_t words, std::uint64_t* blocked) {
  const std::uint32_t n = kWords != 0 ? kWords : words;
  for (std::uint32_t g = 0; g < groups; ++g) {
    const std::byte* rows = codes + std::size_t{g} * kGroupRows * n * 8;
    std::uint64_t* group = blocked + std::size_t{g} * n * kGroupRows;
    for (std::uint32_t lane = 0; lane < kGroupRows; ++lane) {
      for (std::uint32_t w = 0; w < n; ++w)
        group[w * kGroupRows + lane] = load_word(rows + (lane * n + w) * 8);
    }
  }
}

void portable_block(const std::byte* codes, std::uint32_t groups, std::uint32_t words,
                    std::uint64_t* blocked) {
  switch (words) {
    case 1: return scalar_block<1>(codes, groups, words, blocked);
    case 2: return scalar_block<2>(codes, groups, words, blocked);
    case 4: return scalar_block<4>(codes, groups, words, blocked);
    default: return scalar_block<0>(codes, groups, words, blocked);
  }
}

// `rows` rows at `codes` into the blocked layout: the full groups by the path's kernel, the last
// one padded with zeros.
void block_rows(const Kernels& kernels, const std::byte* codes, std::uint32_t rows,
                std::uint32_t words, std::uint64_t* blocked) {
  const std::uint32_t full = rows / kGroupRows;
  kernels.block(codes, full, words, blocked);
  const std::uint32_t lanes = rows % kGroupRows;
  if (lanes == 0) return;
  std::uint64_t* group = blocked + std::size_t{full} * words * kGroupRows;
  const std::byte* first = codes + std::size_t{full} * kGroupRows * words * 8;
  for (std::uint32_t lane = 0; lane < kGroupRows; ++lane) {
    for (std::uint32_t w = 0; w < words; ++w)
      group[w * kGroupRows + lane] = lane < lanes ? load_word(first + (lane * words + w) * 8) : 0;
  }
}

// ---- Portable: plain C++, compiled once as it is and once for the popcnt instruction ----

template <std::uint32_t kWords>  // 0: `words` at run time
[[gnu::always_inline]] inline void scalar_distances(const std::uint64_t* queries,
                                                    std::uint32_t count,
                                                    const std::uint64_t* blocked,
                                                    std::uint32_t groups, std::uint32_t words,
                                                    std::uint16_t* out) {
  const std::uint32_t n = kWords != 0 ? kWords : words;
  for (std::uint32_t g = 0; g < groups; ++g) {
    const std::uint64_t* group = blocked + std::size_t{g} * n * kGroupRows;
    for (std::uint32_t q = 0; q < count; ++q) {
      const std::uint64_t* code = queries + q * n;
      std::uint32_t distance[kGroupRows] = {};
#pragma GCC unroll 4
      for (std::uint32_t w = 0; w < n; ++w) {
#pragma GCC unroll 8
        for (std::uint32_t lane = 0; lane < kGroupRows; ++lane) {
          // The builtin, not std::popcount: a function of its own would not be compiled for
          // the popcnt instruction.
          distance[lane] += static_cast<std::uint32_t>(
              __builtin_popcountll(group[w * kGroupRows + lane] ^ code[w]));
        }
      }
      for (std::uint32_t lane = 0; lane < kGroupRows; ++lane)
        out[q * kMaxBlockRows + g * kGroupRows + lane] = static_cast<std::uint16_t>(distance[lane]);
    }
  }
}

// The common code lengths unrolled.
[[gnu::always_inline]] inline void scalar_distances_any(const std::uint64_t* queries,
                                                        std::uint32_t count,
                                                        const std::uint64_t* blocked,
                                                        std::uint32_t groups, std::uint32_t words,
                                                        std::uint16_t* out) {
  switch (words) {
    case 1: return scalar_distances<1>(queries, count, blocked, groups, words, out);
    case 2: return scalar_distances<2>(queries, count, blocked, groups, words, out);
    case 4: return scalar_distances<4>(queries, count, blocked, groups, words, out);
    default: return scalar_distances<0>(queries, count, blocked, groups, words, out);
  }
}

void portable_distances(const std::uint64_t* queries, std::uint32_t count,
                        const std::uint64_t* blocked, std::uint32_t groups, std::uint32_t words,
                        std::uint16_t* out) {
  scalar_distances_any(queries, count, blocked, groups, words, out);
}

// Four distances at a time: with every value below 0x8000 and limit <= 0x7FFF, the high bit of
// (0x8000 + d) - limit is clear exactly where d < limit, and no lane borrows from the next.
std::uint32_t portable_first_below(const std::uint16_t* distance, std::uint32_t begin,
                                   std::uint32_t end, std::uint16_t limit) {
  constexpr std::uint64_t kHigh = 0x8000800080008000ull;
  const std::uint64_t limits = std::uint64_t{limit} * 0x0001000100010001ull;
  std::uint32_t i = begin;
  for (; i + 4 <= end; i += 4) {
    std::uint64_t four = 0;
    std::memcpy(&four, distance + i, sizeof four);
    if ((~((four | kHigh) - limits) & kHigh) != 0) break;
  }
  for (; i < end; ++i) {
    if (distance[i] < limit) return i;
  }
  return end;
}

#if defined(FERRY_HAMMING_X86)

[[FERRY_TARGET_POPCNT]] void popcnt_distances(const std::uint64_t* queries, std::uint32_t count,
                                              const std::uint64_t* blocked, std::uint32_t groups,
                                              std::uint32_t words, std::uint16_t* out) {
  scalar_distances_any(queries, count, blocked, groups, words, out);
}

// ---- AVX2: popcounts by nibble lookup (vpshufb), a group as two halves of 4 rows ----

// Per byte of x, its popcount (0 to 8).
[[FERRY_TARGET_AVX2, gnu::always_inline]] inline __m256i avx2_byte_counts(__m256i x) {
  const __m256i table = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,  //
                                         0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i low = _mm256_shuffle_epi8(table, _mm256_and_si256(x, nibble));
  const __m256i high =
      _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble));
  return _mm256_add_epi8(low, high);
}

// The popcounts of words [w0, w1) of one half group (4 rows at `half`, a row per 64-bit lane)
// XOR the query's words, summed per lane. Byte counts add up in bytes for up to 31 words
// (31 * 8 < 256), then are widened.
[[FERRY_TARGET_AVX2, gnu::always_inline]] inline __m256i avx2_half_distances(
    const std::uint64_t* half, const std::uint64_t* code, std::uint32_t words) {
  __m256i total = _mm256_setzero_si256();
  for (std::uint32_t w0 = 0; w0 < words; w0 += 31) {
    __m256i bytes = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (std::uint32_t w = w0; w < std::min(words, w0 + 31); ++w) {
      const __m256i rows =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + w * kGroupRows));
      const __m256i query = _mm256_set1_epi64x(static_cast<long long>(code[w]));
      bytes = _mm256_add_epi8(bytes, avx2_byte_counts(_mm256_xor_si256(rows, query)));
    }
    total = _mm256_add_epi64(total, _mm256_sad_epu8(bytes, _mm256_setzero_si256()));
  }
  return total;
}

// Word w of a half group (4 rows) at `half`.
[[FERRY_TARGET_AVX2, gnu::always_inline]] inline void avx2_store_word(std::uint64_t* half,
                                                                      std::uint32_t w,
                                                                      __m256i value) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(half + w * kGroupRows), value);
}

[[FERRY_TARGET_AVX2]] void avx2_block(const std::byte* codes, std::uint32_t groups,
                                      std::uint32_t words, std::uint64_t* blocked) {
  const std::size_t row_bytes = std::size_t{words} * 8;
  const auto stride = static_cast<long long>(row_bytes);
  const __m256i offsets = _mm256_setr_epi64x(0, stride, 2 * stride, 3 * stride);
  for (std::uint32_t g = 0; g < groups; ++g) {
    for (std::uint32_t half = 0; half < 2; ++half) {
      const std::byte* rows = codes + (std::size_t{g} * kGroupRows + 4 * half) * row_bytes;
      std::uint64_t* out = blocked + std::size_t{g} * words * kGroupRows + 4 * half;
      if (words == 4) {  // a 4 x 4 transpose
        const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows));
        const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + 32));
        const __m256i r2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + 64));
        const __m256i r3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + 96));
        const __m256i even01 = _mm256_unpacklo_epi64(r0, r1), odd01 = _mm256_unpackhi_epi64(r0, r1);
        const __m256i even23 = _mm256_unpacklo_epi64(r2, r3), odd23 = _mm256_unpackhi_epi64(r2, r3);
        avx2_store_word(out, 0, _mm256_permute2x128_si256(even01, even23, 0x20));
        avx2_store_word(out, 1, _mm256_permute2x128_si256(odd01, odd23, 0x20));
        avx2_store_word(out, 2, _mm256_permute2x128_si256(even01, even23, 0x31));
        avx2_store_word(out, 3, _mm256_permute2x128_si256(odd01, odd23, 0x31));
      } else {
        for (std::uint32_t w = 0; w < words; ++w) {
          avx2_store_word(out, w, _mm256_i64gather_epi64(
                                      reinterpret_cast<const long long*>(rows + 8 * w), offsets, 1));
        }
      }
    }
  }
}

template <std::uint32_t kWords>  // 0: `words` at run time
[[FERRY_TARGET_AVX2]] void avx2_distances_of(const std::uint64_t* queries, std::uint32_t count,
                                             const std::uint64_t* blocked, std::uint32_t groups,
                                             std::uint32_t words, std::uint16_t* out) {
  const std::uint32_t n = kWords != 0 ? kWords : words;
  const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  for (std::uint32_t g = 0; g < groups; ++g) {
    const std::uint64_t* group = blocked + std::size_t{g} * n * kGroupRows;
    for (std::uint32_t q = 0; q < count; ++q) {
      const std::uint64_t* code = queries + q * n;
      const __m256i low = avx2_half_distances(group, code, n);       // rows 0-3
      const __m256i high = avx2_half_distances(group + 4, code, n);  // rows 4-7
      // Eight 64-bit sums (< 0x10000) as eight uint16.
      const __m128i low32 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(low, even));
      const __m128i high32 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(high, even));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + q * kMaxBlockRows + g * kGroupRows),
                       _mm_packus_epi32(low32, high32));
    }
  }
}

[[FERRY_TARGET_AVX2]] void avx2_distances(const std::uint64_t* queries, std::uint32_t count,
                                          const std::uint64_t* blocked, std::uint32_t groups,
                                          std::uint32_t words, std::uint16_t* out) {
  switch (words) {
    case 1: return avx2_distances_of<1>(queries, count, blocked, groups, words, out);
    case 2: return avx2_distances_of<2>(queries, count, blocked, groups, words, out);
    case 4: return avx2_distances_of<4>(queries, count, blocked, groups, words, out);
    default: return avx2_distances_of<0>(queries, count, blocked, groups, words, out);
  }
}

[[FERRY_TARGET_AVX2]] std::uint32_t avx2_first_below(const std::uint16_t* distance,
                                                     std::uint32_t begin, std::uint32_t end,
                                                     std::uint16_t limit) {
  const __m256i limits = _mm256_set1_epi16(static_cast<short>(limit));
  std::uint32_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(distance + i));
    // A signed compare: every value is below 0x8000.
    const auto below =
        static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpgt_epi16(limits, d)));
    if (below != 0) return i + static_cast<std::uint32_t>(std::countr_zero(below)) / 2;
  }
  return portable_first_below(distance, i, end, limit);
}

// ---- AVX-512 VPOPCNTDQ: a group's word in one register, 8 popcounts per instruction ----

[[FERRY_TARGET_AVX512]] void avx512_block(const std::byte* codes, std::uint32_t groups,
                                          std::uint32_t words, std::uint64_t* blocked) {
  const std::size_t row_bytes = std::size_t{words} * 8;
  const auto stride = static_cast<long long>(row_bytes);
  const __m512i offsets = _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
                                             _mm512_set1_epi64(stride));
  for (std::uint32_t g = 0; g < groups; ++g) {
    const std::byte* rows = codes + std::size_t{g} * kGroupRows * row_bytes;
    std::uint64_t* out = blocked + std::size_t{g} * words * kGroupRows;
    if (words == 2) {  // rows 0-3 and 4-7: even lanes are word 0, odd lanes word 1
      const __m512i a = _mm512_loadu_si512(rows), b = _mm512_loadu_si512(rows + 64);
      _mm512_storeu_si512(out, _mm512_permutex2var_epi64(
                                   a, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), b));
      _mm512_storeu_si512(out + 8, _mm512_permutex2var_epi64(
                                       a, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), b));
    } else if (words == 4) {  // row pairs; words 0-1 and 2-3 of 4 rows, then halves joined
      const __m512i p0 = _mm512_loadu_si512(rows), p1 = _mm512_loadu_si512(rows + 64);
      const __m512i p2 = _mm512_loadu_si512(rows + 128), p3 = _mm512_loadu_si512(rows + 192);
      const __m512i words01 = _mm512_setr_epi64(0, 4, 8, 12, 1, 5, 9, 13);
      const __m512i words23 = _mm512_setr_epi64(2, 6, 10, 14, 3, 7, 11, 15);
      const __m512i low01 = _mm512_permutex2var_epi64(p0, words01, p1);
      const __m512i high01 = _mm512_permutex2var_epi64(p2, words01, p3);
      const __m512i low23 = _mm512_permutex2var_epi64(p0, words23, p1);
      const __m512i high23 = _mm512_permutex2var_epi64(p2, words23, p3);
      _mm512_storeu_si512(out, _mm512_shuffle_i64x2(low01, high01, _MM_SHUFFLE(1, 0, 1, 0)));
      _mm512_storeu_si512(out + 8, _mm512_shuffle_i64x2(low01, high01, _MM_SHUFFLE(3, 2, 3, 2)));
      _mm512_storeu_si512(out + 16, _mm512_shuffle_i64x2(low23, high23, _MM_SHUFFLE(1, 0, 1, 0)));
      _mm512_storeu_si512(out + 24, _mm512_shuffle_i64x2(low23, high23, _MM_SHUFFLE(3, 2, 3, 2)));
    } else if (words == 1) {  // already in the layout
      _mm512_storeu_si512(out, _mm512_loadu_si512(rows));
    } else {
      for (std::uint32_t w = 0; w < words; ++w)
        _mm512_storeu_si512(out + w * kGroupRows, _mm512_i64gather_epi64(offsets, rows + 8 * w, 1));
    }
  }
}

template <std::uint32_t kWords>  // 0: `words` at run time
[[FERRY_TARGET_AVX512]] void avx512_distances_of(const std::uint64_t* queries,
                                                 std::uint32_t count,
                                                 const std::uint64_t* blocked,
                                                 std::uint32_t groups, std::uint32_t words,
                                                 std::uint16_t* out) {
  const std::uint32_t n = kWords != 0 ? kWords : words;
  for (std::uint32_t g = 0; g < groups; ++g) {
    const std::uint64_t* group = blocked + std::size_t{g} * n * kGroupRows;
    for (std::uint32_t q = 0; q < count; ++q) {
      const std::uint64_t* code = queries + q * n;
      __m512i sums = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (std::uint32_t w = 0; w < n; ++w) {
        const __m512i x = _mm512_xor_si512(_mm512_loadu_si512(group + w * kGroupRows),
                                           _mm512_set1_epi64(static_cast<long long>(code[w])));
        sums = _mm512_add_epi64(sums, _mm512_popcnt_epi64(x));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + q * kMaxBlockRows + g * kGroupRows),
                       _mm512_cvtepi64_epi16(sums));
    }
  }
}

[[FERRY_TARGET_AVX512]] void avx512_distances(const std::uint64_t* queries, std::uint32_t count,
                                              const std::uint64_t* blocked, std::uint32_t groups,
                                              std::uint32_t words, std::uint16_t* out) {
  switch (words) {
    case 1: return avx512_distances_of<1>(queries, count, blocked, groups, words, out);
    case 2: return avx512_distances_of<2>(queries, count, blocked, groups, words, out);
    case 4: return avx512_distances_of<4>(queries, count, blocked, groups, words, out);
    case 8: return avx512_distances_of<8>(queries, count, blocked, groups, words, out);
    default: return avx512_distances_of<0>(queries, count, blocked, groups, words, out);
  }
}

[[FERRY_TARGET_AVX512]] std::uint32_t avx512_first_below(const std::uint16_t* distance,
                                                         std::uint32_t begin, std::uint32_t end,
                                                         std::uint16_t limit) {
  const __m512i limits = _mm512_set1_epi16(static_cast<short>(limit));
  std::uint32_t i = begin;
  for (; i + 32 <= end; i += 32) {
    const __mmask32 below = _mm512_cmplt_epu16_mask(_mm512_loadu_si512(distance + i), limits);
    if (below != 0) return i + static_cast<std::uint32_t>(std::countr_zero(below));
  }
  return portable_first_below(distance, i, end, limit);
}

#endif  // FERRY_HAMMING_X86

Kernels kernels_of(HammingCpuPath path) {
#if defined(FERRY_HAMMING_X86)
  switch (path) {
    case HammingCpuPath::avx512: return {avx512_block, avx512_distances, avx512_first_below};
    case HammingCpuPath::avx2: return {avx2_block, avx2_distances, avx2_first_below};
    case HammingCpuPath::portable:
      if (__builtin_cpu_supports("popcnt"))
        return {portable_block, popcnt_distances, portable_first_below};
      break;
  }
#else
  (void)path;
#endif
  return {portable_block, portable_distances, portable_first_below};
}

// ---- The search ----

// A query's running k nearest: keys (distance << 32 | row, so that key order is the result's
// order) in a buffer of 2k, cut back to its k smallest (nth_element) when it is full. A task
// visits rows in ascending order, so once k keys are known, a row at the k-th key's distance or
// farther has a larger key than k others and is out: only distance < limit enters. Each entry
// costs O(1) amortized, whatever k (a heap would cost O(log k) per entry).
struct Nearest {
  std::uint64_t* keys;   // 2k
  std::uint32_t size;
  std::uint16_t limit;   // kAnyDistance until the first cut

  void add(std::uint64_t key, std::uint32_t k) {
    keys[size++] = key;
    if (size < 2 * k) return;
    std::nth_element(keys, keys + (k - 1), keys + size);
    size = k;
    limit = static_cast<std::uint16_t>(keys[k - 1] >> 32);
  }
  // The k smallest, sorted; returns their number.
  std::uint32_t finish(std::uint32_t k) {
    if (size > k) {
      std::nth_element(keys, keys + (k - 1), keys + size);
      size = k;
    }
    std::sort(keys, keys + size);
    return size;
  }
};

struct Search {
  HammingTopkArgs args;
  Kernels kernels;
  const std::byte* queries;
  const std::byte* database;
  std::byte* distances;  // outputs
  std::byte* indices;
  std::uint32_t words = 0;          // 64-bit words per code
  std::uint32_t block_rows = 0;     // a multiple of kGroupRows, at most kMaxBlockRows
  std::uint32_t group_queries = 0;  // per task (a multiple of kBlockQueries)
  std::uint32_t groups = 0;
  std::uint32_t parts = 1;          // row ranges
  std::uint32_t part_rows = 0;      // per range (a multiple of block_rows)
  std::vector<std::uint64_t> keys;     // [parts x queries x 2k]
  std::vector<std::uint32_t> sizes;    // [parts x queries]
  std::vector<std::uint16_t> limits;   // [parts x queries]
  std::vector<std::uint16_t> scratch;  // per task: [kBlockQueries x kMaxBlockRows] distances
  std::vector<std::uint64_t> blocks;   // per task: [block_rows x words], the blocked layout

  std::uint64_t* keys_of(std::uint32_t part, std::uint32_t query) {
    return keys.data() + (std::size_t{part} * args.queries + query) * 2 * args.k;
  }
  Nearest nearest(std::uint32_t part, std::uint32_t query) {
    const std::size_t at = std::size_t{part} * args.queries + query;
    return {keys_of(part, query), sizes[at], limits[at]};
  }
  void keep(std::uint32_t part, std::uint32_t query, const Nearest& nearest) {
    const std::size_t at = std::size_t{part} * args.queries + query;
    sizes[at] = nearest.size;
    limits[at] = nearest.limit;
  }
};

void store_u32(std::byte* at, std::uint32_t value) { std::memcpy(at, &value, sizeof value); }

// Query `query`'s `count` sorted keys as its outputs, padded.
void write_outputs(Search& s, std::uint32_t query, const std::uint64_t* keys,
                   std::uint32_t count) {
  const std::size_t at = std::size_t{query} * s.args.k * 4;
  for (std::uint32_t i = 0; i < s.args.k; ++i) {
    const bool real = i < count;
    store_u32(s.distances + at + i * 4,
              real ? static_cast<std::uint32_t>(keys[i] >> 32) : kHammingNoDistance);
    store_u32(s.indices + at + i * 4, real ? static_cast<std::uint32_t>(keys[i]) : kHammingNoIndex);
  }
}

// One task: a group of queries over a range of rows. Allocates nothing (it runs on a helper).
void run_task(Search& s, std::size_t task) noexcept {
  const auto group = static_cast<std::uint32_t>(task / s.parts);
  const auto part = static_cast<std::uint32_t>(task % s.parts);
  const std::uint32_t q_first = group * s.group_queries;
  const std::uint32_t q_last = std::min(s.args.queries, q_first + s.group_queries);
  const std::uint32_t r_first = part * s.part_rows;
  const std::uint32_t r_last = std::min(s.args.rows, r_first + s.part_rows);
  const std::uint32_t k = s.args.k;
  const std::size_t code_bytes = std::size_t{s.words} * 8;
  std::uint16_t* distance = s.scratch.data() + task * kBlockQueries * kMaxBlockRows;
  std::uint64_t* blocked = s.blocks.data() + task * s.block_rows * s.words;
  alignas(64) std::uint64_t codes[kBlockQueries * kMaxWords];
  for (std::uint32_t q = q_first; q < q_last; ++q) s.keep(part, q, {nullptr, 0, kAnyDistance});
  for (std::uint32_t r0 = r_first; r0 < r_last; r0 += s.block_rows) {
    const std::uint32_t rows = std::min(s.block_rows, r_last - r0);
    block_rows(s.kernels, s.database + r0 * code_bytes, rows, s.words, blocked);
    const std::uint32_t groups = (rows + kGroupRows - 1) / kGroupRows;
    for (std::uint32_t q0 = q_first; q0 < q_last; q0 += kBlockQueries) {
      const std::uint32_t count = std::min(kBlockQueries, q_last - q0);
      std::memcpy(codes, s.queries + q0 * code_bytes, count * code_bytes);
      s.kernels.distances(codes, count, blocked, groups, s.words, distance);
      for (std::uint32_t q = 0; q < count; ++q) {
        const std::uint16_t* d = distance + q * kMaxBlockRows;
        Nearest nearest = s.nearest(part, q0 + q);
        for (std::uint32_t i = 0; (i = s.kernels.first_below(d, i, rows, nearest.limit)) < rows;
             ++i) {
          nearest.add(std::uint64_t{d[i]} << 32 | (r0 + i), k);
        }
        s.keep(part, q0 + q, nearest);
      }
    }
  }
  for (std::uint32_t q = q_first; q < q_last; ++q) {
    Nearest nearest = s.nearest(part, q);
    nearest.finish(k);
    s.keep(part, q, nearest);
    if (s.parts == 1) write_outputs(s, q, nearest.keys, nearest.size);
  }
}

}  // namespace

const char* to_string(HammingCpuPath path) {
  switch (path) {
    case HammingCpuPath::portable: return "portable";
    case HammingCpuPath::avx2: return "avx2";
    case HammingCpuPath::avx512: return "avx512";
  }
  return "?";
}

std::string hamming_cpu_path_description(HammingCpuPath path) {
  switch (path) {
    case HammingCpuPath::portable: return "portable: 64-bit popcounts";
    case HammingCpuPath::avx2: return "avx2: nibble lookups (vpshufb), 8 rows at a time";
    case HammingCpuPath::avx512: return "avx512: vpopcntq, 8 rows at a time";
  }
  return "?";
}

bool hamming_cpu_path_supported(HammingCpuPath path) {
  switch (path) {
    case HammingCpuPath::portable: return true;
#if defined(FERRY_HAMMING_X86)
    case HammingCpuPath::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
    case HammingCpuPath::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vpopcntdq") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
#else
    default: return false;
#endif
  }
  return false;
}

HammingCpuPath hamming_cpu_default_path() {
  static const HammingCpuPath path = [] {
    HammingCpuPath cap = HammingCpuPath::avx512;
    if (const char* isa = std::getenv("FERRY_CPU_ISA"); isa != nullptr) {
      for (HammingCpuPath p : kHammingCpuPaths) {
        if (std::string_view(isa) == to_string(p)) cap = p;
      }
    }
    HammingCpuPath best = HammingCpuPath::portable;
    for (HammingCpuPath p : kHammingCpuPaths) {
      if (p <= cap && hamming_cpu_path_supported(p)) best = p;
    }
    return best;
  }();
  return path;
}

void run_hamming_topk_cpu(const HammingTopkArgs& args,
                          std::span<const std::span<std::byte>> bindings, HammingCpuPath path,
                          unsigned threads) {
  Search s;
  s.args = args;
  s.kernels = kernels_of(path);
  s.queries = bindings[0].data();
  s.database = bindings[1].data();
  s.distances = bindings[2].data();
  s.indices = bindings[3].data();
  s.words = args.words / 2;
  threads = std::max(1u, threads);
  // About 4 tasks per thread (a busy thread does not hold the others up), each a multiple of
  // kBlockQueries; rows in ranges only when the queries cannot keep every thread busy. Each task
  // reads the whole database (its row range), once, whatever its number of queries.
  const std::uint32_t blocks = (args.queries + kBlockQueries - 1) / kBlockQueries;
  const std::uint32_t per_group = std::max(1u, blocks / (4 * threads));
  s.group_queries = per_group * kBlockQueries;
  s.groups = (args.queries + s.group_queries - 1) / s.group_queries;
  s.block_rows = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
      kBlockBytes / (std::uint64_t{s.words} * 8) / kGroupRows * kGroupRows, kGroupRows,
      kMaxBlockRows));
  const std::uint32_t row_blocks = (args.rows + s.block_rows - 1) / s.block_rows;
  if (s.groups < threads) {
    s.parts = std::min(row_blocks, (4 * threads + s.groups - 1) / s.groups);
  }
  s.part_rows = (row_blocks + s.parts - 1) / s.parts * s.block_rows;
  s.parts = static_cast<std::uint32_t>((std::uint64_t{args.rows} + s.part_rows - 1) / s.part_rows);
  const std::size_t tasks = std::size_t{s.groups} * s.parts;
  // Everything allocated before any task runs: a task cannot fail.
  s.keys.resize(std::size_t{s.parts} * args.queries * 2 * args.k);
  s.sizes.resize(std::size_t{s.parts} * args.queries);
  s.limits.resize(s.sizes.size());
  s.scratch.resize(tasks * kBlockQueries * kMaxBlockRows);
  s.blocks.resize(tasks * s.block_rows * s.words);
  detail::parallel_for(tasks, threads, [&s](std::size_t task) { run_task(s, task); });
  if (s.parts == 1) return;
  // The parts' sorted lists merged per query: the k smallest keys of all.
  std::vector<std::uint64_t> merged;
  merged.reserve(std::size_t{s.parts} * args.k);
  for (std::uint32_t q = 0; q < args.queries; ++q) {
    merged.clear();
    for (std::uint32_t p = 0; p < s.parts; ++p)
      merged.insert(merged.end(), s.keys_of(p, q), s.keys_of(p, q) + s.nearest(p, q).size);
    const std::size_t keep = std::min<std::size_t>(args.k, merged.size());
    std::partial_sort(merged.begin(), merged.begin() + static_cast<std::ptrdiff_t>(keep),
                      merged.end());
    write_outputs(s, q, merged.data(), static_cast<std::uint32_t>(keep));
  }
}

void run_on_cpu(const HammingTopkArgs& args, std::span<const std::span<std::byte>> bindings) {
  // Small searches on this thread alone: waking helpers would cost more than they save.
  const std::uint64_t work = std::uint64_t{args.queries} * args.rows * args.words;
  const unsigned threads = work < (1ull << 22) ? 1u : detail::host_worker_count() + 1;
  run_hamming_topk_cpu(args, bindings, hamming_cpu_default_path(), threads);
}

}  // namespace ferry::ops
