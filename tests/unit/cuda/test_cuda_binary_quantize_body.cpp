// The CUDA binary_quantize kernel's per-thread body run on the host, as launch_binary_quantize
// would run it: every input type, with and without thresholds, vector loads (everything on 16
// bytes) and element loads (one element or threshold off), dims around the 32-element words and
// 64-bit code rows, and grids smaller and larger than the work. The body is integer code, the
// same on the host as on the device (only its loads differ: typed there, memcpy here), so this
// checks its bits, not just its index math, against a truth from the host's float arithmetic.
// Built only with the CUDA backend.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/binary_quantize_thread.cuh"

namespace {

using ferry::cuda::BinaryQuantizeInputType;
using ferry::cuda::BinaryQuantizeKernelArgs;
using ferry::cuda::BinaryQuantizeKernelParams;

constexpr unsigned char kGuard = 0xA5;

// 16-byte aligned host storage, like the device and pinned allocations the kernel gets.
class AlignedBytes {
 public:
  explicit AlignedBytes(std::size_t size) : storage_((size + 15) / 16) {
    std::memset(data(), kGuard, storage_.size() * 16);
  }
  unsigned char* data() { return reinterpret_cast<unsigned char*>(storage_.data()); }
  std::size_t size() const { return storage_.size() * 16; }

