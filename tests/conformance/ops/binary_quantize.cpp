// The binary_quantize op: every backend must agree bit for bit with a truth computed here,
// element by element straight from the definition with the host's own float arithmetic (the
// compiler's _Float16 widening, C++'s float comparison), independently of the library's integer
// code. Awkward shapes, every input type, with and without thresholds, padded pitches, odd
// offsets, special values planted (NaN, signed zeros, infinities, values equal to their
// threshold, subnormals of every type), guard bytes around the codes; then every bad parameter.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::BinaryQuantizeParams;
using ferry::Buffer;
using ferry::BufferRef;
using ferry::CommandList;
using ferry::ElementType;
using ferry::ErrorCode;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

namespace {

// ---- the truth ---------------------------------------------------------------------------

float bits_to_float(std::uint32_t bits) { return std::bit_cast<float>(bits); }

// Element `j` of a row of `type` at `row`, as float32, by the host's own conversions.
float element_value(ElementType type, const std::byte* row, std::uint64_t j) {
  switch (type) {
    case ElementType::float32: {
      float value = 0;
      std::memcpy(&value, row + j * 4, 4);
      return value;
    }
    case ElementType::float16: {
      _Float16 half = 0;
      std::memcpy(&half, row + j * 2, 2);
      return static_cast<float>(half);  // exact: every half is a float
    }
    case ElementType::bfloat16: {
      std::uint16_t raw = 0;
      std::memcpy(&raw, row + j * 2, 2);
      return bits_to_float(std::uint32_t{raw} << 16);  // a bfloat16 is a float's top half
    }
  }
  return 0;
}

// The codes the definition gives: bytes, bit j of a row at bit (j % 8) of byte (j / 8), rows of
// 8 * ceil(dims / 64) bytes.
std::vector<std::byte> expected_codes(const BinaryQuantizeParams& p,
                                      std::span<const std::byte> input,
                                      const std::vector<float>* thresholds) {
  const std::uint64_t element = ferry::element_size(p.input_type);
  const std::uint64_t pitch = p.row_pitch != 0 ? p.row_pitch : p.dims * element;
  const std::uint64_t code_bytes = (std::uint64_t{p.dims} + 63) / 64 * 8;
  std::vector<std::byte> codes(p.rows * code_bytes, std::byte{0});
  for (std::uint64_t r = 0; r < p.rows; ++r) {
    for (std::uint64_t j = 0; j < p.dims; ++j) {
      const float x = element_value(p.input_type, input.data() + r * pitch, j);
      const float t = thresholds != nullptr ? (*thresholds)[j] : 0.0f;
      if (x > t) codes[r * code_bytes + j / 8] |= std::byte{static_cast<unsigned char>(1u << (j % 8))};
    }
  }
  return codes;
}

// ---- inputs ------------------------------------------------------------------------------

std::uint32_t float_bits(float value) { return std::bit_cast<std::uint32_t>(value); }

// The raw bits of `value` in `type` (rounded to nearest; the test only needs some value of the
// type near it, and decodes whatever it stored).
std::uint32_t encode(ElementType type, float value) {
  switch (type) {
    case ElementType::float32: return float_bits(value);
    case ElementType::float16: return std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
    case ElementType::bfloat16: return float_bits(value) >> 16;  // truncated: still a value
  }
  return 0;
}

void store(ElementType type, std::byte* row, std::uint64_t j, std::uint32_t raw) {
  if (type == ElementType::float32) {
    std::memcpy(row + j * 4, &raw, 4);
  } else {
    const auto half = static_cast<std::uint16_t>(raw);
    std::memcpy(row + j * 2, &half, 2);
  }
}

// Raw special values of each type: NaNs (quiet, signalling, negative), signed zeros, infinities,
// the smallest and largest subnormals of both signs, the largest finite values.
std::vector<std::uint32_t> specials(ElementType type) {
  switch (type) {
    case ElementType::float32:
      return {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0x00000000u, 0x80000000u, 0x7f800000u,
              0xff800000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu, 0x7f7fffffu,
              0xff7fffffu, 0x00400000u};
    case ElementType::float16:
      return {0x7e00u, 0x7c01u, 0xfe00u, 0x0000u, 0x8000u, 0x7c00u, 0xfc00u, 0x0001u,
              0x8001u, 0x03ffu, 0x83ffu, 0x7bffu, 0xfbffu, 0x0200u, 0x0155u, 0x8013u};
    case ElementType::bfloat16:
      return {0x7fc0u, 0x7f81u, 0xffc0u, 0x0000u, 0x8000u, 0x7f80u, 0xff80u, 0x0001u,
              0x8001u, 0x007fu, 0x807fu, 0x7f7fu, 0xff7fu, 0x0040u, 0x0035u, 0x8013u};
  }
  return {};
}

float random_float(std::mt19937_64& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

// Thresholds: zeros, values of the input type (so that planted equal inputs are equal), random
// float32 bit patterns, and specials (NaN, signed zeros, infinities, float32 subnormals).
std::vector<float> random_thresholds(std::mt19937_64& rng, ElementType type, std::uint32_t dims) {
  const std::uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x80000000u, 0x7f800000u,
                                   0xff800000u, 0x00000001u, 0x80000003u, 0x00012345u};
  std::vector<float> t(dims);
  for (float& value : t) {
    const std::uint64_t pick = ferry_test::uniform(rng, 0, 99);
    if (pick < 30) {
      value = pick < 15 ? 0.0f : -0.0f;
    } else if (pick < 75) {
      const std::uint32_t raw = encode(type, random_float(rng, -1.5f, 1.5f));
      std::byte bytes[4] = {};
      store(type, bytes, 0, raw);
      value = element_value(type, bytes, 0);
    } else if (pick < 82) {
      value = bits_to_float(static_cast<std::uint32_t>(rng()));  // anything, NaNs included
    } else if (pick < 90) {
      // A special of the input type (subnormals included), so that inputs planted equal to it or
      // next to it test the widening of that type exactly.
      const std::vector<std::uint32_t> of_type = specials(type);
      std::byte bytes[4] = {};
      store(type, bytes, 0, of_type[ferry_test::uniform(rng, 0, of_type.size() - 1)]);
      value = element_value(type, bytes, 0);
    } else {
      value = bits_to_float(special[ferry_test::uniform(rng, 0, std::size(special) - 1)]);
    }
  }
  return t;
}

// One row's elements: mostly values around the thresholds, some random bit patterns of the type
// (every class of value), some specials, some exactly equal to their threshold.
void fill_row(std::mt19937_64& rng, ElementType type, std::byte* row, std::uint32_t dims,
              const std::vector<float>* thresholds) {
  const std::vector<std::uint32_t> special = specials(type);
  for (std::uint32_t j = 0; j < dims; ++j) {
    const std::uint64_t pick = ferry_test::uniform(rng, 0, 99);
    std::uint32_t raw = 0;
    if (pick < 55) {
      raw = encode(type, random_float(rng, -2.0f, 2.0f));
    } else if (pick < 75) {
      raw = static_cast<std::uint32_t>(rng());
      if (type != ElementType::float32) raw &= 0xffffu;
    } else if (pick < 90) {
      raw = special[ferry_test::uniform(rng, 0, special.size() - 1)];
    } else {
      // Equal to the threshold (when the type holds it exactly; always with threshold 0), or the
      // encoding next to it on either side.
      const float t = thresholds != nullptr ? (*thresholds)[j] : 0.0f;
      raw = encode(type, t);
      const std::uint64_t step = ferry_test::uniform(rng, 0, 3);
      if (step == 1) raw += 1;
      if (step == 2 && (raw & 0x7fffu) != 0) raw -= 1;
      if (type != ElementType::float32) raw &= 0xffffu;
    }
    store(type, row, j, raw);
  }
}

// ---- running cases -----------------------------------------------------------------------

struct Case {
  BinaryQuantizeParams params;  // thresholds.buffer set when run
  bool thresholds = false;
  std::uint64_t input_offset = 0;
  std::uint64_t codes_offset = 0;
  std::uint64_t threshold_offset = 0;
};

std::string describe(const Case& c) {
  std::ostringstream out;
  out << "binary_quantize " << c.params.rows << "x" << c.params.dims << " "
      << ferry::to_string(c.params.input_type) << ", row_pitch " << c.params.row_pitch
      << ", input offset " << c.input_offset << ", codes offset " << c.codes_offset;
  if (c.thresholds) out << ", thresholds at " << c.threshold_offset;
  return out.str();
}

// Runs the cases in one submission, each with its own input, codes and thresholds buffers
// (guard bytes around the codes), and checks each against the truth.
void run_and_check(BackendUnderTest& t, const std::vector<Case>& cases) {
  struct Prepared {
    Buffer input, codes, thresholds;
    std::vector<std::byte> input_bytes;
    std::vector<float> threshold_values;
    std::uint64_t code_bytes = 0;
  };
  constexpr std::uint64_t kGuard = 20;
  std::vector<Prepared> prepared;
  CommandList commands;
  for (const Case& c : cases) {
    INFO(describe(c));
    const ferry::BinaryQuantizeShape shape =
        REQUIRE_VALUE(ferry::resolve_binary_quantize(c.params));
    Prepared p;
    if (c.thresholds) p.threshold_values = random_thresholds(t.rng, c.params.input_type, c.params.dims);
    // Random bytes everywhere (the padding between rows too), then the rows' elements.
    p.input_bytes = ferry_test::random_bytes(t.rng, c.input_offset + shape.input_bytes + 7);
    for (std::uint64_t r = 0; r < c.params.rows; ++r) {
      fill_row(t.rng, c.params.input_type,
               p.input_bytes.data() + c.input_offset + r * shape.row_stride, c.params.dims,
               c.thresholds ? &p.threshold_values : nullptr);
    }
    p.code_bytes = shape.output_bytes;
    CHECK(shape.output_bytes == c.params.rows * ferry::binary_code_bytes(c.params.dims));
    p.input = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, p.input_bytes));
    p.codes = REQUIRE_VALUE(ferry_test::device_buffer_with(
        t.device, ferry_test::poison_bytes(c.codes_offset + shape.output_bytes + kGuard, 5)));
    BinaryQuantizeParams params = c.params;
    std::optional<BufferRef> threshold_ref;
    if (c.thresholds) {
      // (shape.threshold_bytes is 0 here: c.params names no threshold buffer yet.)
      const std::uint64_t threshold_bytes = std::uint64_t{c.params.dims} * 4;
      std::vector<std::byte> bytes =
          ferry_test::random_bytes(t.rng, c.threshold_offset + threshold_bytes + 3);
      std::memcpy(bytes.data() + c.threshold_offset, p.threshold_values.data(), threshold_bytes);
      p.thresholds = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, bytes));
      threshold_ref.emplace(p.thresholds);
      params.thresholds = {&*threshold_ref, c.threshold_offset};
    }
    REQUIRE_OK(ferry::binary_quantize(commands, p.input, c.input_offset, p.codes, c.codes_offset,
                                      params));
    prepared.push_back(std::move(p));
  }
  const ferry::TimelinePoint done =
      REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)));
  REQUIRE_OK(done.wait(ferry_test::kLongWait));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO(describe(c));
    const Prepared& p = prepared[i];
    std::vector<std::byte> expected =
        ferry_test::poison_bytes(c.codes_offset + p.code_bytes + kGuard, 5);
    const std::vector<std::byte> codes =
        expected_codes(c.params, std::span<const std::byte>(p.input_bytes).subspan(c.input_offset),
                       c.thresholds ? &p.threshold_values : nullptr);
    std::copy(codes.begin(), codes.end(),
              expected.begin() + static_cast<std::ptrdiff_t>(c.codes_offset));
    const auto actual = REQUIRE_VALUE(ferry_test::read_bytes(t.device, p.codes, 0, expected.size()));
    ferry_test::check_bytes_equal(actual, expected, "codes (with guard bytes)");
  }
}

}  // namespace

