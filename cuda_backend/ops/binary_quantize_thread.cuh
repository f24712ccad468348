// The binary_quantize kernel's per-thread work (host and device, so host-side tests run the same
// code: tests/unit/cuda/test_cuda_binary_quantize_body.cpp).
//
// Work item: one 32-bit code word of one row, items numbered row by row, so consecutive threads
// store consecutive words. A word reads its (up to) 32 elements and thresholds: with 16-byte
// vector loads when every row and the thresholds start on 16 bytes (then so does every word's
// group: 128 or 64 bytes into its row), else element by element. Everything is integer code: the
// 16-bit types are widened to float32 bits exactly, and "x > t" compares sign-magnitude keys, so
// neither -ftz nor the device's denormal handling can change a bit.
#pragma once

#include <cuda_runtime.h>  // __host__ / __device__ (empty for a plain C++ compiler), uint4

#include <cstdint>
#include <cstring>

#include "binary_quantize_launch.hpp"

// Unrolls the fixed-length loops over a word's vectors on the device (the host compiler, which
// also sees this file, does not know the pragma).
#ifdef __CUDA_ARCH__
#define FERRY_BINARY_QUANTIZE_UNROLL _Pragma("unroll")
#else
#define FERRY_BINARY_QUANTIZE_UNROLL
#endif

namespace ferry::cuda {

// What the kernel gets: BinaryQuantizeKernelArgs with its per-launch math done on the host.
struct BinaryQuantizeKernelParams {
  const unsigned char* input = nullptr;
  unsigned char* codes = nullptr;
  const unsigned char* thresholds = nullptr;  // null: every threshold is 0.0f
  std::uint64_t row_stride = 0;
  std::uint32_t dims = 0;
  std::uint32_t words_per_row = 0;
  std::uint64_t items = 0;  // rows * words_per_row
  // The grid's thread count, and the same as whole rows and words (stride_words < words_per_row),
  // so the grid-stride loop moves its (row, word) position by additions only.
  std::uint64_t thread_count = 0;
  std::uint64_t stride_rows = 0;
  std::uint32_t stride_words = 0;
};

__host__ __device__ constexpr std::uint32_t binary_quantize_element_bytes(
    BinaryQuantizeInputType type) {
  return type == BinaryQuantizeInputType::float32 ? 4u : 2u;
}

__host__ __device__ constexpr std::uint32_t binary_quantize_words_per_row(std::uint32_t dims) {
  return (dims / 64u + (dims % 64u != 0 ? 1u : 0u)) * 2u;
}

// Loads and stores of raw bits: typed on the device (the host checked the alignment); memcpy on
// the host, where the test's bytes are no objects of these types.
template <typename T>
__host__ __device__ inline T binary_quantize_load(const unsigned char* address) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const T*>(address);
#else
  T value;
  std::memcpy(&value, address, sizeof value);
  return value;
#endif
}

__host__ __device__ inline void binary_quantize_store(unsigned char* address,
                                                      std::uint32_t word) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<std::uint32_t*>(address) = word;
#else
  std::memcpy(address, &word, sizeof word);
#endif
}

// float32 bits of a float16, exactly: subnormal halves become normal floats.
__host__ __device__ inline std::uint32_t binary_quantize_half_bits(std::uint32_t half) {
  const std::uint32_t sign = (half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1fu) return sign | 0x7f800000u | (mantissa << 13);  // infinity, NaN
  if (exponent != 0) return sign | ((exponent + (127u - 15u)) << 23) | (mantissa << 13);
  if (mantissa == 0) return sign;
  // mantissa * 2^-24 with its leading 1 at bit p (0..9): 2^(p - 24) times 1.fraction.
#ifdef __CUDA_ARCH__
  const std::uint32_t p = 31u - static_cast<std::uint32_t>(__clz(mantissa));
#else
  const std::uint32_t p = 31u - static_cast<std::uint32_t>(__builtin_clz(mantissa));
#endif
  return sign | ((p + (127u - 24u)) << 23) | ((mantissa << (23u - p)) & 0x7fffffu);
}