 private:
  std::vector<uint4> storage_;
};

template <BinaryQuantizeInputType kType, bool kThresholds, bool kVector>
void run_grid(const BinaryQuantizeKernelParams& params) {
  for (std::uint64_t thread = params.thread_count; thread-- > 0;) {
    ferry::cuda::binary_quantize_thread<kType, kThresholds, kVector>(params, thread);
  }
}

template <BinaryQuantizeInputType kType, bool kThresholds>
void run_grid_for_loads(const BinaryQuantizeKernelParams& params, bool vector) {
  if (vector) {
    run_grid<kType, kThresholds, true>(params);
  } else {
    run_grid<kType, kThresholds, false>(params);
  }
}

template <BinaryQuantizeInputType kType>
void run_grid_for_thresholds(const BinaryQuantizeKernelParams& params, bool vector) {
  if (params.thresholds != nullptr) {
    run_grid_for_loads<kType, true>(params, vector);
  } else {
    run_grid_for_loads<kType, false>(params, vector);
  }
}

// As launch_binary_quantize does, with `thread_count` threads.
void run_body(const BinaryQuantizeKernelArgs& launch, std::uint64_t thread_count) {
  const BinaryQuantizeKernelParams params =
      ferry::cuda::make_binary_quantize_params(launch, thread_count);
  const bool vector = ferry::cuda::binary_quantize_vector_loads(launch);
  switch (launch.input_type) {
    case BinaryQuantizeInputType::float32:
      run_grid_for_thresholds<BinaryQuantizeInputType::float32>(params, vector);
      break;
    case BinaryQuantizeInputType::float16:
      run_grid_for_thresholds<BinaryQuantizeInputType::float16>(params, vector);
      break;
    case BinaryQuantizeInputType::bfloat16:
      run_grid_for_thresholds<BinaryQuantizeInputType::bfloat16>(params, vector);
      break;
  }
}

float element_value(BinaryQuantizeInputType type, const unsigned char* row, std::uint64_t j) {
  if (type == BinaryQuantizeInputType::float32) {
    float value = 0;
    std::memcpy(&value, row + 4 * j, 4);
    return value;
  }
  std::uint16_t raw = 0;
  std::memcpy(&raw, row + 2 * j, 2);
  if (type == BinaryQuantizeInputType::float16) {
    return static_cast<float>(std::bit_cast<_Float16>(raw));
  }
  return std::bit_cast<float>(std::uint32_t{raw} << 16);
}

// Raw values: random bit patterns of the type (every class of value), small ones near 0, and
// each type's specials: NaNs, signed zeros, infinities, subnormals.
std::uint32_t random_raw(std::mt19937_64& rng, BinaryQuantizeInputType type) {
  static const std::uint32_t kSpecial32[] = {0x7fc00000u, 0xff800001u, 0x80000000u, 0u,
                                             0x7f800000u, 0xff800000u, 0x00000001u, 0x807fffffu};
  static const std::uint32_t kSpecial16[] = {0x7e00u, 0xfc01u, 0x8000u, 0u,
                                             0x7c00u, 0xfc00u, 0x0001u, 0x83ffu};
  static const std::uint32_t kSpecialB16[] = {0x7fc0u, 0xff81u, 0x8000u, 0u,
                                              0x7f80u, 0xff80u, 0x0001u, 0x807fu};
  const std::uint32_t pick = static_cast<std::uint32_t>(rng() % 10);
  const std::uint32_t bits = static_cast<std::uint32_t>(rng());
  switch (type) {
    case BinaryQuantizeInputType::float32:
      if (pick < 2) return kSpecial32[bits % 8];
      if (pick < 5) return (bits & 0x80000000u) | (0x3c000000u + (bits & 0x03ffffffu));  // near 0
      return bits;
    case BinaryQuantizeInputType::float16:
      if (pick < 2) return kSpecial16[bits % 8];
      return bits & 0xffffu;
    case BinaryQuantizeInputType::bfloat16:
      if (pick < 2) return kSpecialB16[bits % 8];
      return bits & 0xffffu;
  }
  return 0;
}

struct Case {
  BinaryQuantizeInputType type = BinaryQuantizeInputType::float32;
  std::uint32_t rows = 1;
  std::uint32_t dims = 1;
  std::uint64_t pitch_elements = 0;  // 0: tight
  std::uint64_t input_offset_elements = 0;
  bool thresholds = false;
  std::uint64_t threshold_offset = 0;  // bytes, a multiple of 4
  std::uint64_t codes_offset = 0;      // bytes, a multiple of 4
};

void check_case(std::mt19937_64& rng, const Case& c, std::uint64_t thread_count) {
  CAPTURE(static_cast<int>(c.type));
  CAPTURE(c.rows);
  CAPTURE(c.dims);
  CAPTURE(c.pitch_elements);
  CAPTURE(c.input_offset_elements);
  CAPTURE(c.thresholds);
  CAPTURE(c.threshold_offset);
  CAPTURE(c.codes_offset);
  CAPTURE(thread_count);
  const std::uint64_t element = ferry::cuda::binary_quantize_element_bytes(c.type);
  const std::uint64_t pitch = (c.pitch_elements != 0 ? c.pitch_elements : c.dims) * element;
  const std::uint64_t input_offset = c.input_offset_elements * element;
  AlignedBytes input(input_offset + (c.rows - 1) * pitch + c.dims * element + 16);
  for (std::uint32_t r = 0; r < c.rows; ++r) {
    for (std::uint32_t j = 0; j < c.dims; ++j) {
      const std::uint32_t raw = random_raw(rng, c.type);
      std::memcpy(input.data() + input_offset + r * pitch + j * element, &raw, element);
    }
  }
  AlignedBytes thresholds(c.threshold_offset + 4 * c.dims + 16);
  std::vector<float> t(c.dims, 0.0f);
  if (c.thresholds) {
    for (float& value : t) {
      // Zeros, values of the input type (for ties), anything.
      const std::uint64_t pick = rng() % 4;
      const std::uint32_t raw = random_raw(rng, c.type);
      unsigned char bytes[4] = {};
      std::memcpy(bytes, &raw, element);
      value = pick == 0 ? 0.0f : pick == 1 ? -0.0f : element_value(c.type, bytes, 0);
    }
    std::memcpy(thresholds.data() + c.threshold_offset, t.data(), 4 * c.dims);
  }
  const std::uint32_t words_per_row = ferry::cuda::binary_quantize_words_per_row(c.dims);
  CHECK(words_per_row == (c.dims + 63) / 64 * 2);
  const std::uint64_t code_bytes = std::uint64_t{c.rows} * words_per_row * 4;
  AlignedBytes codes(c.codes_offset + code_bytes + 16);

  BinaryQuantizeKernelArgs launch;
  launch.input = input.data() + input_offset;
  launch.codes = codes.data() + c.codes_offset;
  launch.thresholds = c.thresholds ? thresholds.data() + c.threshold_offset : nullptr;
  launch.rows = c.rows;
  launch.dims = c.dims;
  launch.row_stride = pitch;
  launch.input_type = c.type;
  REQUIRE(ferry::cuda::binary_quantize_launch_valid(launch));
  run_body(launch, thread_count);

  std::vector<unsigned char> expected(codes.size(), kGuard);
  std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(c.codes_offset), code_bytes, 0);
  for (std::uint64_t r = 0; r < c.rows; ++r) {
    for (std::uint64_t j = 0; j < c.dims; ++j) {
      const float x = element_value(c.type, input.data() + input_offset + r * pitch, j);
      if (x > t[j]) {
        expected[c.codes_offset + r * words_per_row * 4 + j / 8] |=
            static_cast<unsigned char>(1u << (j % 8));
      }
    }
  }
  const bool same = std::memcmp(codes.data(), expected.data(), expected.size()) == 0;
  if (!same) {
    for (std::size_t i = 0; i < expected.size(); ++i) {
      if (codes.data()[i] != expected[i]) {
        FAIL_CHECK("codes differ first at byte " << i << ": got " << int{codes.data()[i]}
                                                 << ", expected " << int{expected[i]});
        break;
      }
    }
  }
}

}  // namespace