TEST_CASE("binary_quantize: awkward shapes, every input type, thresholds or not, match the truth") {
  ferry_test::for_each_backend({"binary_quantize"}, [](BackendUnderTest& t) {
    const std::uint32_t all_dims[] = {1, 31, 32, 63, 64, 65, 100, 383, 1000, 4097};
    std::vector<Case> cases;
    for (const std::uint32_t dims : all_dims) {
      for (const ElementType type :
           {ElementType::float32, ElementType::float16, ElementType::bfloat16}) {
        for (const bool thresholds : {false, true}) {
          Case c;
          const std::uint64_t element = ferry::element_size(type);
          c.params.rows = static_cast<std::uint32_t>(
              ferry_test::uniform(t.rng, 1, dims > 1000 ? 5 : 37));
          c.params.dims = dims;
          c.params.input_type = type;
          // Tight rows, or rows padded by a few elements (an odd number of 16-bit ones, so rows
          // start in the middle of words).
          if (ferry_test::uniform(t.rng, 0, 2) != 0) {
            c.params.row_pitch = (dims + ferry_test::uniform(t.rng, 1, 9)) * element;
          }
          c.thresholds = thresholds;
          c.input_offset = ferry_test::uniform(t.rng, 0, 9) * element;
          c.codes_offset = ferry_test::uniform(t.rng, 0, 5) * 4;
          c.threshold_offset = ferry_test::uniform(t.rng, 0, 5) * 4;
          cases.push_back(c);
        }
      }
    }
    run_and_check(t, cases);
  });
}