// float32 bits of a raw element (the low 16 bits for the 16-bit types).
template <BinaryQuantizeInputType kType>
__host__ __device__ inline std::uint32_t binary_quantize_float_bits(std::uint32_t raw) {
  if (kType == BinaryQuantizeInputType::float16) return binary_quantize_half_bits(raw);
  if (kType == BinaryQuantizeInputType::bfloat16) return raw << 16;
  return raw;
}

// 1 when the float32 x > t (IEEE: false with a NaN, -0 == +0, subnormals kept), else 0. For
// non-NaN floats, sign-magnitude keys (-0 and +0 both 0) are ordered as the values.
__host__ __device__ inline std::uint32_t binary_quantize_greater(std::uint32_t x,
                                                                 std::uint32_t t) {
  const std::uint32_t x_magnitude = x & 0x7fffffffu;
  const std::uint32_t t_magnitude = t & 0x7fffffffu;
  if (x_magnitude > 0x7f800000u || t_magnitude > 0x7f800000u) return 0u;
  const std::int32_t x_key = (x >> 31) != 0 ? -static_cast<std::int32_t>(x_magnitude)
                                            : static_cast<std::int32_t>(x_magnitude);
  const std::int32_t t_key = (t >> 31) != 0 ? -static_cast<std::int32_t>(t_magnitude)
                                            : static_cast<std::int32_t>(t_magnitude);
  return x_key > t_key ? 1u : 0u;
}

template <bool kThresholds>
__host__ __device__ inline std::uint32_t binary_quantize_threshold(const unsigned char* t,
                                                                   std::uint32_t index) {
  return kThresholds ? binary_quantize_load<std::uint32_t>(t + 4u * index) : 0u;
}

template <bool kThresholds>
__host__ __device__ inline uint4 binary_quantize_threshold_vector(const unsigned char* t,
                                                                  std::uint32_t index) {
  return kThresholds ? binary_quantize_load<uint4>(t + 16u * index) : make_uint4(0, 0, 0, 0);
}

// The code word `word` of row `row`.
template <BinaryQuantizeInputType kType, bool kThresholds, bool kVector>
__host__ __device__ inline std::uint32_t binary_quantize_word(
    const BinaryQuantizeKernelParams& p, std::uint64_t row, std::uint32_t word) {
  constexpr std::uint32_t kElementBytes = binary_quantize_element_bytes(kType);
  const std::uint32_t first = word * 32u;  // the word's first dimension
  if (first >= p.dims) return 0u;          // padding
  const std::uint32_t count = p.dims - first < 32u ? p.dims - first : 32u;
  const unsigned char* x = p.input + row * p.row_stride + std::uint64_t{first} * kElementBytes;
  const unsigned char* t = kThresholds ? p.thresholds + std::uint64_t{first} * 4u : nullptr;
  std::uint32_t bits = 0;
  if (kVector && count == 32u) {
    if (kType == BinaryQuantizeInputType::float32) {
FERRY_BINARY_QUANTIZE_UNROLL
      for (std::uint32_t k = 0; k < 8u; ++k) {
        const uint4 v = binary_quantize_load<uint4>(x + 16u * k);
        const uint4 th = binary_quantize_threshold_vector<kThresholds>(t, k);
        bits |= (binary_quantize_greater(v.x, th.x) | (binary_quantize_greater(v.y, th.y) << 1) |
                 (binary_quantize_greater(v.z, th.z) << 2) |
                 (binary_quantize_greater(v.w, th.w) << 3))
                << (4u * k);
      }
    } else {
      // 8 elements per vector: element 2c of it is the low half of component c (little endian).
FERRY_BINARY_QUANTIZE_UNROLL
      for (std::uint32_t k = 0; k < 4u; ++k) {
        const uint4 v = binary_quantize_load<uint4>(x + 16u * k);
        const uint4 low = binary_quantize_threshold_vector<kThresholds>(t, 2u * k);
        const uint4 high = binary_quantize_threshold_vector<kThresholds>(t, 2u * k + 1u);
        const std::uint32_t raw[4] = {v.x, v.y, v.z, v.w};
        const std::uint32_t th[8] = {low.x, low.y, low.z, low.w, high.x, high.y, high.z, high.w};
FERRY_BINARY_QUANTIZE_UNROLL
        for (std::uint32_t c = 0; c < 4u; ++c) {
          const std::uint32_t even = binary_quantize_float_bits<kType>(raw[c] & 0xffffu);
          const std::uint32_t odd = binary_quantize_float_bits<kType>(raw[c] >> 16);
          bits |= (binary_quantize_greater(even, th[2u * c]) |
                   (binary_quantize_greater(odd, th[2u * c + 1u]) << 1))
                  << (8u * k + 2u * c);
        }
      }
    }
    return bits;
  }
  for (std::uint32_t b = 0; b < count; ++b) {
    const std::uint32_t raw = kType == BinaryQuantizeInputType::float32
                                  ? binary_quantize_load<std::uint32_t>(x + 4u * b)
                                  : binary_quantize_load<std::uint16_t>(x + 2u * b);
    bits |= binary_quantize_greater(binary_quantize_float_bits<kType>(raw),
                                    binary_quantize_threshold<kThresholds>(t, b))
            << b;
  }
  return bits;
}

