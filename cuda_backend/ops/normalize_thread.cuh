// The normalize kernel's per-thread work (host and device, so host-side tests run the same code).
//
// Work item: a run of up to kNormalizeRunPixels consecutive output pixels of one row (n, y), all
// channels. Consecutive threads take consecutive runs of a row, then of the next rows, so their
// stores cover consecutive addresses (nchw output: per channel plane; nhwc: one interleaved
// stretch). When every run is full and aligned (vector_stores), a run's output leaves in 16- or
// 8-byte stores. The output conversion comes from an Encoder, so the host tests can check the
// index math with a host encoder while the kernel uses the device's fma and conversions.
//
// The common case, packed 3-channel NHWC input to NCHW output, has a path of its own (see
// normalize_packed_rgb below): 32-bit source loads and several runs in flight per thread.
#pragma once

#include <cuda_runtime.h>  // __host__ / __device__ (empty for a plain C++ compiler), uint2, uint4

#include <cstdint>
#include <cstring>

#include "../kernels/fast_divisor.cuh"
#include "normalize_launch.hpp"

namespace ferry::cuda {

inline constexpr std::uint32_t kNormalizeRunPixels = 4;

__host__ __device__ constexpr std::uint32_t normalize_element_bytes(NormalizeOutputType type) {
  return type == NormalizeOutputType::float32 ? 4u : 2u;
}

// Bytes per store on the vector path: a run's output (one channel's for nchw) is a multiple of 8
// bytes; 16-byte stores where it is a multiple of 16. dst must be aligned to this.
__host__ __device__ constexpr std::uint32_t normalize_vector_bytes(NormalizeOutputType type,
                                                                   NormalizeOutputLayout layout,
                                                                   std::uint32_t channels) {
  const std::uint32_t run_bytes = kNormalizeRunPixels * normalize_element_bytes(type) *
                                  (layout == NormalizeOutputLayout::nhwc ? channels : 1u);
  return run_bytes % 16u == 0 ? 16u : 8u;
}

// What the kernel gets: NormalizeKernelArgs with its per-launch math done on the host.
struct NormalizeKernelParams {
  const unsigned char* src = nullptr;
  unsigned char* dst = nullptr;
  std::uint32_t height = 0;
  std::uint32_t width = 0;
  std::uint32_t runs_per_row = 0;  // width / kNormalizeRunPixels, rounded up
  std::uint64_t runs = 0;          // work items: batch * height * runs_per_row
  std::uint64_t image_stride = 0;
  std::uint64_t row_stride = 0;
  std::uint64_t channel_offset[kNormalizeMaxChannels] = {};  // c * channel_stride
  // Output column x reads byte column_origin + x * column_step of its row, computed modulo 2^64:
  // mirrored, the origin is the last pixel and the step is -pixel_stride.
  std::uint64_t column_origin = 0;
  std::uint64_t column_step = 0;
  std::uint64_t image_elements = 0;  // output elements per image: channels * height * width
  std::uint64_t plane_elements = 0;  // height * width
  // width is a multiple of kNormalizeRunPixels and dst of normalize_vector_bytes: every run is
  // full and its stores are aligned.
  bool vector_stores = false;
  // Take the packed-RGB path (normalize_packed_rgb: vector stores, and every run's 12 source bytes
  // are 3 aligned words). Its work items are numbered in 32 bits and split by division.
  bool packed_rgb = false;
  FastDivisor runs_per_image_divisor;  // height * runs_per_row
  FastDivisor runs_per_row_divisor;
  // The grid's thread count, and the same as whole images, rows and runs, so the grid-stride loop
  // moves its (n, y, run) position by additions only.
  std::uint64_t thread_count = 0;
  std::uint32_t stride_images = 0;
  std::uint32_t stride_rows = 0;  // < height
  std::uint32_t stride_runs = 0;  // < runs_per_row
  float scale[kNormalizeMaxChannels] = {};
  float bias[kNormalizeMaxChannels] = {};
};

// Valid dimensions: none is 0, and 1 to kNormalizeMaxChannels channels.
inline bool normalize_launch_valid(const NormalizeKernelArgs& launch) {
  return launch.batch != 0 && launch.height != 0 && launch.width != 0 && launch.channels != 0 &&
         launch.channels <= kNormalizeMaxChannels;
}

inline std::uint32_t normalize_runs_per_row(std::uint32_t width) {
  return width / kNormalizeRunPixels + (width % kNormalizeRunPixels != 0 ? 1u : 0u);
}

// The work items of a valid launch.
inline std::uint64_t normalize_work_items(const NormalizeKernelArgs& launch) {
  return std::uint64_t{launch.batch} * launch.height * normalize_runs_per_row(launch.width);
}

// Runs per thread and batch on the packed-RGB path: their loads are all issued before the first
// store, so a thread has 4 * 12 source bytes in flight, not 12. A thread's stores wait for its
// loads, so the bytes loading at once bound how fast the output can be written.
inline constexpr std::uint32_t kNormalizePackedRuns = 4;

// Whether a valid launch takes the packed-RGB path: 3 channels interleaved in tightly packed
// pixels (pixel_stride 3, channel_stride 1), NCHW output with vector stores (width a multiple of
// kNormalizeRunPixels, dst aligned), and every run's first source byte 4-byte aligned. A run
// starts at source column x0 (or, mirrored, width - 4 - x0) with x0 a multiple of 4, so its first
// byte is at a multiple of 12 from its row: src and the strides that are used (image_stride when
// batch > 1, row_stride when height > 1) being multiples of 4 is enough. Fewer than 2^31 work
// items (2^33 pixels), so that their numbers and quotients fit in 32 bits.
inline bool normalize_packed_rgb(const NormalizeKernelArgs& launch) {
  const std::uint32_t vector_bytes =
      normalize_vector_bytes(launch.output_type, NormalizeOutputLayout::nchw, 3);
  return normalize_launch_valid(launch) && normalize_work_items(launch) < (1u << 31) &&
         launch.channels == 3 && launch.pixel_stride == 3 && launch.channel_stride == 1 &&
         launch.output_layout == NormalizeOutputLayout::nchw &&
         launch.width % kNormalizeRunPixels == 0 &&
         reinterpret_cast<std::uintptr_t>(launch.dst) % vector_bytes == 0 &&
         reinterpret_cast<std::uintptr_t>(launch.src) % 4 == 0 &&
         (launch.batch == 1 || launch.image_stride % 4 == 0) &&
         (launch.height == 1 || launch.row_stride % 4 == 0);
}

// Arguments for a valid launch run by thread_count (> 0) threads.
inline NormalizeKernelParams make_normalize_params(const NormalizeKernelArgs& launch,
                                         std::uint32_t thread_count) {
  NormalizeKernelParams args;
  args.src = static_cast<const unsigned char*>(launch.src);
  args.dst = static_cast<unsigned char*>(launch.dst);
  args.height = launch.height;
  args.width = launch.width;
  args.runs_per_row = normalize_runs_per_row(launch.width);
  args.runs = normalize_work_items(launch);
  args.image_stride = launch.image_stride;
  args.row_stride = launch.row_stride;
  for (std::uint32_t c = 0; c < launch.channels && c < kNormalizeMaxChannels; ++c) {
    args.channel_offset[c] = c * launch.channel_stride;
    args.scale[c] = launch.scale[c];
    args.bias[c] = launch.bias[c];
  }
  const std::uint64_t pixel_stride = launch.pixel_stride;
  args.column_origin = launch.mirror ? std::uint64_t{launch.width - 1} * pixel_stride : 0;
  args.column_step = launch.mirror ? 0 - pixel_stride : pixel_stride;
  args.plane_elements = std::uint64_t{launch.height} * launch.width;
  args.image_elements = args.plane_elements * launch.channels;
  const std::uint32_t vector_bytes =
      normalize_vector_bytes(launch.output_type, launch.output_layout, launch.channels);
  args.vector_stores = launch.width % kNormalizeRunPixels == 0 &&
                       reinterpret_cast<std::uintptr_t>(launch.dst) % vector_bytes == 0;
  args.packed_rgb = normalize_packed_rgb(launch);
  if (args.packed_rgb) {
    args.runs_per_image_divisor = make_fast_divisor(launch.height * args.runs_per_row);
    args.runs_per_row_divisor = make_fast_divisor(args.runs_per_row);
  }
  args.thread_count = thread_count;
  const std::uint32_t stride_rows_total = thread_count / args.runs_per_row;
  args.stride_runs = thread_count % args.runs_per_row;
  args.stride_rows = stride_rows_total % launch.height;
  args.stride_images = stride_rows_total / launch.height;
  return args;
}

// Stores kCount output elements (their bits, 16-bit ones in the low half) at `address`, aligned to
// kVectorBytes, as 16- or 8-byte vectors.
template <NormalizeOutputType kType, std::uint32_t kVectorBytes, std::uint32_t kCount>
__host__ __device__ inline void store_vectors(unsigned char* address,
                                              const std::uint32_t (&elements)[kCount]) {
  constexpr std::uint32_t kWords = kCount * normalize_element_bytes(kType) / 4;
  static_assert((kWords * 4) % kVectorBytes == 0, "a run is a whole number of vectors");
  std::uint32_t words[kWords];
  if constexpr (kType == NormalizeOutputType::float32) {
    for (std::uint32_t i = 0; i < kWords; ++i) words[i] = elements[i];
  } else {
    // Little endian: the element at the lower address is the low half of the word.
    for (std::uint32_t i = 0; i < kWords; ++i) {
      words[i] = elements[2 * i] | (elements[2 * i + 1] << 16);
    }
  }
  if constexpr (kVectorBytes == 16) {
    auto* vectors = reinterpret_cast<uint4*>(address);
    for (std::uint32_t i = 0; i < kWords / 4; ++i) {
      vectors[i] = make_uint4(words[4 * i], words[4 * i + 1], words[4 * i + 2], words[4 * i + 3]);
    }
  } else {
    auto* vectors = reinterpret_cast<uint2*>(address);
    for (std::uint32_t i = 0; i < kWords / 2; ++i) {
      vectors[i] = make_uint2(words[2 * i], words[2 * i + 1]);
    }
  }
}

template <NormalizeOutputType kType>
__host__ __device__ inline void store_element(unsigned char* address, std::uint32_t element) {
  if constexpr (kType == NormalizeOutputType::float32) {
    *reinterpret_cast<std::uint32_t*>(address) = element;
  } else {
    *reinterpret_cast<std::uint16_t*>(address) = static_cast<std::uint16_t>(element);
  }
}

// One work item: the run starting at output pixel (n, y, run * kNormalizeRunPixels). All loads
// come before the first store: dst is not restrict-qualified, so the compiler could not move a
// load above a store.
template <NormalizeOutputType kType, NormalizeOutputLayout kLayout, std::uint32_t kChannels,
          typename Encoder>
__host__ __device__ inline void normalize_run(const NormalizeKernelParams& args, std::uint32_t n,
                                              std::uint32_t y, std::uint32_t run) {
  constexpr bool kPlanar = kLayout == NormalizeOutputLayout::nchw;
  constexpr std::uint32_t kElementBytes = normalize_element_bytes(kType);
  constexpr std::uint32_t kPixels = kNormalizeRunPixels;
  const std::uint32_t x0 = run * kPixels;  // < width
  const unsigned char* row = args.src + n * args.image_stride + y * args.row_stride;
  const std::uint64_t column = args.column_origin + x0 * args.column_step;
  const std::uint64_t image = n * args.image_elements;     // first output element of image n
  const std::uint64_t pixel = std::uint64_t{y} * args.width + x0;  // pixel index within it

  std::uint32_t values[kPixels][kChannels] = {};
  if (args.vector_stores) {
    for (std::uint32_t j = 0; j < kPixels; ++j) {
      for (std::uint32_t c = 0; c < kChannels; ++c) {
        values[j][c] = row[column + j * args.column_step + args.channel_offset[c]];
      }
    }
    if constexpr (kPlanar) {
      constexpr std::uint32_t kVectorBytes = normalize_vector_bytes(kType, kLayout, kChannels);
      for (std::uint32_t c = 0; c < kChannels; ++c) {
        std::uint32_t elements[kPixels];
        for (std::uint32_t j = 0; j < kPixels; ++j) {
          elements[j] =
              Encoder::bits(static_cast<float>(values[j][c]), args.scale[c], args.bias[c]);
        }
        const std::uint64_t first = image + c * args.plane_elements + pixel;
        store_vectors<kType, kVectorBytes>(args.dst + first * kElementBytes, elements);
      }
    } else {
      constexpr std::uint32_t kVectorBytes = normalize_vector_bytes(kType, kLayout, kChannels);
      std::uint32_t elements[kPixels * kChannels];
      for (std::uint32_t j = 0; j < kPixels; ++j) {
        for (std::uint32_t c = 0; c < kChannels; ++c) {
          elements[j * kChannels + c] =
              Encoder::bits(static_cast<float>(values[j][c]), args.scale[c], args.bias[c]);
        }
      }
      const std::uint64_t first = image + pixel * kChannels;
      store_vectors<kType, kVectorBytes>(args.dst + first * kElementBytes, elements);
    }
    return;
  }

  // Element by element: the last run of a row may be short, and dst may be aligned to the
  // element size only.
  const std::uint32_t left = args.width - x0;
  const std::uint32_t count = left < kPixels ? left : kPixels;
  for (std::uint32_t j = 0; j < kPixels; ++j) {
    if (j >= count) break;
    for (std::uint32_t c = 0; c < kChannels; ++c) {
      values[j][c] = row[column + j * args.column_step + args.channel_offset[c]];
    }
  }
  for (std::uint32_t j = 0; j < kPixels; ++j) {
    if (j >= count) break;
    for (std::uint32_t c = 0; c < kChannels; ++c) {
      const std::uint32_t element =
          Encoder::bits(static_cast<float>(values[j][c]), args.scale[c], args.bias[c]);
      const std::uint64_t index = kPlanar ? image + c * args.plane_elements + pixel + j
                                          : image + (pixel + j) * kChannels + c;
      store_element<kType>(args.dst + index * kElementBytes, element);
    }
  }
}

// Thread `thread` of args.thread_count does work items thread, thread + thread_count, ...
template <NormalizeOutputType kType, NormalizeOutputLayout kLayout, std::uint32_t kChannels,
          typename Encoder>
__host__ __device__ inline void normalize_thread(const NormalizeKernelParams& args, std::uint32_t thread) {
  // Item i is run i % runs_per_row of row i / runs_per_row, in image-major order. One division
  // here; the loop below carries instead. y and n are 64-bit so the carries cannot overflow.
  std::uint32_t run = thread % args.runs_per_row;
  const std::uint32_t first_row = thread / args.runs_per_row;
  std::uint64_t y = first_row % args.height;
  std::uint64_t n = first_row / args.height;
  for (std::uint64_t item = thread; item < args.runs; item += args.thread_count) {
    // item < runs, so n < batch and the narrowing is exact.
    normalize_run<kType, kLayout, kChannels, Encoder>(args, static_cast<std::uint32_t>(n),
                                                      static_cast<std::uint32_t>(y), run);
    run += args.stride_runs;  // both < runs_per_row <= 2^30: no overflow
    y += args.stride_rows;
    n += args.stride_images;
    if (run >= args.runs_per_row) {
      run -= args.runs_per_row;
      ++y;
    }
    if (y >= args.height) {
      y -= args.height;
      ++n;
    }
  }
}

// The uint32 at `address` (4-byte aligned on the packed-RGB path). Host code reads it with memcpy
// (no aliasing or alignment assumptions); device code with one 32-bit load.
__host__ __device__ inline std::uint32_t load_word(const unsigned char* address) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const std::uint32_t*>(address);
#else
  std::uint32_t word = 0;
  std::memcpy(&word, address, sizeof(word));
  return word;
#endif
}