TEST_CASE("binary_quantize: aligned rows (vector loads) and the largest dims match the truth") {
  // Rows and thresholds on 16 bytes take 16-byte loads on the GPUs; each placement here keeps
  // that or breaks it by one element or one threshold.
  ferry_test::for_each_backend({"binary_quantize"}, [](BackendUnderTest& t) {
    struct Placement {
      std::uint32_t rows, dims;
      std::uint64_t pitch_elements;  // 0: tight
      std::uint64_t input_offset_elements, threshold_offset;
    };
    const Placement placements[] = {
        {9, 256, 0, 0, 0},     {7, 128, 0, 8, 16},     {5, 96, 136, 0, 0},
        {6, 160, 0, 1, 0},     {4, 256, 260, 0, 0},    {3, 192, 0, 0, 4},
        {2, 65536, 0, 0, 0},   {1, 65536, 0, 2, 8},    {2, 65535, 0, 0, 0},
        {300, 64, 0, 0, 0},    {1, 32, 0, 0, 0},       {40, 33, 40, 4, 16},
    };
    std::vector<Case> cases;
    for (const Placement& placement : placements) {
      for (const ElementType type :
           {ElementType::float32, ElementType::float16, ElementType::bfloat16}) {
        for (const bool thresholds : {false, true}) {
          const std::uint64_t element = ferry::element_size(type);
          Case c;
          c.params.rows = placement.rows;
          c.params.dims = placement.dims;
          c.params.input_type = type;
          c.params.row_pitch = placement.pitch_elements * element;
          c.thresholds = thresholds;
          c.input_offset = placement.input_offset_elements * element;
          c.threshold_offset = placement.threshold_offset;
          cases.push_back(c);
        }
      }
    }
    run_and_check(t, cases);
  });
}

