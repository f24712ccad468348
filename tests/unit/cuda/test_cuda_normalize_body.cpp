// The CUDA normalize kernel's per-thread body run on the host for every output type, layout and
// channel count, both input layouts, mirrored or not, widths around the 4-pixel runs, aligned
// (vector stores) and misaligned destinations, and grids smaller and larger than the work. A host
// encoder (std::fma and ferry's reference 16-bit encodings) stands in for the device's, so this
// checks the index math, the carries of the grid-stride loop and the vector packing; the device
// conversions themselves are covered by the conformance suite on a GPU. Built only with the CUDA
// backend. The packed-RGB path (word loads, batches of runs) is run for the launches that take it,
// with the source aligned so that it applies, and misaligned so that it does not.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ferry/ops/normalize.hpp"
#include "ops/normalize_thread.cuh"

namespace {

using ferry::cuda::make_normalize_params;
using ferry::cuda::NormalizeKernelParams;
using ferry::cuda::NormalizeKernelArgs;
using ferry::cuda::NormalizeOutputLayout;
using ferry::cuda::NormalizeOutputType;

constexpr unsigned char kGuard = 0xA5;

template <NormalizeOutputType kType>
struct HostEncoder {
  static std::uint32_t bits(float value, float scale, float bias) {
    const float y = std::fma(value, scale, bias);
    if constexpr (kType == NormalizeOutputType::float32) {
      return std::bit_cast<std::uint32_t>(y);
    } else if constexpr (kType == NormalizeOutputType::float16) {
      return ferry::to_float16_bits(y);
    } else {
      return ferry::to_bfloat16_bits(y);
    }
  }
};

std::uint32_t reference_bits(NormalizeOutputType type, float value, float scale, float bias) {
  switch (type) {
    case NormalizeOutputType::float32:
      return HostEncoder<NormalizeOutputType::float32>::bits(value, scale, bias);
    case NormalizeOutputType::float16:
      return HostEncoder<NormalizeOutputType::float16>::bits(value, scale, bias);
    case NormalizeOutputType::bfloat16:
      return HostEncoder<NormalizeOutputType::bfloat16>::bits(value, scale, bias);
  }
  return 0;
}

// Every thread of the grid, in reverse order (threads write disjoint elements).
template <NormalizeOutputType kType, NormalizeOutputLayout kLayout, std::uint32_t kChannels>
void run_grid(const NormalizeKernelParams& args) {
  for (std::uint64_t thread = args.thread_count; thread-- > 0;) {
    ferry::cuda::normalize_thread<kType, kLayout, kChannels, HostEncoder<kType>>(
        args, static_cast<std::uint32_t>(thread));
  }
}

template <NormalizeOutputType kType, bool kMirror>
void run_packed_grid(const NormalizeKernelParams& args) {
  for (std::uint64_t thread = args.thread_count; thread-- > 0;) {
    ferry::cuda::normalize_packed_rgb_thread<kType, kMirror, HostEncoder<kType>>(
        args, static_cast<std::uint32_t>(thread));
  }
}

template <NormalizeOutputType kType>
void run_packed_grid_for_mirror(const NormalizeKernelParams& args, bool mirror) {
  if (mirror) {
    run_packed_grid<kType, true>(args);
  } else {
    run_packed_grid<kType, false>(args);
  }
}

template <NormalizeOutputType kType, NormalizeOutputLayout kLayout>
void run_grid_for_channels(const NormalizeKernelParams& args, std::uint32_t channels) {
  switch (channels) {
    case 1: run_grid<kType, kLayout, 1>(args); break;
    case 2: run_grid<kType, kLayout, 2>(args); break;
    case 3: run_grid<kType, kLayout, 3>(args); break;
    case 4: run_grid<kType, kLayout, 4>(args); break;
    default: FAIL("bad channel count " << channels);
  }
}

template <NormalizeOutputType kType>
void run_grid_for_layout(const NormalizeKernelParams& args, NormalizeOutputLayout layout,
                         std::uint32_t channels) {
  if (layout == NormalizeOutputLayout::nchw) {
    run_grid_for_channels<kType, NormalizeOutputLayout::nchw>(args, channels);
  } else {
    run_grid_for_channels<kType, NormalizeOutputLayout::nhwc>(args, channels);
  }
}

// As launch_normalize does: the packed-RGB body where the launch takes it, else the general one.
void run_body(const NormalizeKernelArgs& launch, std::uint32_t thread_count) {
  const NormalizeKernelParams args = make_normalize_params(launch, thread_count);
  if (args.packed_rgb) {
    switch (launch.output_type) {
      case NormalizeOutputType::float32:
        run_packed_grid_for_mirror<NormalizeOutputType::float32>(args, launch.mirror);
        break;
      case NormalizeOutputType::float16:
        run_packed_grid_for_mirror<NormalizeOutputType::float16>(args, launch.mirror);
        break;
      case NormalizeOutputType::bfloat16:
        run_packed_grid_for_mirror<NormalizeOutputType::bfloat16>(args, launch.mirror);
        break;
    }
    return;
  }
  switch (launch.output_type) {
    case NormalizeOutputType::float32:
      run_grid_for_layout<NormalizeOutputType::float32>(args, launch.output_layout,
                                                        launch.channels);
      break;
    case NormalizeOutputType::float16:
      run_grid_for_layout<NormalizeOutputType::float16>(args, launch.output_layout,
                                                        launch.channels);
      break;
    case NormalizeOutputType::bfloat16:
      run_grid_for_layout<NormalizeOutputType::bfloat16>(args, launch.output_layout,
                                                         launch.channels);
      break;
  }
}

// 16-byte aligned host storage, like the device and pinned allocations the kernel gets.
class AlignedBytes {
 public:
  explicit AlignedBytes(std::size_t size) : storage_((size + 15) / 16) {
    std::memset(data(), kGuard, storage_.size() * 16);
  }
  unsigned char* data() { return reinterpret_cast<unsigned char*>(storage_.data()); }

