// The ibp_decode kernel (ops::IbpDecodeArgs): rows of an IBP stream (docs/IBP_FORMAT.md) back
// into their elements, the algorithm of runtime/src/ops/ibp_decode.hpp. One warp per item
// (several per block, a grid stride apart), one instantiation per element size.
//
// Per chunk of 32 x kPer elements (lane l: elements kPer l .. kPer l + kPer - 1 of it, kPer = 1
// for 4- and 8-byte elements, a word's worth for narrower ones): the lane's masks and values
// (read through the read-only cache: the rows of a group share them), its fields' lengths, a warp
// prefix sum of the lanes' bits, the fields read as the 32-bit words they lie in (clamped to the
// row's stored end), pdep over the masks' runs of zeros. Narrow elements are stored as the
// lane's word when the item's output starts on a word. Raw rows are word copies. A row whose length is not exactly its
// stored one is rewritten with zeros by the same lanes after a __syncwarp.
#include <cstdint>

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

__device__ __forceinline__ std::uint64_t low_bits(unsigned bits) {
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

// pdep: the low bits of `source` deposited, lowest first, into the set bits of `free`, a run of
// set bits at a time (masks leave few runs).
__device__ __forceinline__ std::uint64_t deposit(std::uint64_t source, std::uint64_t free) {
  std::uint64_t result = 0;
  while (free != 0) {
    const unsigned low = __ffsll(static_cast<long long>(free)) - 1;
    const std::uint64_t above = free >> low;
    const unsigned run =
        ~above == 0 ? 64 - low : __ffsll(static_cast<long long>(~above)) - 1;
    result |= (source & low_bits(run)) << low;
    source = run >= 64 ? 0 : source >> run;
    free &= ~(low_bits(run) << low);
  }
  return result;
}

// Word w of a row of `words` stored words, 0 past them.
__device__ __forceinline__ std::uint32_t row_word(const std::uint32_t* row, std::uint64_t words,
                                                  std::uint64_t w) {
  return w < words ? __ldg(row + w) : 0u;
}

// Stores element x of each lane below `count` at out[lane] (T elements); for narrow elements,
// when out is word-aligned, lanes first gather whole words by shuffles. Every lane calls it.
template <typename T>
__device__ __forceinline__ void store_chunk(T* out, unsigned count, T x, unsigned lane) {
  if constexpr (sizeof(T) < 4) {
    constexpr unsigned kPer = 4 / sizeof(T);
    if ((reinterpret_cast<std::uintptr_t>(out) & 3) == 0) {
      std::uint32_t word = 0;
#pragma unroll
      for (unsigned k = 0; k < kPer; ++k) {
        const T part = __shfl_sync(kFull, x, (lane * kPer + k) & 31);
        word |= std::uint32_t{part} << (8 * sizeof(T) * k);
      }
      const unsigned first = lane * kPer;
      if (first + kPer <= count) {
        reinterpret_cast<std::uint32_t*>(out)[lane] = word;
      } else {
        for (unsigned k = 0; first + k < count; ++k) {
          out[first + k] = static_cast<T>(word >> (8 * sizeof(T) * k));
        }
      }
      return;
    }
  }
  if (lane < count) out[lane] = x;
}

template <typename T>
__device__ void zero_elements(T* out, std::uint64_t begin, std::uint64_t end, unsigned lane) {
  for (std::uint64_t c = begin; c < end; c += 32) {
    store_chunk<T>(out + c, static_cast<unsigned>(end - c < 32 ? end - c : 32), T{0}, lane);
  }
}

// Decodes a mode 0 / 1 / 2 row of n elements into out; false when its bits (padded to 4 bytes)
// are not exactly `bytes`.
template <typename T>
__device__ bool decode_row(const IbpDecodeKernelArgs& a, const std::uint32_t* row,
                           std::uint64_t bytes, unsigned mode, const T* masks, const T* values,
                           std::uint64_t n, T* out, unsigned lane) {
  constexpr unsigned kWidth = 8 * sizeof(T);
  const std::uint64_t words = bytes / 4;
  if (mode == 2) {
    // Raw: the row's bytes as they were.
    const std::uint64_t raw = (n * sizeof(T) + 3) / 4 * 4;
    if (raw != bytes) return false;
    if ((reinterpret_cast<std::uintptr_t>(out) & 3) == 0) {
      const std::uint64_t whole = n * sizeof(T) / 4;
      auto* out_words = reinterpret_cast<std::uint32_t*>(out);
      for (std::uint64_t w = lane; w < whole; w += 32) out_words[w] = __ldg(row + w);
      const std::uint64_t tail = n * sizeof(T) - whole * 4;  // narrow elements only
      if (lane == 0 && tail != 0) {
        const std::uint32_t last = __ldg(row + whole);
        auto* tail_out = reinterpret_cast<unsigned char*>(out_words + whole);
        for (unsigned b = 0; b < tail; ++b) tail_out[b] = static_cast<unsigned char>(last >> (8 * b));
      }
    } else {
      const T* elements = reinterpret_cast<const T*>(row);  // 4-byte aligned: T's alignment
      for (std::uint64_t c = lane; c < n; c += 32) out[c] = elements[c];
    }
    return true;
  }
  // A lane takes kPer consecutive elements (a word of them for narrow elements), so that a lane
  // stores whole words and one scan serves kPer elements; the lane's bitmap bits lie in one word.
  constexpr unsigned kPer = sizeof(T) < 4 ? 4 / sizeof(T) : 1;
  const bool word_stores = (reinterpret_cast<std::uintptr_t>(out) & 3) == 0;
  std::uint64_t base = mode == 0 ? (n + 31) / 32 * 32 : 0;  // bit of the chunk's first field
  for (std::uint64_t c0 = 0; c0 < n; c0 += 32 * kPer) {
    const std::uint64_t first_c = c0 + kPer * lane;
    const unsigned mine = first_c >= n ? 0 : static_cast<unsigned>(n - first_c < kPer ? n - first_c : kPer);
    const std::uint32_t bitmap =
        mode == 0 && mine != 0 ? row_word(row, words, first_c / 32) >> (first_c % 32) : 0;
    T mask[kPer], value[kPer];
    bool matched[kPer];
    unsigned length[kPer];
    unsigned lane_bits = 0;
#pragma unroll
    for (unsigned k = 0; k < kPer; ++k) {
      const bool in_row = k < mine;
      mask[k] = in_row ? __ldg(masks + first_c + k) : T{0};
      value[k] = in_row ? __ldg(values + first_c + k) : T{0};
      matched[k] = in_row && (mode == 1 || ((bitmap >> k) & 1u) != 0);
      length[k] = !in_row ? 0 : matched[k] ? kWidth - __popcll(mask[k]) : kWidth;
      lane_bits += length[k];
    }
    unsigned sum = lane_bits;
#pragma unroll
    for (unsigned step = 1; step < 32; step <<= 1) {
      const unsigned other = __shfl_up_sync(kFull, sum, step);
      if (lane >= step) sum += other;
    }
    const unsigned total = __shfl_sync(kFull, sum, 31);
    std::uint64_t position = base + sum - lane_bits;
    std::uint32_t packed = 0;  // narrow elements: the lane's word
#pragma unroll
    for (unsigned k = 0; k < kPer; ++k) {
      std::uint64_t field = 0;
      if (length[k] != 0) {
        const std::uint64_t w = position >> 5;
        const unsigned shift = position & 31;
        const std::uint64_t first = row_word(row, words, w);
        const std::uint64_t second = shift + length[k] > 32 ? row_word(row, words, w + 1) : 0;
        const std::uint64_t third = shift + length[k] > 64 ? row_word(row, words, w + 2) : 0;
        field = (first | second << 32) >> shift;
        if (shift != 0) field |= third << (64 - shift);
        field &= low_bits(length[k]);
      }
      position += length[k];
      const T x = static_cast<T>(
          matched[k] ? (std::uint64_t{value[k]} | deposit(field, ~std::uint64_t{mask[k]} & low_bits(kWidth)))
                     : field);
      if constexpr (kPer > 1) {
        packed |= std::uint32_t{x} << (kWidth * k);
        if (!word_stores && k < mine) out[first_c + k] = x;
      } else {
        if (mine != 0) out[first_c] = x;
      }
    }
    if constexpr (kPer > 1) {
      if (word_stores) {
        if (mine == kPer) {
          reinterpret_cast<std::uint32_t*>(out + first_c)[0] = packed;
        } else {
          for (unsigned k = 0; k < mine; ++k) out[first_c + k] = static_cast<T>(packed >> (kWidth * k));
        }
      }
    }
    base += total;
  }
  return (base + 31) / 32 * 4 == bytes;
}

template <unsigned kSize>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    ibp_decode_kernel(const __grid_constant__ IbpDecodeKernelArgs a) {
  using T = typename Element<kSize>::type;
  const unsigned lane = threadIdx.x & 31;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * kWarpsPerBlock;
  const auto* stream = static_cast<const unsigned char*>(a.stream);
  const auto* group_table = reinterpret_cast<const std::uint64_t*>(stream + a.group_table_offset);
  const auto* row_table = reinterpret_cast<const std::uint32_t*>(stream + a.row_table_offset);
  for (std::uint64_t item = std::uint64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
       item < a.items; item += warps) {
    T* out = static_cast<T*>(a.output) + item * a.row_elements;
    const std::uint64_t row = a.gather ? std::uint64_t{__ldg(a.indices + item)} : a.first_row + item;
    if (row >= a.rows) {  // gather only
      zero_elements<T>(out, 0, a.row_elements, lane);
      if (lane == 0) atomicOr(a.status, kIndexOutOfRange);
      continue;
    }
    const std::uint64_t n = row == a.rows - 1 ? a.last_row_elements : a.row_elements;
    const std::uint64_t g = row / a.group_rows;
    const std::uint64_t group_start = __ldg(group_table + g);
    const std::uint64_t group_end = __ldg(group_table + g + 1);
    const std::uint32_t entry = __ldg(row_table + row);
    const unsigned mode = entry & 3u;
    const std::uint64_t offset = entry & ~3u;
    const bool last_in_group = (row + 1) % a.group_rows == 0 || row + 1 == a.rows;
    bool ok = group_start <= group_end && group_end <= a.data_bytes && group_start % 4 == 0 &&
              mode <= 2;
    const std::uint64_t group_bytes = group_end - group_start;
    const std::uint64_t next = last_in_group ? group_bytes : (__ldg(row_table + row + 1) & ~3u);
    ok = ok && offset <= next && next <= group_bytes;
    if (ok) {
      const T* masks = reinterpret_cast<const T*>(stream + a.masks_offset + g * a.mask_block_bytes);
      const auto* row_words = reinterpret_cast<const std::uint32_t*>(
          stream + a.data_offset + group_start + offset);
      ok = decode_row<T>(a, row_words, next - offset, mode, masks, masks + a.row_elements, n, out,
                         lane);
      __syncwarp();  // the zeros below after every lane's stores
    }
    if (!ok) {
      zero_elements<T>(out, 0, n, lane);
      if (lane == 0) atomicOr(a.status, kCorrupt);
    }
    if (a.gather) zero_elements<T>(out, n, a.row_elements, lane);
  }
}

template <unsigned kSize>
cudaError_t enqueue(const IbpDecodeKernelArgs& launch, unsigned max_blocks, cudaStream_t stream) {
  const std::uint64_t wanted = (launch.items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const unsigned blocks =
      static_cast<unsigned>(wanted < max_blocks ? wanted : (max_blocks == 0 ? 1 : max_blocks));
  ibp_decode_kernel<kSize><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(launch);
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
      misaligned(launch.output, es) || misaligned(launch.status, 4) ||
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