TEST_CASE("binary_quantize: reads host memory, thresholds beside the input, chains with copies") {
  ferry_test::for_each_backend({"binary_quantize"}, [](BackendUnderTest& t) {
    BinaryQuantizeParams params;
    params.rows = 23;
    params.dims = 200;
    params.input_type = ElementType::float16;
    params.row_pitch = 404;
    const ferry::BinaryQuantizeShape shape = REQUIRE_VALUE(ferry::resolve_binary_quantize(params));
    const std::uint64_t threshold_bytes = std::uint64_t{params.dims} * 4;
    // One upload lease: the input at 6, the thresholds right after it (both only read, so they
    // may share a buffer).
    ferry::StagingPool upload_pool =
        REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));
    const std::uint64_t input_offset = 6;
    const std::uint64_t threshold_offset = (input_offset + shape.input_bytes + 3) / 4 * 4;
    ferry::Lease staged =
        REQUIRE_VALUE(upload_pool.acquire(threshold_offset + threshold_bytes));
    ferry_test::fill_random(t.rng, staged.data());
    std::vector<float> thresholds = random_thresholds(t.rng, params.input_type, params.dims);
    for (std::uint32_t r = 0; r < params.rows; ++r) {
      fill_row(t.rng, params.input_type,
               staged.data().data() + input_offset + r * shape.row_stride, params.dims,
               &thresholds);
    }
    std::memcpy(staged.data().data() + threshold_offset, thresholds.data(), threshold_bytes);
    const std::vector<std::byte> input(staged.data().begin() + input_offset, staged.data().end());
    const std::vector<std::byte> expected = expected_codes(params, input, &thresholds);

    const BufferRef threshold_ref = staged;
    params.thresholds = {&threshold_ref, threshold_offset};
    // 1. Straight from the lease; 2. after a copy to device memory (input and thresholds in one
    // buffer), then the codes copied on: one submission, in order.
    const Buffer direct = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes));
    const Buffer on_device = REQUIRE_VALUE(t.device.create_buffer(staged.size()));
    const Buffer codes = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes + 8));
    const Buffer copied = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes));
    CommandList commands;
    REQUIRE_OK(ferry::binary_quantize(commands, staged, input_offset, direct, 0, params));
    REQUIRE_OK(commands.copy(staged, 0, on_device, 0, staged.size()));
    const BufferRef device_thresholds = on_device;
    params.thresholds = {&device_thresholds, threshold_offset};
    REQUIRE_OK(ferry::binary_quantize(commands, on_device, input_offset, codes, 8, params));
    REQUIRE_OK(commands.copy(codes, 8, copied, 0, shape.output_bytes));
    REQUIRE_OK(REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)))
                   .wait(ferry_test::kLongWait));
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, direct, 0, shape.output_bytes)), expected,
        "binary_quantize reading the host lease");
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, copied, 0, shape.output_bytes)), expected,
        "upload, binary_quantize, copy");
  });
}