 private:
  std::vector<uint4> storage_;
};

struct Case {
  NormalizeOutputType type;
  NormalizeOutputLayout layout;
  std::uint32_t channels;
  bool planar_input;
  std::uint32_t batch;
  std::uint32_t height;
  std::uint32_t width;
  bool mirror;
  std::uint32_t dst_misalignment;  // in elements
  std::uint32_t thread_count;
  // Source placement: src's address modulo 4, and the padding after each row and each image
  // (interleaved input; planar input pads as before).
  std::uint32_t src_misalignment = 1;
  std::uint32_t row_padding = 3;
  std::uint32_t image_padding = 7;
};

// Runs one case; returns the number of wrong bytes (outputs and guards). `packed`, if given,
// says whether the launch took the packed-RGB path.
std::uint64_t check_case(const Case& test, bool* packed = nullptr) {
  const std::uint32_t channels = test.channels;
  const std::uint32_t height = test.height;
  const std::uint32_t width = test.width;
  // Pitches with padding, so that no stride is a product of the others.
  NormalizeKernelArgs launch;
  launch.batch = test.batch;
  launch.channels = channels;
  launch.height = height;
  launch.width = width;
  if (test.planar_input) {
    launch.pixel_stride = 1;
    launch.row_stride = width + 3;
    launch.channel_stride = launch.row_stride * height + 5;
    launch.image_stride = launch.channel_stride * channels + 7;
  } else {
    launch.pixel_stride = channels;
    launch.channel_stride = 1;
    launch.row_stride = std::uint64_t{width} * channels + test.row_padding;
    launch.image_stride = launch.row_stride * height + test.image_padding;
  }
  launch.mirror = test.mirror;
  launch.output_type = test.type;
  launch.output_layout = test.layout;
  for (std::uint32_t c = 0; c < channels; ++c) {
    // Factors whose products round in float; channel 3 overflows float16 (255 * 300 > 65504).
    const float scales[4] = {1.0f / 58.395f, 1.0f / 57.12f, 0.0174291938f, 300.0f};
    const float biases[4] = {-2.1179039f, -2.0357144f, -1.8044444f, -0.5f};
    launch.scale[c] = scales[c];
    launch.bias[c] = biases[c];
  }

  const std::uint64_t input_span = (test.batch - 1) * launch.image_stride +
                                   (channels - 1) * launch.channel_stride +
                                   (height - 1) * launch.row_stride +
                                   std::uint64_t{width - 1} * launch.pixel_stride + 1;
  // src at src_misalignment from a 16-byte boundary (odd by default: no alignment assumed).
  AlignedBytes input(test.src_misalignment + input_span);
  std::uint32_t state = 12345u + width * 7u + height;
  for (std::uint64_t i = 0; i < test.src_misalignment + input_span; ++i) {
    state = state * 1664525u + 1013904223u;
    input.data()[i] = static_cast<unsigned char>(state >> 24);
  }
  const unsigned char* src = input.data() + test.src_misalignment;
  launch.src = src;

  const std::uint32_t element_bytes = test.type == NormalizeOutputType::float32 ? 4 : 2;
  const std::uint64_t elements = std::uint64_t{test.batch} * channels * height * width;
  const std::uint64_t front = 16 + std::uint64_t{test.dst_misalignment} * element_bytes;
  constexpr std::uint64_t kBack = 32;
  AlignedBytes output(front + elements * element_bytes + kBack);
  unsigned char* dst = output.data() + front;
  launch.dst = dst;

  const NormalizeKernelParams args = make_normalize_params(launch, test.thread_count);
  const std::uint32_t vector_bytes = ferry::cuda::normalize_vector_bytes(
      test.type, test.layout, channels);
  CHECK(args.vector_stores ==
        (width % 4 == 0 && reinterpret_cast<std::uintptr_t>(dst) % vector_bytes == 0));
  // The packed-RGB path needs vector stores, NCHW output, interleaved 3-channel input, and each
  // used source stride (and src) a multiple of 4.
  const bool packed_expected =
      args.vector_stores && test.layout == NormalizeOutputLayout::nchw && channels == 3 &&
      !test.planar_input && test.src_misalignment % 4 == 0 &&
      (height == 1 || launch.row_stride % 4 == 0) &&
      (test.batch == 1 || launch.image_stride % 4 == 0);
  CHECK(args.packed_rgb == packed_expected);
  if (packed != nullptr) *packed = args.packed_rgb;
  run_body(launch, test.thread_count);

  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < front; ++i) wrong += output.data()[i] != kGuard;
  for (std::uint64_t i = 0; i < kBack; ++i) wrong += dst[elements * element_bytes + i] != kGuard;
  for (std::uint32_t n = 0; n < test.batch; ++n) {
    for (std::uint32_t c = 0; c < channels; ++c) {
      for (std::uint32_t y = 0; y < height; ++y) {
        for (std::uint32_t x = 0; x < width; ++x) {
          const std::uint32_t source_x = test.mirror ? width - 1 - x : x;
          const unsigned char value =
              src[n * launch.image_stride + c * launch.channel_stride + y * launch.row_stride +
                  std::uint64_t{source_x} * launch.pixel_stride];
          const std::uint32_t expected = reference_bits(test.type, static_cast<float>(value),
                                                        launch.scale[c], launch.bias[c]);
          const std::uint64_t index =
              test.layout == NormalizeOutputLayout::nchw
                  ? ((std::uint64_t{n} * channels + c) * height + y) * width + x
                  : ((std::uint64_t{n} * height + y) * width + x) * channels + c;
          std::uint32_t actual = 0;
          if (element_bytes == 4) {
            std::memcpy(&actual, dst + index * 4, 4);
          } else {
            std::uint16_t half = 0;
            std::memcpy(&half, dst + index * 2, 2);
            actual = half;
          }
          wrong += actual != expected;
        }
      }
    }
  }
  return wrong;
}

}  // namespace

