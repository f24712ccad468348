// The ibp_encode op: every backend must write exactly the bytes of the host encoder
// (ferry::ibp::encode) for the same tensor and parameters, checksums included, leave the bytes
// past the stream as they were, and the stream must decode to the input. Every element size,
// tensor family and group size, awkward shapes and offsets, a stream of several checksum chunks;
// then every bad parameter.
#include <cstring>
#include <sstream>
#include <string>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::ErrorCode;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

namespace {

enum class Family { constant, random, alternating, small_ints, half_zero_floats, all_raw };
constexpr Family kFamilies[] = {Family::constant,    Family::random,
                                Family::alternating, Family::small_ints,
                                Family::half_zero_floats, Family::all_raw};
const char* name(Family family) {
  switch (family) {
    case Family::constant: return "constant";
    case Family::random: return "random";
    case Family::alternating: return "alternating";
    case Family::small_ints: return "small ints with outliers";
    case Family::half_zero_floats: return "half-zero floats";
    case Family::all_raw: return "all rows raw";
  }
  return "?";
}

struct Case {
  ferry::ibp::EncodeParams params;
  Family family = Family::random;
  std::uint64_t input_offset = 0;   // bytes, a multiple of the element size
  std::uint64_t stream_offset = 0;  // bytes, a multiple of 8
};

std::string describe(const Case& c) {
  std::ostringstream out;
  out << "element_size " << int(c.params.element_size) << ", " << c.params.elements
      << " elements in rows of " << c.params.row_elements << ", group_rows "
      << c.params.group_rows << ", " << name(c.family) << ", input at " << c.input_offset
      << ", stream at " << c.stream_offset;
  return out.str();
}

// The tensor's elements (low element_size bytes of each value, little-endian).
std::vector<std::byte> make_tensor(std::mt19937_64& rng, const Case& c) {
  const unsigned es = c.params.element_size, bits = 8 * es;
  const std::uint64_t top = bits == 64 ? ~0ull : (1ull << bits) - 1;
  std::vector<std::byte> bytes(c.params.elements * es);
  const std::uint64_t constant = rng() & top;
  for (std::uint64_t i = 0; i < c.params.elements; ++i) {
    std::uint64_t v = 0;
    switch (c.family) {
      case Family::constant: v = constant; break;
      case Family::random: v = rng(); break;
      case Family::alternating: v = (i % 2 == 0) ? 0x5555555555555555ull : 0xaaaaaaaaaaaaaaaaull; break;
      case Family::small_ints:
        v = ferry_test::uniform(rng, 0, 99) == 0 ? rng() : ferry_test::uniform(rng, 0, 40);
        break;
      case Family::half_zero_floats:
        // A float of the element's size near 1.0 (its sign and high exponent bits fixed), or 0.
        v = ferry_test::uniform(rng, 0, 1) == 0
                ? 0
                : ((0x3full << (bits - 8)) | (rng() & ((top >> 10) | 0xff))) & top;
        break;
      case Family::all_raw: v = rng() ^ (i * 0x9e3779b97f4a7c15ull); break;
    }
    v &= top;
    for (unsigned b = 0; b < es; ++b) bytes[i * es + b] = std::byte((v >> (8 * b)) & 0xff);
  }
  return bytes;
}

// Encodes every case in one submission, each in buffers of its own (random bytes around the
// input, poison around the stream), and checks the stream against the host encoder's bytes,
// the bytes after it against the poison, and its decode against the input.
void run_and_check(BackendUnderTest& t, const std::vector<Case>& cases) {
  struct Prepared {
    Buffer input, stream;
    std::vector<std::byte> tensor;
    std::uint64_t stream_room = 0;
  };
  constexpr std::uint64_t kGuard = 24;
  std::vector<Prepared> prepared;
  CommandList commands;
  for (const Case& c : cases) {
    INFO(describe(c));
    Prepared p;
    p.tensor = make_tensor(t.rng, c);
    std::vector<std::byte> input = ferry_test::random_bytes(t.rng, c.input_offset + p.tensor.size() + 5);
    std::memcpy(input.data() + c.input_offset, p.tensor.data(), p.tensor.size());
    p.stream_room = REQUIRE_VALUE(ferry::ibp::max_stream_bytes(c.params));
    p.input = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, input));
    p.stream = REQUIRE_VALUE(ferry_test::device_buffer_with(
        t.device, ferry_test::poison_bytes(c.stream_offset + p.stream_room + kGuard, 3)));
    REQUIRE_OK(ferry::ibp_encode(commands, {p.input, c.input_offset, p.stream, c.stream_offset},
                                 c.params));
    prepared.push_back(std::move(p));
  }
  const ferry::TimelinePoint done =
      REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)));
  REQUIRE_OK(done.wait(ferry_test::kLongWait));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO(describe(c));
    const Prepared& p = prepared[i];
    const std::vector<std::byte> stream = REQUIRE_VALUE(ferry::ibp::encode(p.tensor, c.params));
    std::vector<std::byte> expected =
        ferry_test::poison_bytes(c.stream_offset + p.stream_room + kGuard, 3);
    std::copy(stream.begin(), stream.end(),
              expected.begin() + static_cast<std::ptrdiff_t>(c.stream_offset));
    const auto actual = REQUIRE_VALUE(ferry_test::read_bytes(t.device, p.stream, 0, expected.size()));
    ferry_test::check_bytes_equal(actual, expected, "stream (with the bytes around it)");
    const std::span<const std::byte> written =
        std::span<const std::byte>(actual).subspan(c.stream_offset, stream.size());
    std::vector<std::byte> decoded(p.tensor.size());
    REQUIRE_OK(ferry::ibp::decode(written, decoded));
    CHECK(decoded == p.tensor);
  }
}

