// Device timestamps (ticks of a counter with timestampValidBits bits, timestampPeriod ns each)
// turned into host steady-clock nanoseconds. Pure (no Vulkan headers), unit-tested.
#pragma once

#include <cmath>
#include <cstdint>

namespace ferry::vulkan {

// A device tick and the host time it corresponds to (from calibrated timestamps, or the first
// timed submission's start placed at its dispatch).
struct ClockCalibration {
  std::uint64_t device_ticks = 0;  // the low valid_bits of the device counter
  std::int64_t host_ns = 0;
  double period_ns = 1.0;          // timestampPeriod
  std::uint32_t valid_bits = 64;   // timestampValidBits, 1 to 64
};

// The low `bits` bits set.
constexpr std::uint64_t valid_mask(std::uint32_t bits) {
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

// Ticks from the calibration to `ticks` (only the low valid bits count), unwrapped to the value
// nearest `expected_ns` on the host: a counter of fewer than 64 bits wraps (32 bits at 1 GHz:
// every 4.3 s), so a timestamp alone is ambiguous; the host time around which it was taken (a
// submission's dispatch) picks the wrap it belongs to, as long as it is within half a wrap.
inline std::int64_t ticks_since(const ClockCalibration& clock, std::uint64_t ticks,
                                std::int64_t expected_ns) {
  const std::uint64_t mask = valid_mask(clock.valid_bits);
  const std::uint64_t raw = (ticks - clock.device_ticks) & mask;
  if (clock.valid_bits >= 64) return static_cast<std::int64_t>(raw);  // two's complement
  const auto wrap = static_cast<double>(mask) + 1.0;
  const double expected = static_cast<double>(expected_ns - clock.host_ns) / clock.period_ns;
  // raw + k * wrap nearest to expected.
  const double k = std::round((expected - static_cast<double>(raw)) / wrap);
  return static_cast<std::int64_t>(static_cast<double>(raw) + k * wrap);
}

// Host nanoseconds of device tick `ticks`, taken around host time `expected_ns`.
inline std::int64_t device_to_host_ns(const ClockCalibration& clock, std::uint64_t ticks,
                                      std::int64_t expected_ns) {
  return clock.host_ns + static_cast<std::int64_t>(std::llround(
                             static_cast<double>(ticks_since(clock, ticks, expected_ns)) *
                             clock.period_ns));
}

// A span [start, end] of device ticks in host nanoseconds; `end` follows `start` by less than one
// wrap of the counter.
struct HostSpan {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};
inline HostSpan device_span_to_host(const ClockCalibration& clock, std::uint64_t start_ticks,
                                    std::uint64_t end_ticks, std::int64_t expected_ns) {
  const std::int64_t start = device_to_host_ns(clock, start_ticks, expected_ns);
  const std::uint64_t length = (end_ticks - start_ticks) & valid_mask(clock.valid_bits);
  return {start, start + static_cast<std::int64_t>(
                             std::llround(static_cast<double>(length) * clock.period_ns))};
}

}  // namespace ferry::vulkan