// Byte `index` (0 = lowest address) of little-endian words, as a float (exact: 0 to 255). On the
// device one PRMT places the byte under the exponent of 2^23 and one FADD removes 2^23, instead of
// a byte extract and an integer-to-float conversion.
template <std::uint32_t kIndex, std::uint32_t kWords>
__host__ __device__ inline float byte_value(const std::uint32_t (&words)[kWords]) {
  static_assert(kIndex / 4 < kWords, "byte inside the words");
#ifdef __CUDA_ARCH__
  // Selector nibbles, low to high: the byte, then bytes 4, 4, 7 of {0x4B000000, word}.
  constexpr std::uint32_t kSelector = 0x7440u | (kIndex % 4);
  return __uint_as_float(__byte_perm(words[kIndex / 4], 0x4B000000u, kSelector)) - 8388608.0f;
#else
  return static_cast<float>((words[kIndex / 4] >> (8 * (kIndex % 4))) & 0xFFu);
#endif
}

// Converts one run's 12 source bytes (4 pixels of R, G, B in memory order) and stores them as
// 4 elements in each of the 3 channel planes. Output pixel j is source pixel j, or 3 - j mirrored
// (the run's source pixels are contiguous either way; mirrored, the lowest address is the last
// output pixel's).
template <NormalizeOutputType kType, bool kMirror, typename Encoder, std::uint32_t kChannel>
__host__ __device__ inline void store_packed_channel(const NormalizeKernelParams& args,
                                                     const std::uint32_t (&words)[3],
                                                     unsigned char* first) {
  constexpr std::uint32_t kVectorBytes =
      normalize_vector_bytes(kType, NormalizeOutputLayout::nchw, 3);
  constexpr std::uint32_t kFirst = kMirror ? 9 + kChannel : kChannel;  // source byte of pixel 0
  constexpr std::uint32_t kSecond = kMirror ? 6 + kChannel : 3 + kChannel;
  constexpr std::uint32_t kThird = kMirror ? 3 + kChannel : 6 + kChannel;
  constexpr std::uint32_t kFourth = kMirror ? kChannel : 9 + kChannel;
  const float scale = args.scale[kChannel];
  const float bias = args.bias[kChannel];
  const std::uint32_t elements[kNormalizeRunPixels] = {
      Encoder::bits(byte_value<kFirst>(words), scale, bias),
      Encoder::bits(byte_value<kSecond>(words), scale, bias),
      Encoder::bits(byte_value<kThird>(words), scale, bias),
      Encoder::bits(byte_value<kFourth>(words), scale, bias)};
  store_vectors<kType, kVectorBytes>(
      first + kChannel * args.plane_elements * normalize_element_bytes(kType), elements);
}