TEST_CASE("CUDA kernels: the normalize body writes every element once, bit-exact, in place") {
  const NormalizeOutputType types[] = {NormalizeOutputType::float32, NormalizeOutputType::float16,
                                       NormalizeOutputType::bfloat16};
  const NormalizeOutputLayout layouts[] = {NormalizeOutputLayout::nchw,
                                           NormalizeOutputLayout::nhwc};
  const std::uint32_t widths[] = {1, 2, 3, 4, 5, 7, 8, 12, 13};
  const std::uint32_t thread_counts[] = {1, 7, 256};
  std::uint64_t cases = 0;
  for (NormalizeOutputType type : types) {
    for (NormalizeOutputLayout layout : layouts) {
      for (std::uint32_t channels = 1; channels <= 4; ++channels) {
        for (bool planar_input : {false, true}) {
          for (std::uint32_t batch : {1u, 3u}) {
            for (std::uint32_t height : {1u, 2u, 5u}) {
              for (std::uint32_t width : widths) {
                for (bool mirror : {false, true}) {
                  for (std::uint32_t misalignment : {0u, 1u}) {
                    for (std::uint32_t threads : thread_counts) {
                      const Case test{type,   layout, channels, planar_input, batch,
                                      height, width,  mirror,   misalignment, threads};
                      const std::uint64_t wrong = check_case(test);
                      ++cases;
                      if (wrong != 0) {
                        INFO("type " << static_cast<int>(type) << ", layout "
                                     << static_cast<int>(layout) << ", channels " << channels
                                     << ", planar input " << planar_input << ", " << batch << "x"
                                     << height << "x" << width << ", mirror " << mirror
                                     << ", misalignment " << misalignment << ", threads "
                                     << threads);
                        CHECK(wrong == 0);
                        return;  // one report is enough
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  CHECK(cases > 0);
}

TEST_CASE("CUDA kernels: the packed-RGB normalize body, and the launches it must not take") {
  const NormalizeOutputType types[] = {NormalizeOutputType::float32, NormalizeOutputType::float16,
                                       NormalizeOutputType::bfloat16};
  // Source placements: {src misalignment, row padding, image padding}. The first three keep every
  // run word-aligned; each of the others breaks it once (the general path then runs, unless the
  // broken stride is unused: one row, or one image).
  struct Placement {
    std::uint32_t src_misalignment;
    std::uint32_t row_padding;
    std::uint32_t image_padding;
  };
  const Placement placements[] = {{0, 0, 0}, {4, 4, 8}, {8, 12, 4},
                                  {2, 0, 0}, {0, 2, 0}, {0, 0, 1}};
  // 0 stands for the launcher's count: one batch of kNormalizePackedRuns runs per thread.
  const std::uint32_t thread_counts[] = {0, 1, 3, 7, 13, 64, 300};
  std::uint64_t cases = 0;
  std::uint64_t packed_cases = 0;
  for (NormalizeOutputType type : types) {
    for (const Placement& placement : placements) {
      for (std::uint32_t batch : {1u, 2u, 3u}) {
        for (std::uint32_t height : {1u, 3u, 6u}) {
          for (std::uint32_t width : {4u, 8u, 12u, 20u, 32u}) {
            for (bool mirror : {false, true}) {
              for (std::uint32_t misalignment : {0u, 1u}) {
                for (std::uint32_t threads : thread_counts) {
                  if (threads == 0) {
                    const std::uint32_t runs = batch * height * (width / 4);
                    threads = (runs + ferry::cuda::kNormalizePackedRuns - 1) /
                              ferry::cuda::kNormalizePackedRuns;
                  }
                  Case test{type,   NormalizeOutputLayout::nchw, 3,      false,        batch,
                            height, width,                       mirror, misalignment, threads};
                  test.src_misalignment = placement.src_misalignment;
                  test.row_padding = placement.row_padding;
                  test.image_padding = placement.image_padding;
                  bool packed = false;
                  const std::uint64_t wrong = check_case(test, &packed);
                  ++cases;
                  packed_cases += packed;
                  if (wrong != 0) {
                    INFO("type " << static_cast<int>(type) << ", src misalignment "
                                 << placement.src_misalignment << ", row padding "
                                 << placement.row_padding << ", image padding "
                                 << placement.image_padding << ", " << batch << "x" << height
                                 << "x" << width << ", mirror " << mirror << ", misalignment "
                                 << misalignment << ", threads " << threads);
                    CHECK(wrong == 0);
                    return;  // one report is enough
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  // Both paths ran: the aligned placements with an aligned dst take the packed one.
  CHECK(packed_cases > 0);
  CHECK(packed_cases < cases);
}

TEST_CASE("CUDA kernels: fast division matches integer division") {
  using ferry::cuda::fast_divide;
  using ferry::cuda::make_fast_divisor;
  const std::uint32_t divisors[] = {1u,          2u,          3u,          7u,
                                    56u,         224u * 56u,  480u,        1080u * 480u,
                                    12345u,      (1u << 16) + 1, (1u << 30) - 1, 1u << 30,
                                    (1u << 30) + 1, (1u << 31) - 1, 1u << 31};
  for (std::uint32_t divisor : divisors) {
    const auto fast = make_fast_divisor(divisor);
    std::uint32_t state = divisor;
    for (int k = 0; k < 2000; ++k) {
      state = state * 1664525u + 1013904223u;
      const std::uint32_t samples[] = {state >> 1,
                                       static_cast<std::uint32_t>(k),
                                       (1u << 31) - 1 - static_cast<std::uint32_t>(k),
                                       divisor - 1,
                                       divisor,
                                       divisor + 1,
                                       divisor * 2 - 1};
      for (std::uint32_t x : samples) {
        if (x >= (1u << 31)) continue;
        if (fast_divide(x, fast) != x / divisor) {
          INFO("divisor " << divisor << ", dividend " << x);
          CHECK(fast_divide(x, fast) == x / divisor);
          return;
        }
      }
    }
  }
}

TEST_CASE("CUDA kernels: the normalize grid stride decomposes into images, rows and runs") {
  NormalizeKernelArgs launch;
  launch.batch = 5;
  launch.channels = 3;
  launch.height = 7;
  launch.width = 29;  // 8 runs per row
  launch.dst = reinterpret_cast<void*>(std::uintptr_t{4096});
  for (std::uint32_t threads : {1u, 7u, 8u, 55u, 56u, 57u, 111u, 1000u}) {
    const NormalizeKernelParams args = make_normalize_params(launch, threads);
    CHECK(args.runs == 5u * 7u * 8u);
    CHECK((std::uint64_t{args.stride_images} * 7 + args.stride_rows) * 8 + args.stride_runs ==
          threads);
    CHECK(args.stride_rows < 7);
    CHECK(args.stride_runs < 8);
  }
}