TEST_CASE("binary_quantize: bad parameters are clear errors and record nothing") {
  ferry_test::for_each_backend({"binary_quantize"}, [](BackendUnderTest& t) {
    BinaryQuantizeParams good;
    good.rows = 4;
    good.dims = 100;
    good.input_type = ElementType::float32;
    const ferry::BinaryQuantizeShape shape = REQUIRE_VALUE(ferry::resolve_binary_quantize(good));
    CHECK(shape.words_per_row == 4);
    CHECK(shape.input_bytes == 1600);
    CHECK(shape.output_bytes == 64);
    const Buffer input = REQUIRE_VALUE(t.device.create_buffer(shape.input_bytes + 64));
    const Buffer codes = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes + 64));
    const Buffer threshold_buffer = REQUIRE_VALUE(t.device.create_buffer(400 + 64));
    const BufferRef thresholds = threshold_buffer;

    auto check = [&](const BinaryQuantizeParams& p, ErrorCode code, const char* what,
                     std::uint64_t input_offset = 0, std::uint64_t codes_offset = 0,
                     const BufferRef* input_ref = nullptr, const BufferRef* codes_ref = nullptr) {
      INFO(what);
      CommandList commands;
      const ferry::Status status = ferry::binary_quantize(
          commands, input_ref ? *input_ref : BufferRef(input), input_offset,
          codes_ref ? *codes_ref : BufferRef(codes), codes_offset, p);
      CHECK_MESSAGE(status.code() == code, status.to_string());
      CHECK(!status.message().empty());
      CHECK(commands.empty());
      return status.message();  // for checks of what it names
    };
    {
      // The baselines are accepted: with and without thresholds, at the buffers' last offsets.
      CommandList commands;
      CHECK_OK(ferry::binary_quantize(commands, input, 64, codes, 64, good));
      BinaryQuantizeParams p = good;
      p.thresholds = {&thresholds, 64};
      CHECK_OK(ferry::binary_quantize(commands, input, 0, codes, 0, p));
      CHECK(commands.size() == 2);
    }
    BinaryQuantizeParams p = good;
    p.rows = 0;
    check(p, ErrorCode::invalid_argument, "zero rows");
    p = good;
    p.dims = 0;
    check(p, ErrorCode::invalid_argument, "zero dims");
    p = good;
    p.dims = ferry::kMaxBinaryQuantizeDims + 1;
    p.rows = 1;
    const std::string too_many = check(p, ErrorCode::invalid_argument, "dims above the maximum");
    CHECK(too_many.find("65537") != std::string::npos);
    p = good;
    p.input_type = static_cast<ElementType>(3);
    check(p, ErrorCode::invalid_argument, "unknown input type");
    p = good;
    p.row_pitch = 396;
    const std::string small_pitch = check(p, ErrorCode::invalid_argument, "row pitch below a row");
    CHECK(small_pitch.find("row_pitch 396") != std::string::npos);
    p.row_pitch = 402;
    check(p, ErrorCode::invalid_argument, "row pitch not a multiple of the element");
    p.input_type = ElementType::float16;
    p.row_pitch = 201;
    check(p, ErrorCode::invalid_argument, "odd row pitch of float16 rows");
    p.row_pitch = 202;
    check(p, ErrorCode::invalid_argument, "misaligned float16 input", 1);
    CHECK_OK(ferry::resolve_binary_quantize(p).status());
    p = good;
    check(p, ErrorCode::invalid_argument, "misaligned float32 input", 2);
    check(p, ErrorCode::invalid_argument, "misaligned codes", 0, 2);
    p.thresholds = {&thresholds, 2};
    check(p, ErrorCode::invalid_argument, "misaligned thresholds");
    p.thresholds = {&thresholds, 68};
    check(p, ErrorCode::out_of_range, "thresholds past the end of their buffer");
    p = good;
    check(p, ErrorCode::out_of_range, "input past the end of its buffer", 68);
    check(p, ErrorCode::out_of_range, "codes past the end of their buffer", 0, 68);
    const Buffer short_codes = REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes - 1));
    const BufferRef short_ref = short_codes;
    check(p, ErrorCode::out_of_range, "codes buffer one byte short", 0, 0, nullptr, &short_ref);
    p.rows = 3;
    p.row_pitch = std::uint64_t{1} << 63;
    const std::string overflow = check(p, ErrorCode::invalid_argument, "input size overflows");
    CHECK(overflow.find("overflow") != std::string::npos);
    p.rows = std::numeric_limits<std::uint32_t>::max();
    p.row_pitch = std::uint64_t{1} << 33;
    check(p, ErrorCode::invalid_argument, "input size overflows with many rows");
    {
      // Codes overlapping the input, or the thresholds, in one buffer.
      const Buffer both = REQUIRE_VALUE(t.device.create_buffer(shape.input_bytes + 512));
      const BufferRef both_ref = both;
      check(good, ErrorCode::invalid_argument, "codes overlapping the input", 0, 1000, &both_ref,
            &both_ref);
      BinaryQuantizeParams with = good;
      with.thresholds = {&both_ref, 0};
      check(with, ErrorCode::invalid_argument, "codes overlapping the thresholds", 0, 200,
            nullptr, &both_ref);
      CommandList commands;
      CHECK_OK(ferry::binary_quantize(commands, both, 0, both, shape.input_bytes, good));  // disjoint
    }
    {
      // Thresholds of another device.
      ferry::Device other = REQUIRE_VALUE(t.open_another());
      const Buffer foreign = REQUIRE_VALUE(other.create_buffer(400));
      const BufferRef foreign_ref = foreign;
      p = good;
      p.thresholds = {&foreign_ref, 0};
      check(p, ErrorCode::invalid_argument, "thresholds of another device");
    }
    {
      // Released input, released thresholds.
      Buffer gone = REQUIRE_VALUE(t.device.create_buffer(shape.input_bytes));
      gone.release();
      const BufferRef gone_ref = gone;
      check(good, ErrorCode::released, "released input", 0, 0, &gone_ref);
      p = good;
      p.thresholds = {&gone_ref, 0};
      check(p, ErrorCode::released, "released thresholds");
    }
  });
}