// Thread `thread` (< p.thread_count) of the grid: its items, a grid stride apart.
template <BinaryQuantizeInputType kType, bool kThresholds, bool kVector>
__host__ __device__ inline void binary_quantize_thread(const BinaryQuantizeKernelParams& p,
                                                       std::uint64_t thread) {
  std::uint64_t row = thread / p.words_per_row;
  std::uint32_t word = static_cast<std::uint32_t>(thread % p.words_per_row);
  for (std::uint64_t item = thread; item < p.items; item += p.thread_count) {
    binary_quantize_store(p.codes + 4u * item,
                          binary_quantize_word<kType, kThresholds, kVector>(p, row, word));
    row += p.stride_rows;
    word += p.stride_words;
    if (word >= p.words_per_row) {
      word -= p.words_per_row;
      ++row;
    }
  }
}

// Valid arguments: rows and dims not 0, every pointer aligned to what it is read or written by.
inline bool binary_quantize_launch_valid(const BinaryQuantizeKernelArgs& launch) {
  const std::uint32_t element = binary_quantize_element_bytes(launch.input_type);
  const auto input = reinterpret_cast<std::uintptr_t>(launch.input);
  return launch.rows != 0 && launch.dims != 0 && launch.input != nullptr &&
         launch.codes != nullptr && input % element == 0 && launch.row_stride % element == 0 &&
         reinterpret_cast<std::uintptr_t>(launch.codes) % 4 == 0 &&
         reinterpret_cast<std::uintptr_t>(launch.thresholds) % 4 == 0;
}

// Whether a valid launch can take the vector loads: every row and the thresholds on 16 bytes.
inline bool binary_quantize_vector_loads(const BinaryQuantizeKernelArgs& launch) {
  return reinterpret_cast<std::uintptr_t>(launch.input) % 16 == 0 &&
         (launch.rows == 1 || launch.row_stride % 16 == 0) &&
         reinterpret_cast<std::uintptr_t>(launch.thresholds) % 16 == 0;
}

// Arguments for a valid launch run by thread_count (> 0) threads.
inline BinaryQuantizeKernelParams make_binary_quantize_params(
    const BinaryQuantizeKernelArgs& launch, std::uint64_t thread_count) {
  BinaryQuantizeKernelParams p;
  p.input = static_cast<const unsigned char*>(launch.input);
  p.codes = static_cast<unsigned char*>(launch.codes);
  p.thresholds = static_cast<const unsigned char*>(launch.thresholds);
  p.row_stride = launch.row_stride;
  p.dims = launch.dims;
  p.words_per_row = binary_quantize_words_per_row(launch.dims);
  p.items = std::uint64_t{launch.rows} * p.words_per_row;
  p.thread_count = thread_count;
  p.stride_rows = thread_count / p.words_per_row;
  p.stride_words = static_cast<std::uint32_t>(thread_count % p.words_per_row);
  return p;
}

}  // namespace ferry::cuda
