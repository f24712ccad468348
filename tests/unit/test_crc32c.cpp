// CRC-32C (core/crc32c.hpp): the standard check values, both code paths (hardware where the CPU
// has it, the table loop) against a bit-by-bit truth, and continuation across splits.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "core/crc32c.hpp"

namespace {

using ferry::detail::crc32c;
using ferry::detail::crc32c_portable;

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// The definition, one bit at a time (reflected polynomial 0x82f63b78, inverted in and out).
std::uint32_t crc_bitwise(std::span<const std::byte> bytes) {
  std::uint32_t crc = 0xffffffffu;
  for (const std::byte b : bytes) {
    crc ^= std::to_integer<std::uint32_t>(b);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? 0x82f63b78u : 0u);
  }
  return ~crc;
}

}  // namespace

TEST_CASE("crc32c: check values of the standard (RFC 3720)") {
  CHECK(crc32c(bytes_of("123456789")) == 0xe3069283u);
  CHECK(crc32c_portable(bytes_of("123456789")) == 0xe3069283u);
  CHECK(crc32c({}) == 0u);
  const std::vector<std::byte> zeros(32, std::byte{0});
  CHECK(crc32c(zeros) == 0x8a9136aau);
  const std::vector<std::byte> ones(32, std::byte{0xff});
  CHECK(crc32c(ones) == 0x62a8ab43u);
}

TEST_CASE("crc32c: both paths match the bitwise definition, split anywhere") {
  std::mt19937_64 rng(std::random_device{}());
  for (const std::size_t size : {1, 7, 8, 9, 63, 64, 65, 1000, 4099}) {
    std::vector<std::byte> data(size);
    for (std::byte& b : data) b = static_cast<std::byte>(rng());
    const std::uint32_t truth = crc_bitwise(data);
    CHECK(crc32c(data) == truth);
    CHECK(crc32c_portable(data) == truth);
    const std::size_t split = rng() % (size + 1);
    const std::span<const std::byte> all(data);
    CHECK(crc32c(all.subspan(split), crc32c(all.first(split))) == truth);
    CHECK(crc32c_portable(all.subspan(split), crc32c_portable(all.first(split))) == truth);
  }
}