// The packed-RGB path (args.packed_rgb): the same work items as normalize_thread, the same
// grid-stride order, but taken kNormalizePackedRuns at a time: thread t's batch is items
// t + u * thread_count for u below kNormalizePackedRuns (consecutive threads still take
// consecutive runs, so a warp's loads and stores stay contiguous), all their loads first, then
// their stores. The kernel launches enough threads for one batch each.
//
// Positions come from the item number by two divisions, not carried: a thread keeps only its
// batch's first item and the 12 loaded words per run while the loads are in flight. width is
// runs_per_row runs exactly, so item i = (n * height + y) * runs_per_row + run starts at output
// element 4 * i + n * 2 * plane_elements of channel plane 0 (image n starts at n * 3 planes).
template <NormalizeOutputType kType, bool kMirror, typename Encoder>
__host__ __device__ inline void normalize_packed_rgb_thread(const NormalizeKernelParams& args,
                                                            std::uint32_t thread) {
  constexpr std::uint32_t kRuns = kNormalizePackedRuns;
  constexpr std::uint32_t kElementBytes = normalize_element_bytes(kType);
  // The lowest source pixel of the run starting at output column x0 is x0, mirrored x0 + 3.
  constexpr std::uint32_t kLowestPixel = kMirror ? kNormalizeRunPixels - 1 : 0;
  // runs < 2^31 and thread_count <= 2^28, so no item number below overflows 32 bits.
  const auto runs = static_cast<std::uint32_t>(args.runs);
  const auto stride = static_cast<std::uint32_t>(args.thread_count);
  for (std::uint32_t item = thread; item < runs; item += kRuns * stride) {
    std::uint32_t words[kRuns][3] = {};
    for (std::uint32_t u = 0; u < kRuns; ++u) {
      const std::uint32_t i = item + u * stride;
      if (i >= runs) break;
      const std::uint32_t n = fast_divide(i, args.runs_per_image_divisor);
      const std::uint32_t in_image = i - n * args.runs_per_image_divisor.divisor;
      const std::uint32_t y = fast_divide(in_image, args.runs_per_row_divisor);
      const std::uint32_t x0 = (in_image - y * args.runs_per_row) * kNormalizeRunPixels;
      // One offset, summed modulo 2^64 (the mirrored step wraps), then added to src.
      const unsigned char* source =
          args.src + (n * args.image_stride + y * args.row_stride + args.column_origin +
                      (x0 + kLowestPixel) * args.column_step);
      words[u][0] = load_word(source);
      words[u][1] = load_word(source + 4);
      words[u][2] = load_word(source + 8);
    }
    for (std::uint32_t u = 0; u < kRuns; ++u) {
      const std::uint32_t i = item + u * stride;
      if (i >= runs) break;
      const std::uint64_t n = fast_divide(i, args.runs_per_image_divisor);
      const std::uint64_t first =
          std::uint64_t{i} * kNormalizeRunPixels + n * 2 * args.plane_elements;
      unsigned char* target = args.dst + first * kElementBytes;
      store_packed_channel<kType, kMirror, Encoder, 0>(args, words[u], target);
      store_packed_channel<kType, kMirror, Encoder, 1>(args, words[u], target);
      store_packed_channel<kType, kMirror, Encoder, 2>(args, words[u], target);
    }
  }
}

}  // namespace ferry::cuda
