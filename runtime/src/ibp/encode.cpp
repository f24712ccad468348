// The IBP encoder on the host (docs/IBP_FORMAT.md): per group and column the invariant bits by
// the format's exact rule, then every row's mode and size, then the bytes. Multi-threaded over
// groups, and within a big group over row ranges (bit counts and m_k counts summed per range,
// then merged) and column tiles. The passes over elements are SIMD over columns (portable
// 16-byte vectors; AVX2 / AVX-512BW and BMI2's pext picked at run time on x86-64) and branch-free
// on the data.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/checked.hpp"
#include "core/host_workers.hpp"
#include "ibp/bits.hpp"
#include "ibp/stream.hpp"

namespace ferry::ibp {
namespace detail {
namespace {

using ferry::detail::parallel_for;
using ferry::detail::pieces_of;

// Columns analysed together: their counters stay in L2.
constexpr std::uint64_t kTileColumns = 1024;
// Rows per range of a group analysed by one thread, at least.
constexpr std::uint64_t kMinRowsPerPart = 512;
// Rows per task of the row passes.
constexpr std::uint64_t kRowsPerTask = 256;

template <typename T>
constexpr unsigned kBits = 8 * sizeof(T);
// One bit set per byte: (x >> j) & kLanes holds bits j, j + 8, ... of x, one per byte, so a
// byte-wide counter per lane adds 8 bit counts with one addition.
template <typename T>
constexpr T kLanes = static_cast<T>(static_cast<T>(~T{0}) / 0xffu);

// The masks of one encoding: per group the R masks and R values, each column's count of
// variable bits (W - k) and their field_shift (bits.hpp).
template <typename T>
struct Masks {
  std::vector<T> mask;
  std::vector<T> value;
  std::vector<std::uint8_t> variable_bits;
  std::vector<std::uint8_t> variable_shift;
  std::vector<T> kept;  // k: the invariant bits (W - variable_bits), in lanes of T for size_rows
};

// Steps 2-4's order of the format for one column of n elements: the majority values V and the
// nested masks M_0 .. M_W (nested[k x stride] = the first k bits of the order). Returns how many
// bits are constant (every element agrees: they come first, so m_k = n for k up to it).
template <typename T>
unsigned order_bits(const std::uint32_t* ones, std::uint64_t n, T* majority, T* nested,
                    std::uint64_t stride) {
  constexpr unsigned W = kBits<T>;
  std::array<std::uint64_t, 64> keys{};
  T v = 0;
  for (unsigned b = 0; b < W; ++b) {
    if (2 * std::uint64_t{ones[b]} > n) v = static_cast<T>(v | (T{1} << b));
  }
  // Bits every element agrees on (agreement n) come first, from the highest; only the others need
  // sorting (most bits of compressible data are constant, and this runs per column and group).
  unsigned constant = 0;
  for (unsigned b = W; b-- > 0;) {
    if (ones[b] == 0 || ones[b] == n) keys[constant++] = std::uint64_t{n} << 8 | b;
  }
  unsigned varying = constant;
  for (unsigned b = 0; b < W; ++b) {
    if (ones[b] == 0 || ones[b] == n) continue;
    const std::uint64_t agreement = std::max<std::uint64_t>(ones[b], n - ones[b]);
    keys[varying++] = agreement << 8 | b;  // highest agreement first, then the higher bit
  }
  std::sort(keys.begin() + constant, keys.begin() + W, std::greater<>());
  *majority = v;
  T prefix = 0;
  nested[0] = 0;
  for (unsigned k = 0; k < W; ++k) {
    prefix = static_cast<T>(prefix | (T{1} << (keys[k] & 0xffu)));
    nested[(k + 1) * stride] = prefix;
  }
  return constant;
}

// SIMD for the passes over elements: the counting kernels are written once with GCC's and
// Clang's vector extension (vector_size(B) lanes of a signed T: comparisons give -1 per true lane)
// and compiled for 16-byte vectors (SSE2 / NEON, scalar code elsewhere) and, on x86-64, for AVX2
// and AVX-512BW, picked at run time.
// The x86-64 kernels and their run-time choice (FERRY_IBP_PORTABLE_ONLY builds the portable
// code alone, as on other CPUs, to check that it compiles).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(FERRY_IBP_PORTABLE_ONLY)
#define FERRY_IBP_X86_KERNELS 1
#else
#define FERRY_IBP_X86_KERNELS 0
#endif

// Counters are unsigned lanes (they wrap, by design, within bytes or between flushes);
// comparisons are made in signed lanes and their -1 per true lane is taken as unsigned
// (__builtin_convertvector between lanes of one width keeps the bits).
template <typename T, unsigned B>
struct Lanes {
  using S = std::make_signed_t<T>;
  typedef S type __attribute__((vector_size(B)));
  typedef T counters __attribute__((vector_size(B)));
  static constexpr unsigned count = B / sizeof(T);
};


#if FERRY_IBP_X86_KERNELS
enum class Isa { base, avx2, avx512 };
// The widest vectors the CPU has; FERRY_IBP_HOST_ISA=base or avx2 caps it (the tests run every
// kernel on one machine).
Isa host_isa() {
  static const Isa isa = [] {
    const char* cap = std::getenv("FERRY_IBP_HOST_ISA");
    const std::string_view limit = cap != nullptr ? cap : "";
    if (limit == "base") return Isa::base;
    if (__builtin_cpu_supports("avx512bw") && limit != "avx2") return Isa::avx512;
    return __builtin_cpu_supports("avx2") ? Isa::avx2 : Isa::base;
  }();
  return isa;
}
#endif

// A strip walks down rows a row's length apart, which the hardware prefetchers follow late:
// the strip's 256 bytes kPrefetchRows rows ahead are asked for (only within the block's rows:
// nothing past the data).
constexpr std::uint64_t kPrefetchRows = 8;
[[gnu::always_inline]] inline void prefetch_strip(const std::byte* at, std::uint64_t row_bytes,
                                                  bool ahead_in_range) {
  if (!ahead_in_range) return;
  const std::byte* ahead = at + kPrefetchRows * row_bytes;
  for (unsigned line = 0; line < 256; line += 64) __builtin_prefetch(ahead + line);
}

// Whether every lane of a vector is 0.
template <unsigned B, typename V>
[[gnu::always_inline]] inline bool none_set(const V& v) {
  std::uint64_t words[B / 8];
  std::memcpy(words, &v, B);
  std::uint64_t any = 0;
  for (unsigned i = 0; i < B / 8; ++i) any |= words[i];
  return any == 0;
}

// Rows counted in lanes of T between flushes into the 32-bit totals: a byte lane counts up to
// 255, and 255 rows of a few vectors stay in L1 while each vector of columns walks down them.
constexpr std::uint64_t kBlockRows = 255;

// matching[c x (W + 1) + k] += m_k of step 4 for column c0 + c over rows [row_begin, row_end):
// how many of its elements x have ((x ^ V) & M_k) == 0, for k past constant[c] (the column's
// constant bits: every element agrees there, the caller counts them). One comparison per k and
// element, in vectors of columns: (x ^ V) & M_k == 0 holds for a prefix of k, so these counts
// are the step's m_k without a histogram. nested_by_k[k x kTileColumns + c] = M_k of column
// c0 + c.
template <typename T, unsigned B>
[[gnu::always_inline]] inline void count_matching_lanes(
    const std::byte* data, const Layout& l, std::uint64_t row_begin, std::uint64_t row_end,
    std::uint64_t c0, std::uint64_t width, const T* majority, const T* nested_by_k,
    const std::uint8_t* constant, std::uint32_t* matching) {
  constexpr unsigned W = kBits<T>;
  using V = typename Lanes<T, B>::type;
  using S = typename Lanes<T, B>::S;
  constexpr unsigned L = Lanes<T, B>::count;
  // Columns of a strip: 256 bytes of each row, 4 cache lines read together (one vector of
  // columns walking down the rows alone waits on every row's line).
  constexpr unsigned U = 256 / B;
  constexpr unsigned strip = U * L;
  const V zero = {};
  // Lane i of the strip's vector u from column (cv + u x L + i) of `column`, 0 past the tile.
  S lanes[strip];
  const auto gather = [&](std::uint64_t cv, V* out, const auto& column) {
    for (unsigned i = 0; i < strip; ++i) {
      lanes[i] = cv + i < width ? static_cast<S>(column(cv + i)) : S{0};
    }
    std::memcpy(out, lanes, sizeof(V) * U);
  };
  for (std::uint64_t cv = 0; cv < width; cv += strip) {
    // The k counted: past the strip's fewest constant bits.
    unsigned k_first = W;
    for (std::uint64_t c = cv; c < std::min<std::uint64_t>(width, cv + strip); ++c) {
      k_first = std::min<unsigned>(k_first, constant[c]);
    }
    V vmaj[U];
    gather(cv, vmaj, [&](std::uint64_t c) { return majority[c]; });
    V m[W + 1][U];
    for (unsigned k = k_first + 1; k <= W; ++k) {
      gather(cv, m[k], [&](std::uint64_t c) { return nested_by_k[k * kTileColumns + c]; });
    }
    for (std::uint64_t r0 = row_begin; r0 < row_end; r0 += kBlockRows) {
      const std::uint64_t r1 = std::min(row_end, r0 + kBlockRows);
      using C = typename Lanes<T, B>::counters;
      C acc[W + 1][U];
      for (unsigned k = k_first + 1; k <= W; ++k) {
        for (unsigned u = 0; u < U; ++u) acc[k][u] = C{};
      }
      C exact[U];  // elements equal to V: they agree for every k
      for (unsigned u = 0; u < U; ++u) exact[u] = C{};
      for (std::uint64_t r = r0; r < r1; ++r) {
        const std::uint64_t n = l.row_elements_of(r);
        const std::uint64_t have = n > c0 + cv ? std::min<std::uint64_t>(strip, n - c0 - cv) : 0;
        const std::byte* at = data + (r * l.row_elements + c0 + cv) * sizeof(T);
        prefetch_strip(at, l.row_elements * sizeof(T), r + kPrefetchRows < r1);
        V d[U];
        if (have == strip && cv + strip <= width) {
          std::memcpy(d, at, sizeof(d));
          for (unsigned u = 0; u < U; ++u) d[u] ^= vmaj[u];
        } else {
          // Lanes past the row or the tile: all ones agree with no M_k (k >= 1), so they count
          // for none of the k computed here.
          for (unsigned i = 0; i < strip; ++i) {
            lanes[i] = i < have && cv + i < width
                           ? static_cast<S>(load<T>(at + i * sizeof(T)) ^ majority[cv + i])
                           : S{-1};
          }
          std::memcpy(d, lanes, sizeof(d));
        }
        // Elements equal to V (often most: zeros of sparse data) are counted once for every k,
        // and leave the loop below as all ones (agreeing with no M_k). An element agreeing on
        // no more than the first k bits counts for none after: stop at the first k that no
        // element of the strip agrees on (most agree on a few bits only).
        for (unsigned u = 0; u < U; ++u) {
          const V equal = d[u] == zero;
          exact[u] -= __builtin_convertvector(equal, C);
          d[u] |= equal;
        }
        for (unsigned k = k_first + 1; k <= W; ++k) {
          V any = zero;
          for (unsigned u = 0; u < U; ++u) {
            const V agree = (d[u] & m[k][u]) == zero;
            acc[k][u] -= __builtin_convertvector(agree, C);
            any |= agree;
          }
          if (none_set<B>(any)) break;
        }
      }
      for (unsigned k = k_first + 1; k <= W; ++k) {
        for (unsigned u = 0; u < U; ++u) acc[k][u] += exact[u];
        std::memcpy(lanes, acc[k], sizeof(V) * U);
        for (unsigned i = 0; i < strip && cv + i < width; ++i) {
          matching[(cv + i) * (W + 1) + k] += static_cast<T>(lanes[i]);
        }
      }
    }
  }
}

template <typename T>
void count_matching_base(const std::byte* data, const Layout& l, std::uint64_t row_begin,
                         std::uint64_t row_end, std::uint64_t c0, std::uint64_t width,
                         const T* majority, const T* nested_by_k, const std::uint8_t* constant,
                         std::uint32_t* matching) {
  count_matching_lanes<T, 16>(data, l, row_begin, row_end, c0, width, majority, nested_by_k,
                              constant, matching);
}
#if FERRY_IBP_X86_KERNELS
template <typename T>
__attribute__((target("avx2"))) void count_matching_avx2(
    const std::byte* data, const Layout& l, std::uint64_t row_begin, std::uint64_t row_end,
    std::uint64_t c0, std::uint64_t width, const T* majority, const T* nested_by_k,
    const std::uint8_t* constant, std::uint32_t* matching) {
  count_matching_lanes<T, 32>(data, l, row_begin, row_end, c0, width, majority, nested_by_k,
                              constant, matching);
}
template <typename T>
__attribute__((target("avx512f,avx512bw"))) void count_matching_avx512(
    const std::byte* data, const Layout& l, std::uint64_t row_begin, std::uint64_t row_end,
    std::uint64_t c0, std::uint64_t width, const T* majority, const T* nested_by_k,
    const std::uint8_t* constant, std::uint32_t* matching) {
  count_matching_lanes<T, 64>(data, l, row_begin, row_end, c0, width, majority, nested_by_k,
                              constant, matching);
}
#endif

template <typename T>
void count_matching(const std::byte* data, const Layout& l, std::uint64_t row_begin,
                    std::uint64_t row_end, std::uint64_t c0, std::uint64_t width,
                    const T* majority, const T* nested_by_k, const std::uint8_t* constant,
                    std::uint32_t* matching) {
#if FERRY_IBP_X86_KERNELS
  switch (host_isa()) {
    case Isa::avx512:
      return count_matching_avx512<T>(data, l, row_begin, row_end, c0, width, majority,
                                      nested_by_k, constant, matching);
    case Isa::avx2:
      return count_matching_avx2<T>(data, l, row_begin, row_end, c0, width, majority,
                                    nested_by_k, constant, matching);
    case Isa::base: break;
  }
#endif
  count_matching_base<T>(data, l, row_begin, row_end, c0, width, majority, nested_by_k, constant,
                         matching);
}

// ones[c x W + b] += how many rows of [row_begin, row_end) have bit b set in column c0 + c
// (step 1). Byte-wide counters: (x >> j) & 0x0101.. holds bits j, j + 8, .. of x, one per byte,
// so one addition counts 8 bits of every lane; a strip of 256 bytes of columns walks down a block
// of 255 rows (a byte counts up to 255) with its 8 counters in registers.
template <typename T, unsigned B>
[[gnu::always_inline]] inline void count_ones_lanes(const std::byte* data, const Layout& l,
                                                    std::uint64_t row_begin, std::uint64_t row_end,
                                                    std::uint64_t c0, std::uint64_t width,
                                                    std::uint32_t* ones) {
  constexpr unsigned W = kBits<T>;
  using V = typename Lanes<T, B>::counters;
  constexpr unsigned L = Lanes<T, B>::count;
  constexpr unsigned U = 256 / B;
  constexpr unsigned strip = U * L;
  V bytes_lsb = {};
  bytes_lsb += kLanes<T>;
  alignas(64) std::uint8_t counts[8][strip * sizeof(T)];
  for (std::uint64_t cv = 0; cv < width; cv += strip) {
    const std::uint64_t cols = std::min<std::uint64_t>(strip, width - cv);
    for (std::uint64_t r0 = row_begin; r0 < row_end; r0 += kBlockRows) {
      const std::uint64_t r1 = std::min(row_end, r0 + kBlockRows);
      V acc[8][U] = {};
      for (std::uint64_t r = r0; r < r1; ++r) {
        const std::uint64_t n = l.row_elements_of(r);
        const std::uint64_t have = n > c0 + cv ? std::min<std::uint64_t>(cols, n - c0 - cv) : 0;
        const std::byte* at = data + (r * l.row_elements + c0 + cv) * sizeof(T);
        prefetch_strip(at, l.row_elements * sizeof(T), r + kPrefetchRows < r1);
        V x[U];
        if (have == strip) {
          std::memcpy(x, at, sizeof(x));
        } else {
          std::memset(x, 0, sizeof(x));  // columns past the row or the tile count no ones
          std::memcpy(x, at, have * sizeof(T));
        }
        for (unsigned j = 0; j < 8; ++j) {
          for (unsigned u = 0; u < U; ++u) acc[j][u] += (x[u] >> j) & bytes_lsb;
        }
      }
      for (unsigned j = 0; j < 8; ++j) std::memcpy(counts[j], acc[j], sizeof(acc[j]));
      for (std::uint64_t c = 0; c < cols; ++c) {
        std::uint32_t* column = ones + (cv + c) * W;
        for (unsigned i = 0; i < sizeof(T); ++i) {
          for (unsigned j = 0; j < 8; ++j) column[8 * i + j] += counts[j][c * sizeof(T) + i];
        }
      }
    }
  }
}

template <typename T>
void count_ones_base(const std::byte* data, const Layout& l, std::uint64_t row_begin,
                     std::uint64_t row_end, std::uint64_t c0, std::uint64_t width,
                     std::uint32_t* ones) {
  count_ones_lanes<T, 16>(data, l, row_begin, row_end, c0, width, ones);
}
#if FERRY_IBP_X86_KERNELS
template <typename T>
__attribute__((target("avx2"))) void count_ones_avx2(const std::byte* data, const Layout& l,
                                                     std::uint64_t row_begin, std::uint64_t row_end,
                                                     std::uint64_t c0, std::uint64_t width,
                                                     std::uint32_t* ones) {
  count_ones_lanes<T, 32>(data, l, row_begin, row_end, c0, width, ones);
}
template <typename T>
__attribute__((target("avx512f,avx512bw"))) void count_ones_avx512(
    const std::byte* data, const Layout& l, std::uint64_t row_begin, std::uint64_t row_end,
    std::uint64_t c0, std::uint64_t width, std::uint32_t* ones) {
  count_ones_lanes<T, 64>(data, l, row_begin, row_end, c0, width, ones);
}
#endif

template <typename T>
void count_ones(const std::byte* data, const Layout& l, std::uint64_t row_begin,
                std::uint64_t row_end, std::uint64_t c0, std::uint64_t width, std::uint32_t* ones) {
#if FERRY_IBP_X86_KERNELS
  switch (host_isa()) {
    case Isa::avx512: return count_ones_avx512<T>(data, l, row_begin, row_end, c0, width, ones);
    case Isa::avx2: return count_ones_avx2<T>(data, l, row_begin, row_end, c0, width, ones);
    case Isa::base: break;
  }
#endif
  count_ones_base<T>(data, l, row_begin, row_end, c0, width, ones);
}

// Step 5: the k with the largest k x m_k (the smallest k on ties), matching[k] = m_k.
template <unsigned W>
unsigned best_k(const std::uint32_t* matching) {
  unsigned best = 0;
  std::uint64_t best_product = 0;
  for (unsigned k = 1; k <= W; ++k) {
    const std::uint64_t product = std::uint64_t{k} * matching[k];
    if (product > best_product) {
      best_product = product;
      best = k;
    }
  }
  return best;
}

// The masks of group g into masks.{mask,value,variable_bits}[g x R ...], on up to `threads`.
template <typename T>
void analyze_group(const std::byte* data, const Layout& l, std::uint64_t g, unsigned threads,
                   Masks<T>& masks) {
  constexpr unsigned W = kBits<T>;
  const std::uint64_t R = l.row_elements;
  const std::uint64_t first = g * l.group_rows;
  const std::uint64_t last = std::min(l.rows, first + l.group_rows);
  const std::uint64_t rows = last - first;
  const std::uint64_t last_row_elements = l.row_elements_of(last - 1);
  const std::uint64_t parts =
      std::clamp<std::uint64_t>(rows / kMinRowsPerPart, 1, threads);
  const std::uint64_t tiles = pieces_of(R, kTileColumns);
  const std::uint64_t batch = std::max<std::uint64_t>(1, threads / parts);
  const auto part_rows = [&](std::uint64_t part, std::uint64_t* begin, std::uint64_t* end) {
    *begin = first + rows * part / parts;
    *end = first + rows * (part + 1) / parts;
  };
  std::vector<std::uint32_t> ones;
  std::vector<std::uint32_t> matching;  // per column m_0 .. m_W
  std::vector<T> majority;
  std::vector<T> nested;                // per tile M_k of its columns, k-major
  std::vector<std::uint8_t> constant;   // per column: its constant bits (m_k = n up to them)
  for (std::uint64_t tile0 = 0; tile0 < tiles; tile0 += batch) {
    const std::uint64_t tile_count = std::min(batch, tiles - tile0);
    const std::uint64_t items = tile_count * parts;
    const auto tile_columns = [&](std::uint64_t t) {
      const std::uint64_t c0 = (tile0 + t) * kTileColumns;
      return std::make_pair(c0, std::min(kTileColumns, R - c0));
    };
    ones.assign(items * kTileColumns * W, 0);
    parallel_for(items, threads, [&](std::size_t i) {
      const auto [c0, width] = tile_columns(i / parts);
      std::uint64_t begin = 0, end = 0;
      part_rows(i % parts, &begin, &end);
      count_ones<T>(data, l, begin, end, c0, width, ones.data() + i * kTileColumns * W);
    });
    majority.assign(tile_count * kTileColumns, T{0});
    nested.assign(tile_count * kTileColumns * (W + 1), T{0});
    constant.assign(tile_count * kTileColumns, std::uint8_t{0});
    parallel_for(tile_count, threads, [&](std::size_t t) {
      const auto [c0, width] = tile_columns(t);
      std::uint32_t* sum = ones.data() + t * parts * kTileColumns * W;
      for (std::uint64_t p = 1; p < parts; ++p) {
        const std::uint32_t* part = sum + p * kTileColumns * W;
        for (std::uint64_t i = 0; i < width * W; ++i) sum[i] += part[i];
      }
      for (std::uint64_t c = 0; c < width; ++c) {
        const std::uint64_t n = rows - (c0 + c >= last_row_elements ? 1 : 0);
        constant[t * kTileColumns + c] = static_cast<std::uint8_t>(
            order_bits<T>(sum + c * W, n, &majority[t * kTileColumns + c],
                          &nested[t * kTileColumns * (W + 1) + c], kTileColumns));
      }
    });
    matching.assign(items * kTileColumns * (W + 1), 0);
    parallel_for(items, threads, [&](std::size_t i) {
      const std::uint64_t t = i / parts;
      const auto [c0, width] = tile_columns(t);
      std::uint64_t begin = 0, end = 0;
      part_rows(i % parts, &begin, &end);
      count_matching<T>(data, l, begin, end, c0, width, &majority[t * kTileColumns],
                        &nested[t * kTileColumns * (W + 1)], &constant[t * kTileColumns],
                        matching.data() + i * kTileColumns * (W + 1));
    });
    parallel_for(tile_count, threads, [&](std::size_t t) {
      const auto [c0, width] = tile_columns(t);
      std::uint32_t* sum = matching.data() + t * parts * kTileColumns * (W + 1);
      for (std::uint64_t p = 1; p < parts; ++p) {
        const std::uint32_t* part = sum + p * kTileColumns * (W + 1);
        for (std::uint64_t i = 0; i < width * (W + 1); ++i) sum[i] += part[i];
      }
      for (std::uint64_t c = 0; c < width; ++c) {
        const std::uint64_t n = rows - (c0 + c >= last_row_elements ? 1 : 0);
        std::uint32_t* m = sum + c * (W + 1);
        for (unsigned k = 0; k <= constant[t * kTileColumns + c]; ++k) {
          m[k] = static_cast<std::uint32_t>(n);
        }
        const unsigned k = best_k<W>(m);
        const T mask = nested[(t * (W + 1) + k) * kTileColumns + c];
        const std::uint64_t at = g * R + c0 + c;
        masks.mask[at] = mask;
        masks.value[at] = static_cast<T>(majority[t * kTileColumns + c] & mask);
        masks.variable_bits[at] = static_cast<std::uint8_t>(W - k);
        masks.variable_shift[at] = field_shift(static_cast<T>(~mask));
        masks.kept[at] = static_cast<T>(k);
      }
    });
  }
}

// A row's table entry's mode and its size in bytes: size | mode. A matching element costs its
// column's W - k bits, another one W: the row's fields are n x W minus the k of every matching
// column, counted in vectors (lanes of T, summed before they can overflow: k <= W per lane and
// vector).
template <typename T, unsigned B>
[[gnu::always_inline]] inline std::uint32_t size_row_lanes(const std::byte* row, std::uint64_t n,
                                                           const T* mask, const T* value,
                                                           const T* kept) {
  constexpr unsigned W = kBits<T>;
  using V = typename Lanes<T, B>::type;
  constexpr unsigned L = Lanes<T, B>::count;
  using C = typename Lanes<T, B>::counters;
  // Vectors summed in lanes of T before they could wrap (k <= W per lane and vector).
  constexpr std::uint64_t kFlush = sizeof(T) >= 4 ? std::uint64_t{1} << 20
                                                  : ((std::uint64_t{1} << kBits<T>) - 1) / W;
  std::uint64_t saved = 0;    // sum of k over matching elements
  std::uint64_t matched = 0;
  std::uint64_t c = 0;
  while (c + L <= n) {
    C k_sum = {}, match_count = {};
    for (std::uint64_t v = 0; v < kFlush && c + L <= n; ++v, c += L) {
      V x, m, val, k;
      std::memcpy(&x, row + c * sizeof(T), sizeof(V));
      std::memcpy(&m, mask + c, sizeof(V));
      std::memcpy(&val, value + c, sizeof(V));
      std::memcpy(&k, kept + c, sizeof(V));
      const V match = (x & m) == val;  // -1 per matching lane
      k_sum += __builtin_convertvector(match & k, C);
      match_count -= __builtin_convertvector(match, C);
    }
    T lanes[2][L];
    std::memcpy(lanes[0], &k_sum, sizeof(C));
    std::memcpy(lanes[1], &match_count, sizeof(C));
    for (unsigned i = 0; i < L; ++i) {
      saved += lanes[0][i];
      matched += lanes[1][i];
    }
  }
  for (; c < n; ++c) {
    const T x = load<T>(row + c * sizeof(T));
    const bool match = (x & mask[c]) == value[c];
    saved += match ? kept[c] : 0;
    matched += match ? 1 : 0;
  }
  const std::uint64_t bits = n * W - saved;
  if (matched == n) {
    return static_cast<std::uint32_t>(pieces_of(bits, 32) * 4) |
           static_cast<std::uint32_t>(RowMode::all_matched);
  }
  const std::uint64_t bitmap_mode = pieces_of(n, 32) * 4 + pieces_of(bits, 32) * 4;
  const std::uint64_t raw = raw_row_bytes(n, sizeof(T));
  return bitmap_mode < raw ? static_cast<std::uint32_t>(bitmap_mode)
                           : static_cast<std::uint32_t>(raw) |
                                 static_cast<std::uint32_t>(RowMode::raw);
}

// The table entries (size | mode) of rows [first, end) into row_table.
template <typename T, unsigned B>
[[gnu::always_inline]] inline void size_rows_lanes(const std::byte* data, const Layout& l,
                                                   const Masks<T>& masks, std::uint64_t first,
                                                   std::uint64_t end, std::uint32_t* row_table) {
  const std::uint64_t R = l.row_elements;
  for (std::uint64_t r = first; r < end; ++r) {
    const std::uint64_t at = (r / l.group_rows) * R;
    row_table[r] = size_row_lanes<T, B>(data + r * R * sizeof(T), l.row_elements_of(r),
                                        &masks.mask[at], &masks.value[at], &masks.kept[at]);
  }
}
template <typename T>
void size_rows_base(const std::byte* data, const Layout& l, const Masks<T>& masks,
                    std::uint64_t first, std::uint64_t end, std::uint32_t* row_table) {
  size_rows_lanes<T, 16>(data, l, masks, first, end, row_table);
}
#if FERRY_IBP_X86_KERNELS
template <typename T>
__attribute__((target("avx2"))) void size_rows_avx2(const std::byte* data, const Layout& l,
                                                    const Masks<T>& masks, std::uint64_t first,
                                                    std::uint64_t end, std::uint32_t* row_table) {
  size_rows_lanes<T, 32>(data, l, masks, first, end, row_table);
}
template <typename T>
__attribute__((target("avx512f,avx512bw"))) void size_rows_avx512(
    const std::byte* data, const Layout& l, const Masks<T>& masks, std::uint64_t first,
    std::uint64_t end, std::uint32_t* row_table) {
  size_rows_lanes<T, 64>(data, l, masks, first, end, row_table);
}
#endif
template <typename T>
void size_rows(const std::byte* data, const Layout& l, const Masks<T>& masks, std::uint64_t first,
               std::uint64_t end, std::uint32_t* row_table) {
#if FERRY_IBP_X86_KERNELS
  switch (host_isa()) {
    case Isa::avx512: return size_rows_avx512<T>(data, l, masks, first, end, row_table);
    case Isa::avx2: return size_rows_avx2<T>(data, l, masks, first, end, row_table);
    case Isa::base: break;
  }
#endif
  size_rows_base<T>(data, l, masks, first, end, row_table);
}

// A matching element's variable bits: pext(x, ~mask). With BMI2 the instruction (columns whose
// variable bits are several runs, as a float's sign and low mantissa, are common); without it a
// shift for a single run (field_shift) and the portable loop for several.
template <typename T, bool kPext>
[[gnu::always_inline]] inline std::uint64_t variable_field(T x, T mask, unsigned width,
                                                           std::uint8_t shift) {
#if FERRY_IBP_X86_KERNELS
  if constexpr (kPext) {
    // The instruction by inline assembly: the intrinsic would need the BMI2 target on every
    // function it is inlined through; this runs only where fast_pext() said so.
    std::uint64_t out;
    const std::uint64_t variable = static_cast<T>(~mask);
    asm("pextq %2, %1, %0" : "=r"(out) : "r"(std::uint64_t{x}), "r"(variable));
    (void)width;
    (void)shift;
    return out;
  }
#endif
  return extract_field(x, static_cast<T>(~mask), width, shift);
}

// Puts the fields of elements [begin, end) (field_at(c, joined, bits) appends element c's field
// to `joined` at `bits`), kFuse elements' fields joined into each put: the writer's chain of
// dependent steps (the accumulator, its count, the output pointer) bounds the row's loop, not
// the fields, so one step per 64 bits instead of one per element (kFuse fields fit 64 bits).
template <unsigned kFuse, typename FieldAt>
[[gnu::always_inline]] inline void put_fields(BitWriter& writer, std::uint64_t begin,
                                              std::uint64_t end, const FieldAt& field_at) {
  std::uint64_t c = begin;
  for (; c + kFuse <= end; c += kFuse) {
    std::uint64_t joined = 0;
    unsigned bits = 0;
#pragma GCC unroll 8
    for (unsigned e = 0; e < kFuse; ++e) field_at(c + e, joined, bits);
    writer.put(joined, bits);
  }
  for (; c < end; ++c) {
    std::uint64_t joined = 0;
    unsigned bits = 0;
    field_at(c, joined, bits);
    writer.put(joined, bits);
  }
}

// Writes one row in its mode; the fields of a row are chosen without branches on the data (a
// row's matches are a coin toss for the branch predictor).
template <typename T, bool kPext>
[[gnu::always_inline]] inline void write_row(const std::byte* row, std::uint64_t n, const T* mask,
                                             const T* value, const std::uint8_t* variable_bits,
                                             const std::uint8_t* variable_shift, RowMode mode,
                                             std::byte* out, std::uint64_t row_bytes) {
  constexpr unsigned W = kBits<T>;
  if (mode == RowMode::raw) {
    std::memcpy(out, row, n * sizeof(T));
    std::memset(out + n * sizeof(T), 0, raw_row_bytes(n, sizeof(T)) - n * sizeof(T));
    return;
  }
  std::byte* const row_end = out + row_bytes;
  constexpr unsigned kFuse = W <= 32 ? 64 / W : 1;  // fields of at most W bits per put_fields
  if (mode == RowMode::all_matched) {
    BitWriter writer(out, row_end);
    const auto field_at = [&](std::uint64_t c, std::uint64_t& joined, unsigned& bits) {
      const T x = load<T>(row + c * sizeof(T));
      joined |= variable_field<T, kPext>(x, mask[c], variable_bits[c], variable_shift[c]) << bits;
      bits += variable_bits[c];
    };
    put_fields<kFuse>(writer, 0, n, field_at);
    writer.finish();
    return;
  }
  std::byte* bitmap = out;
  BitWriter writer(out + pieces_of(n, 32) * 4, row_end);
  for (std::uint64_t c0 = 0; c0 < n; c0 += 32) {
    const std::uint64_t end = std::min<std::uint64_t>(n, c0 + 32);
    std::uint32_t word = 0;
    // Element c's bit of the bitmap, and its field (the variable bits of a matching element, all
    // W bits of another) appended to `joined` at `bits`.
    const auto field_at = [&](std::uint64_t c, std::uint64_t& joined, unsigned& bits) {
      const T x = load<T>(row + c * sizeof(T));
      const bool match = (x & mask[c]) == value[c];
      word |= std::uint32_t{match} << (c - c0);
      const std::uint64_t field = variable_field<T, kPext>(x, mask[c], variable_bits[c],
                                                           variable_shift[c]);
      // Selected by masks: compilers turn `match ? a : b` into a branch here.
      const std::uint64_t pick = std::uint64_t{0} - std::uint64_t{match};
      joined |= ((field & pick) | (std::uint64_t{x} & ~pick)) << bits;
      bits += W - (static_cast<unsigned>(pick) & (W - variable_bits[c]));
    };
    put_fields<kFuse>(writer, c0, end, field_at);  // kFuse divides 32: whole chunks fuse whole
    store<std::uint32_t>(bitmap + (c0 / 32) * 4, word);
  }
  writer.finish();
}

// Rows [first, end) of the stream (write_stream's task).
template <typename T>
struct RowsToWrite {
  const std::byte* data;
  const Layout* layout;
  const Masks<T>* masks;
  const std::vector<std::uint32_t>* row_table;
  const std::vector<std::uint64_t>* group_offsets;
  std::byte* stream;
};
template <typename T, bool kPext>
[[gnu::always_inline]] inline void write_rows_impl(const RowsToWrite<T>& w, std::uint64_t first,
                                                   std::uint64_t end) {
  const Layout& l = *w.layout;
  const std::uint64_t R = l.row_elements;
  for (std::uint64_t r = first; r < end; ++r) {
    const std::uint64_t g = r / l.group_rows;
    const std::uint64_t at = g * R;
    const std::uint32_t entry = (*w.row_table)[r];
    // The row ends where the next one of its group begins, or its group ends.
    const std::uint64_t next = r + 1 < l.rows && (r + 1) % l.group_rows != 0
                                   ? (*w.row_table)[r + 1] & ~3u
                                   : (*w.group_offsets)[g + 1] - (*w.group_offsets)[g];
    write_row<T, kPext>(w.data + r * R * sizeof(T), l.row_elements_of(r), &w.masks->mask[at],
                        &w.masks->value[at], &w.masks->variable_bits[at],
                        &w.masks->variable_shift[at], static_cast<RowMode>(entry & 3u),
                        w.stream + l.data_offset + (*w.group_offsets)[g] + (entry & ~3u),
                        next - (entry & ~3u));
  }
}
template <typename T>
void write_rows_base(const RowsToWrite<T>& w, std::uint64_t first, std::uint64_t end) {
  write_rows_impl<T, false>(w, first, end);
}
#if FERRY_IBP_X86_KERNELS
template <typename T>
void write_rows_bmi2(const RowsToWrite<T>& w, std::uint64_t first,
                                                     std::uint64_t end) {
  write_rows_impl<T, true>(w, first, end);
}
// pext is microcoded (tens of cycles a bit run) on AMD before Zen 3: the portable code there.
bool fast_pext() {
  static const bool fast = __builtin_cpu_supports("bmi2") && !__builtin_cpu_is("znver1") &&
                           !__builtin_cpu_is("znver2") && std::getenv("FERRY_IBP_HOST_ISA") == nullptr;
  return fast;
}
#endif
template <typename T>
void write_rows(const RowsToWrite<T>& w, std::uint64_t first, std::uint64_t end) {
#if FERRY_IBP_X86_KERNELS
  if (fast_pext()) return write_rows_bmi2<T>(w, first, end);
#endif
  write_rows_base<T>(w, first, end);
}

// Everything but the bytes: masks, row table, group table, the layout with its data size.
template <typename T>
struct Plan {
  Layout layout;
  Masks<T> masks;
  std::vector<std::uint32_t> row_table;       // offset in its group | mode
  std::vector<std::uint64_t> group_offsets;   // group_count + 1
};

template <typename T>
Result<Plan<T>> make_plan(std::span<const std::byte> data, const EncodeParams& params) {
  FERRY_ASSIGN_OR_RETURN(Layout l, layout_for(params, 0));
  const unsigned threads = thread_count(params.threads);
  Plan<T> plan;
  const std::uint64_t R = l.row_elements;
  plan.masks.mask.assign(l.group_count * R, T{0});
  plan.masks.value.assign(l.group_count * R, T{0});
  plan.masks.variable_bits.assign(l.group_count * R, std::uint8_t{0});
  plan.masks.variable_shift.assign(l.group_count * R, std::uint8_t{0});
  plan.masks.kept.assign(l.group_count * R, T{0});
  if (l.group_count >= threads) {
    parallel_for(l.group_count, threads,
                 [&](std::size_t g) { analyze_group<T>(data.data(), l, g, 1, plan.masks); });
  } else {
    for (std::uint64_t g = 0; g < l.group_count; ++g) {
      analyze_group<T>(data.data(), l, g, threads, plan.masks);
    }
  }
  // Row sizes and modes, then (serially, a few operations a row) the offsets.
  plan.row_table.assign(l.rows, 0);
  const std::uint64_t tasks = pieces_of(l.rows, kRowsPerTask);
  parallel_for(tasks, threads, [&](std::size_t task) {
    size_rows<T>(data.data(), l, plan.masks, task * kRowsPerTask,
                 std::min(l.rows, (task + 1) * kRowsPerTask), plan.row_table.data());
  });
  plan.group_offsets.assign(l.group_count + 1, 0);
  std::uint64_t total = 0;
  std::uint32_t in_group = 0;
  for (std::uint64_t r = 0; r < l.rows; ++r) {
    if (r % l.group_rows == 0) {
      plan.group_offsets[r / l.group_rows] = total;
      in_group = 0;
    }
    const std::uint32_t size = plan.row_table[r] & ~3u;
    plan.row_table[r] = in_group | (plan.row_table[r] & 3u);
    in_group += size;  // < 2^32: the group bound of the layout
    total += size;
  }
  plan.group_offsets[l.group_count] = total;
  FERRY_ASSIGN_OR_RETURN(plan.layout, layout_for(params, total));
  return plan;
}

template <typename T>
void write_stream(std::span<const std::byte> data, Plan<T>& plan, std::span<std::byte> out,
                  unsigned threads) {
  Layout& l = plan.layout;
  const std::uint64_t R = l.row_elements;
  std::byte* s = out.data();
  for (std::uint64_t g = 0; g <= l.group_count; ++g) {
    store<std::uint64_t>(s + l.group_table_offset + 8 * g, plan.group_offsets[g]);
  }
  parallel_for(l.group_count, threads, [&](std::size_t g) {
    std::byte* block = s + l.masks_offset + g * l.mask_block_bytes;
    std::memcpy(block, &plan.masks.mask[g * R], R * sizeof(T));
    std::memcpy(block + R * sizeof(T), &plan.masks.value[g * R], R * sizeof(T));
    std::memset(block + 2 * R * sizeof(T), 0, l.mask_block_bytes - 2 * R * sizeof(T));
  });
  std::memcpy(s + l.row_table_offset, plan.row_table.data(), l.rows * 4);
  std::memset(s + l.row_table_offset + l.rows * 4, 0, l.data_offset - l.row_table_offset - l.rows * 4);
  const std::uint64_t tasks = pieces_of(l.rows, kRowsPerTask);
  const RowsToWrite<T> rows{data.data(), &l, &plan.masks, &plan.row_table, &plan.group_offsets, s};
  parallel_for(tasks, threads, [&](std::size_t task) {
    write_rows<T>(rows, task * kRowsPerTask, std::min(l.rows, (task + 1) * kRowsPerTask));
  });
  stamp_checksums(l, out.first(l.stream_bytes), threads);
}

Status check_data(std::span<const std::byte> data, const EncodeParams& params, const char* call) {
  const auto bytes = ferry::detail::checked_mul(params.elements, params.element_size);
  if (!bytes || data.size() != *bytes) {
    return Status(ErrorCode::invalid_argument,
                  std::string(call) + ": data has " + std::to_string(data.size()) +
                      " bytes, not elements x element_size = " + std::to_string(params.elements) +
                      " x " + std::to_string(params.element_size));
  }
  return ok_status();
}

// Group sizes the automatic choice tries below the row count (ibp.hpp).
constexpr std::array<std::uint64_t, 4> kAutoGroupRows = {65536, 8192, 1024, 128};

template <typename T>
Result<std::vector<std::byte>> encode_typed(std::span<const std::byte> data,
                                            const EncodeParams& params) {
  std::optional<Plan<T>> best;
  if (params.group_rows != 0) {
    FERRY_ASSIGN_OR_RETURN(best, make_plan<T>(data, params));
  } else {
    const std::uint64_t rows = pieces_of(params.elements, params.row_elements);
    std::vector<std::uint64_t> candidates = {rows};
    for (std::uint64_t g : kAutoGroupRows) {
      if (g < rows) candidates.push_back(g);
    }
    Status refused;
    for (std::uint64_t g : candidates) {
      EncodeParams p = params;
      if (g > 0xffffffffu) continue;
      p.group_rows = static_cast<std::uint32_t>(g);
      if (auto layout = layout_for(p, 0); !layout.ok()) {
        refused = layout.status();  // a group that could reach 4 GiB: try the smaller ones
        continue;
      }
      FERRY_ASSIGN_OR_RETURN(Plan<T> plan, make_plan<T>(data, p));
      if (!best || plan.layout.stream_bytes < best->layout.stream_bytes) best = std::move(plan);
    }
    if (!best) {
      return refused.ok() ? Status(ErrorCode::invalid_argument, "ibp::encode: no group size fits")
                          : std::move(refused).with_context("ibp::encode: every group size");
    }
  }
  std::vector<std::byte> out(best->layout.stream_bytes);
  write_stream<T>(data, *best, out, thread_count(params.threads));
  return out;
}

template <typename T>
Status encode_into_typed(std::span<const std::byte> data, const EncodeParams& params,
                         std::span<std::byte> out, std::uint64_t* written) {
  FERRY_ASSIGN_OR_RETURN(Plan<T> plan, make_plan<T>(data, params));
  if (out.size() < plan.layout.stream_bytes) {
    return Status(ErrorCode::out_of_range,
                  "ibp::encode_into: out has " + std::to_string(out.size()) +
                      " bytes, the stream needs " + std::to_string(plan.layout.stream_bytes));
  }
  write_stream<T>(data, plan, out, thread_count(params.threads));
  if (written != nullptr) *written = plan.layout.stream_bytes;
  return ok_status();
}

}  // namespace

Status encode_into(std::span<const std::byte> data, const EncodeParams& params,
                   std::span<std::byte> out, std::uint64_t* written) {
  if (params.group_rows == 0) {
    return Status(ErrorCode::invalid_argument, "ibp::encode_into: group_rows = 0 (must be >= 1)");
  }
  FERRY_RETURN_IF_ERROR(layout_for(params, 0).status().with_context("ibp::encode_into"));
  FERRY_RETURN_IF_ERROR(check_data(data, params, "ibp::encode_into"));
  switch (params.element_size) {
    case 1: return encode_into_typed<std::uint8_t>(data, params, out, written);
    case 2: return encode_into_typed<std::uint16_t>(data, params, out, written);
    case 4: return encode_into_typed<std::uint32_t>(data, params, out, written);
    default: return encode_into_typed<std::uint64_t>(data, params, out, written);
  }
}

}  // namespace detail

Result<std::vector<std::byte>> encode(std::span<const std::byte> data, const EncodeParams& params) {
  // With group_rows = 0, the other parameters are checked with groups of one row (if those are
  // refused, every group size is).
  EncodeParams checked = params;
  if (checked.group_rows == 0) checked.group_rows = 1;
  FERRY_RETURN_IF_ERROR(detail::layout_for(checked, 0).status().with_context("ibp::encode"));
  FERRY_RETURN_IF_ERROR(detail::check_data(data, params, "ibp::encode"));
  switch (params.element_size) {
    case 1: return detail::encode_typed<std::uint8_t>(data, params);
    case 2: return detail::encode_typed<std::uint16_t>(data, params);
    case 4: return detail::encode_typed<std::uint32_t>(data, params);
    default: return detail::encode_typed<std::uint64_t>(data, params);
  }
}

}  // namespace ferry::ibp