Case make_case(std::uint8_t es, std::uint64_t row_elements, std::uint64_t elements,
               std::uint32_t group_rows, Family family) {
  Case c;
  c.params.element_size = es;
  c.params.row_elements = row_elements;
  c.params.elements = elements;
  c.params.group_rows = group_rows;
  c.family = family;
  return c;
}

}  // namespace

TEST_CASE("ibp_encode: every element size, family and group size writes the host encoder's bytes") {
  ferry_test::for_each_backend({"ibp_encode"}, [](BackendUnderTest& t) {
    std::vector<Case> cases;
    for (const std::uint8_t es : {1, 2, 4, 8}) {
      for (const Family family : kFamilies) {
        const std::uint64_t row_elements = ferry_test::uniform(t.rng, 1, 40);
        const std::uint64_t rows = ferry_test::uniform(t.rng, 1, 60);
        const std::uint64_t elements = rows * row_elements - ferry_test::uniform(t.rng, 0, row_elements - 1);
        for (const std::uint32_t group_rows : {1u, 3u, 128u, static_cast<std::uint32_t>(rows)}) {
          if (ferry_test::light_run() && (es + group_rows + static_cast<unsigned>(family)) % 2 != 0)
            continue;  // half the sweep under the sanitizers
          Case c = make_case(es, row_elements, elements, group_rows, family);
          c.input_offset = ferry_test::uniform(t.rng, 0, 3) * es;
          c.stream_offset = ferry_test::uniform(t.rng, 0, 2) * 8;
          c.params.dtype = static_cast<ferry::ibp::DType>(ferry_test::uniform(t.rng, 0, 13));
          c.params.ndim = static_cast<std::uint8_t>(ferry_test::uniform(t.rng, 1, 2));
          cases.push_back(c);
        }
      }
    }
    run_and_check(t, cases);
  });
}

TEST_CASE("ibp_encode: awkward shapes write the host encoder's bytes") {
  ferry_test::for_each_backend({"ibp_encode"}, [](BackendUnderTest& t) {
    std::vector<Case> cases;
    for (const std::uint8_t es : {1, 2, 4, 8}) {
      for (const Family family : {Family::small_ints, Family::half_zero_floats}) {
        cases.push_back(make_case(es, 37, 37, 1, family));         // one row
        cases.push_back(make_case(es, 37, 37, 5, family));         // one row, a larger group
        cases.push_back(make_case(es, 1, 211, 7, family));         // one element per row
        cases.push_back(make_case(es, 13, 13 * 50 - 5, 16, family));  // short last row
        cases.push_back(make_case(es, 9, 9 * 10, 3, family));      // short last group
        cases.push_back(make_case(es, 7, 7 * 33 - 6, 33, family));  // odd rows, one group
        cases.push_back(make_case(es, 300, 300 * 4 - 299, 2, family));  // last row of 1
      }
    }
    run_and_check(t, cases);
  });
}

TEST_CASE("ibp_encode: a stream of several checksum chunks writes the host encoder's bytes") {
  ferry_test::for_each_backend({"ibp_encode"}, [](BackendUnderTest& t) {
    std::vector<Case> cases;
    cases.push_back(make_case(4, 512, 512 * 150 - 17, 64, Family::random));
    cases.push_back(make_case(8, 200, 200 * 90, 90, Family::small_ints));
    cases.push_back(make_case(2, 1000, 1000 * 140, 128, Family::half_zero_floats));
    run_and_check(t, cases);
  });
}

TEST_CASE("ibp_encode: bad parameters and ranges are errors, nothing recorded") {
  ferry_test::for_each_backend({"ibp_encode"}, [](BackendUnderTest& t) {
    ferry::ibp::EncodeParams params;
    params.element_size = 4;
    params.row_elements = 16;
    params.elements = 16 * 10;
    params.group_rows = 4;
    const std::uint64_t room = REQUIRE_VALUE(ferry::ibp::max_stream_bytes(params));
    Buffer input = REQUIRE_VALUE(t.device.create_buffer(1024));
    Buffer stream = REQUIRE_VALUE(t.device.create_buffer(room + 64));
    CommandList commands;
    auto expect = [&](const ferry::IbpEncodeBuffers& buffers, const ferry::ibp::EncodeParams& p,
                      ErrorCode code, const char* what) {
      INFO(what);
      const ferry::Status status = ferry::ibp_encode(commands, buffers, p);
      CHECK(status.code() == code);
      CHECK(commands.size() == 0);
    };
    ferry::ibp::EncodeParams bad = params;
    bad.group_rows = 0;
    expect({input, 0, stream, 0}, bad, ErrorCode::invalid_argument, "group_rows 0");
    bad = params;
    bad.element_size = 3;
    expect({input, 0, stream, 0}, bad, ErrorCode::invalid_argument, "element_size 3");
    bad = params;
    bad.row_elements = 0;
    expect({input, 0, stream, 0}, bad, ErrorCode::invalid_argument, "row_elements 0");
    expect({input, 0, stream, 72}, params, ErrorCode::out_of_range, "stream too small");
    expect({input, 1024 - 16 * 10 * 4 + 4, stream, 0}, params, ErrorCode::out_of_range,
           "input past its buffer");
    expect({input, 2, stream, 0}, params, ErrorCode::invalid_argument, "misaligned input");
    expect({input, 0, stream, 4}, params, ErrorCode::invalid_argument, "misaligned stream");
    expect({stream, 0, stream, 8}, params, ErrorCode::invalid_argument, "overlap");
    REQUIRE_OK(ferry::ibp_encode(commands, {input, 0, stream, 8}, params));
    CHECK(commands.size() == 1);
  });
}
