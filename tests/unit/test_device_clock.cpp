// Device timestamps to host time (vulkan/device_clock.hpp): periods other than 1 ns, timestamps
// before the calibration, and counters of fewer than 64 bits that wrapped, against values
// computed here in integers.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>

#include "vulkan/device_clock.hpp"

using ferry::vulkan::ClockCalibration;
using ferry::vulkan::device_span_to_host;
using ferry::vulkan::device_to_host_ns;
using ferry::vulkan::valid_mask;

TEST_CASE("device clock: 64-bit counters, any period, before and after the calibration") {
  const ClockCalibration clock{1'000'000'000'000ull, 5'000'000'000, 1.0, 64};
  CHECK(device_to_host_ns(clock, 1'000'000'000'000ull, 0) == 5'000'000'000);
  CHECK(device_to_host_ns(clock, 1'000'000'000'123ull, 0) == 5'000'000'123);
  CHECK(device_to_host_ns(clock, 999'999'999'000ull, 0) == 4'999'999'000);  // before it

  const ClockCalibration slow{100, 1'000, 41.666666, 64};  // a 24 MHz counter
  CHECK(device_to_host_ns(slow, 100 + 24'000'000, 0) == 1'000 + 999'999'984);
  const auto span = device_span_to_host(slow, 100 + 24, 100 + 48, 0);
  CHECK(span.start_ns == 1'000 + 1'000);
  CHECK(span.end_ns == 1'000 + 2'000);
}

TEST_CASE("device clock: a 32-bit counter that wrapped, placed by the host time around it") {
  constexpr std::uint32_t kBits = 32;
  constexpr std::uint64_t kWrap = std::uint64_t{1} << kBits;
  std::mt19937_64 rng(std::random_device{}());
  for (int trial = 0; trial < 1000; ++trial) {
    // The true counter runs without bound; the device shows its low 32 bits.
    const std::uint64_t calibration_ticks = rng() % (1ull << 40);
    const std::int64_t calibration_ns = static_cast<std::int64_t>(rng() % (1ull << 40));
    const ClockCalibration clock{calibration_ticks & valid_mask(kBits), calibration_ns, 1.0, kBits};
    // A timestamp up to 100 wraps later, taken within a second of the host time expected.
    const std::uint64_t elapsed = rng() % (100 * kWrap);
    const std::uint64_t start_ticks = calibration_ticks + elapsed;
    const std::uint64_t length = rng() % (kWrap / 2);
    const std::uint64_t end_ticks = start_ticks + length;
    const std::int64_t truth = calibration_ns + static_cast<std::int64_t>(elapsed);
    const std::int64_t expected =
        truth - static_cast<std::int64_t>(rng() % 1'000'000'000);  // dispatched before it ran
    const auto span = device_span_to_host(clock, start_ticks & valid_mask(kBits),
                                          end_ticks & valid_mask(kBits), expected);
    REQUIRE(span.start_ns == truth);
    REQUIRE(span.end_ns == truth + static_cast<std::int64_t>(length));
  }
}
