// The normalize kernel's per-thread work (host and device, so host-side tests run the same code).
//
// Work item: a run of up to kNormalizeRunPixels consecutive output pixels of one row (n, y), all
// channels. Consecutive threads take consecutive runs of a row, then of the next rows, so their
// stores cover consecutive addresses (nchw output: per channel plane; nhwc: one interleaved
// stretch). When every run is full and aligned (vector_stores), a run's output leaves in 16- or
// 8-byte stores. The output conversion comes from an Encoder, so the host tests can check the
// index math with a host encoder while the kernel uses the device's fma and conversions.
#pragma once

#include <cuda_runtime.h>  // __host__ / __device__ (empty for a plain C++ compiler), uint2, uint4

#include <cstdint>

#include "launch.hpp"

namespace ferry::backend::cuda {

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

// What the kernel gets: NormalizeLaunch with its per-launch math done on the host.
struct NormalizeArgs {
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
inline bool normalize_launch_valid(const NormalizeLaunch& launch) {
  return launch.batch != 0 && launch.height != 0 && launch.width != 0 && launch.channels != 0 &&
         launch.channels <= kNormalizeMaxChannels;
}

inline std::uint32_t normalize_runs_per_row(std::uint32_t width) {
  return width / kNormalizeRunPixels + (width % kNormalizeRunPixels != 0 ? 1u : 0u);
}

// The work items of a valid launch.
inline std::uint64_t normalize_work_items(const NormalizeLaunch& launch) {
  return std::uint64_t{launch.batch} * launch.height * normalize_runs_per_row(launch.width);
}

// Arguments for a valid launch run by thread_count (> 0) threads.
inline NormalizeArgs make_normalize_args(const NormalizeLaunch& launch,
                                         std::uint32_t thread_count) {
  NormalizeArgs args;
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
__host__ __device__ inline void normalize_run(const NormalizeArgs& args, std::uint32_t n,
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
__host__ __device__ inline void normalize_thread(const NormalizeArgs& args, std::uint32_t thread) {
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

}  // namespace ferry::backend::cuda
