// The fill op (the first compute kernel): any byte offset and size, compared with a closed-form
// expectation and with the CPU reference backend; neighbouring bytes stay untouched.
#include <sstream>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

namespace {

struct FillCase {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t pattern = 0;
};

// Poisons a fresh buffer, applies the fills in one submission (in order, so later fills
// overwrite earlier ones where they overlap) and reads the whole buffer back.
std::vector<std::byte> run_fills(const ferry::Device& device, std::uint64_t buffer_size,
                                 const std::vector<FillCase>& fills) {
  Buffer buffer = REQUIRE_VALUE(device.create_buffer(buffer_size));
  REQUIRE_OK(ferry_test::write_bytes(device, buffer, 0, ferry_test::poison_bytes(buffer_size, 9)));
  CommandList commands;
  for (const FillCase& fill : fills)
    REQUIRE_OK(ferry::fill(commands, buffer, fill.offset, fill.size, fill.pattern));
  const ferry::TimelinePoint done =
      REQUIRE_VALUE(device.queue(QueueKind::compute).submit(std::move(commands)));
  REQUIRE_OK(done.wait(ferry_test::kLongWait));
  return REQUIRE_VALUE(ferry_test::read_bytes(device, buffer, 0, buffer_size));
}

std::vector<std::byte> expected_fills(std::uint64_t buffer_size,
                                      const std::vector<FillCase>& fills) {
  std::vector<std::byte> bytes = ferry_test::poison_bytes(buffer_size, 9);
  for (const FillCase& fill : fills)
    ferry_test::apply_fill(bytes, fill.offset, fill.size, fill.pattern);
  return bytes;
}

void check_fills(BackendUnderTest& t, const ferry::Device& reference, std::uint64_t buffer_size,
                 const std::vector<FillCase>& fills, const std::string& what) {
  INFO(what);
  const std::vector<std::byte> expected = expected_fills(buffer_size, fills);
  const std::vector<std::byte> actual = run_fills(t.device, buffer_size, fills);
  ferry_test::check_bytes_equal(actual, expected, "fill vs closed form");
  const std::vector<std::byte> on_cpu = run_fills(reference, buffer_size, fills);
  ferry_test::check_bytes_equal(actual, on_cpu, "fill vs CPU reference");
}

}  // namespace

TEST_CASE("fill: every small size at every alignment, one fill per submission") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::Device reference = REQUIRE_VALUE(t.open_cpu_reference());
    const auto pattern = static_cast<std::uint32_t>(t.rng());
    // Sizes 1..9 at offsets 0..7 in a 32-byte buffer; bytes before and after must survive.
    std::vector<FillCase> fills;
    for (std::uint64_t offset = 0; offset < 8; ++offset) {
      for (std::uint64_t size = 1; size <= 9; ++size) {
        fills.push_back({offset, size, pattern});
      }
    }
    // Apply each in its own buffer so neighbours are checked every time; batch the buffers
    // into one submission per offset to keep the run short.
    for (std::uint64_t offset = 0; offset < 8; ++offset) {
      CommandList commands;
      std::vector<Buffer> buffers;
      std::vector<std::vector<std::byte>> expected;
      for (std::uint64_t size = 1; size <= 9; ++size) {
        buffers.push_back(REQUIRE_VALUE(
            ferry_test::device_buffer_with(t.device, ferry_test::poison_bytes(32, 10))));
        REQUIRE_OK(ferry::fill(commands, buffers.back(), offset, size, pattern));
        expected.push_back(ferry_test::poison_bytes(32, 10));
        ferry_test::apply_fill(expected.back(), offset, size, pattern);
      }
      const ferry::TimelinePoint done =
          REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)));
      REQUIRE_OK(done.wait(ferry_test::kLongWait));
      for (std::size_t i = 0; i < buffers.size(); ++i) {
        std::ostringstream what;
        what << "fill offset " << offset << " size " << i + 1 << " pattern 0x" << std::hex
             << pattern;
        INFO(what.str());
        const auto bytes = REQUIRE_VALUE(ferry_test::read_bytes(t.device, buffers[i], 0, 32));
        ferry_test::check_bytes_equal(bytes, expected[i], "32-byte buffer after fill");
      }
    }
    // And the same cases against the CPU reference, all in one buffer (later fills win).
    check_fills(t, reference, 32, fills, "all small fills in one submission");
  });
}

TEST_CASE("fill: unaligned heads and tails, large ranges, overlapping fills in order") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::Device reference = REQUIRE_VALUE(t.open_cpu_reference());
    constexpr std::uint64_t kMiB = 1ull << 20;
    const std::uint64_t buffer_size = 5 * kMiB + 13;
    std::vector<FillCase> fills;
    // Large, unaligned at both ends.
    fills.push_back({13, 5 * kMiB - 11, 0x01020304u});
    // Small ones inside it, at awkward places, including the very first and last bytes.
    fills.push_back({0, 1, 0xA1B2C3D4u});
    fills.push_back({buffer_size - 1, 1, 0x11223344u});
    fills.push_back({buffer_size - 3, 3, 0x55667788u});
    fills.push_back({4095, 2, 0x99AABBCCu});
    fills.push_back({65535, 65539, 0xDEADBEEFu});
    for (int i = 0; i < 12; ++i) {
      const std::uint64_t size = ferry_test::log_uniform_size(t.rng, 1, kMiB);
      const std::uint64_t offset = ferry_test::uniform(t.rng, 0, buffer_size - size);
      fills.push_back({offset, size, static_cast<std::uint32_t>(t.rng())});
    }
    std::ostringstream what;
    for (const FillCase& fill : fills) what << "[" << fill.offset << ", +" << fill.size << ") ";
    check_fills(t, reference, buffer_size, fills, what.str());

    // The whole buffer, and a zero pattern.
    check_fills(t, reference, 4 * kMiB + 3, {{0, 4 * kMiB + 3, 0}}, "whole buffer, pattern 0");
  });
}

TEST_CASE("fill then copy in one submission sees the fill") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::uint64_t size = 70001;
    Buffer a = REQUIRE_VALUE(t.device.create_buffer(size));
    Buffer b =
        REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, ferry_test::poison_bytes(size, 11)));
    CommandList commands;
    REQUIRE_OK(ferry::fill(commands, a, 0, size, 0xCAFEF00Du));
    REQUIRE_OK(commands.copy(a, 1, b, 0, size - 1));  // reads what the fill wrote
    REQUIRE_OK(ferry::fill(commands, a, 5, 3, 0x00000000u));  // then overwrites part of it
    REQUIRE(commands.size() == 3);
    const ferry::TimelinePoint done =
        REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)));
    REQUIRE_OK(done.wait(ferry_test::kLongWait));

    std::vector<std::byte> expected_a(size);
    ferry_test::apply_fill(expected_a, 0, size, 0xCAFEF00Du);
    std::vector<std::byte> expected_b = ferry_test::poison_bytes(size, 11);
    std::copy(expected_a.begin() + 1, expected_a.end(), expected_b.begin());
    ferry_test::apply_fill(expected_a, 5, 3, 0);
    ferry_test::check_bytes_equal(REQUIRE_VALUE(ferry_test::read_bytes(t.device, a, 0, size)),
                                  expected_a, "a");
    ferry_test::check_bytes_equal(REQUIRE_VALUE(ferry_test::read_bytes(t.device, b, 0, size)),
                                  expected_b, "b");
  });
}