TEST_CASE("CUDA binary_quantize body: every type, thresholds or not, vector or element loads") {
  std::mt19937_64 rng(77);
  const BinaryQuantizeInputType types[] = {BinaryQuantizeInputType::float32,
                                           BinaryQuantizeInputType::float16,
                                           BinaryQuantizeInputType::bfloat16};
  const std::uint32_t all_dims[] = {1, 31, 32, 33, 63, 64, 65, 96, 100, 128, 383, 1000};
  for (const BinaryQuantizeInputType type : types) {
    const std::uint64_t element = ferry::cuda::binary_quantize_element_bytes(type);
    for (const std::uint32_t dims : all_dims) {
      for (const bool thresholds : {false, true}) {
        // Aligned: tight rows of a multiple of 16 bytes, or padded to one; then one thing off.
        Case aligned;
        aligned.type = type;
        aligned.rows = 5;
        aligned.dims = dims;
        aligned.pitch_elements = (dims * element + 15) / 16 * 16 / element;
        aligned.thresholds = thresholds;
        aligned.threshold_offset = 16;
        aligned.codes_offset = 4;
        Case input_off = aligned;
        input_off.input_offset_elements = 1;
        Case pitch_off = aligned;
        pitch_off.pitch_elements = aligned.pitch_elements + 2;
        Case thresholds_off = aligned;
        thresholds_off.threshold_offset = 4;
        for (const Case& c : {aligned, input_off, pitch_off, thresholds_off}) {
          for (const std::uint64_t threads : {std::uint64_t{1}, std::uint64_t{3},
                                              std::uint64_t{ferry::cuda::binary_quantize_words_per_row(dims)} * 2 + 1,
                                              std::uint64_t{1000}}) {
            check_case(rng, c, threads);
          }
        }
      }
    }
  }
}

TEST_CASE("CUDA binary_quantize body: launches it refuses, and which take vector loads") {
  BinaryQuantizeKernelArgs launch;
  alignas(16) unsigned char bytes[64] = {};
  launch.input = bytes;
  launch.codes = bytes;
  launch.rows = 2;
  launch.dims = 8;
  launch.row_stride = 32;
  CHECK(ferry::cuda::binary_quantize_launch_valid(launch));
  CHECK(ferry::cuda::binary_quantize_vector_loads(launch));
  launch.row_stride = 36;
  CHECK_FALSE(ferry::cuda::binary_quantize_vector_loads(launch));
  launch.rows = 1;  // the pitch is never stepped over
  CHECK(ferry::cuda::binary_quantize_vector_loads(launch));
  launch.thresholds = bytes + 4;
  CHECK(ferry::cuda::binary_quantize_launch_valid(launch));
  CHECK_FALSE(ferry::cuda::binary_quantize_vector_loads(launch));
  launch.thresholds = bytes + 2;
  CHECK_FALSE(ferry::cuda::binary_quantize_launch_valid(launch));
  launch.thresholds = nullptr;
  launch.codes = bytes + 2;
  CHECK_FALSE(ferry::cuda::binary_quantize_launch_valid(launch));
  launch.codes = bytes;
  launch.input = bytes + 2;
  CHECK_FALSE(ferry::cuda::binary_quantize_launch_valid(launch));  // float32 on 2 bytes
  launch.input_type = BinaryQuantizeInputType::bfloat16;
  CHECK(ferry::cuda::binary_quantize_launch_valid(launch));
  launch.rows = 0;
  CHECK_FALSE(ferry::cuda::binary_quantize_launch_valid(launch));
}
