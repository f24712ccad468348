#include "test_data.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace ferry_test {

void fill_random(std::mt19937_64& rng, std::span<std::byte> bytes) {
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    const std::uint64_t word = rng();
    std::memcpy(bytes.data() + i, &word, 8);
  }
  if (i < bytes.size()) {
    const std::uint64_t word = rng();
    std::memcpy(bytes.data() + i, &word, bytes.size() - i);
  }
}

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t size) {
  std::vector<std::byte> bytes(size);
  fill_random(rng, bytes);
  return bytes;
}

void fill_poison(std::span<std::byte> bytes, std::uint8_t salt) {
  // Period 251 (prime) so the pattern does not line up with any power-of-two chunking.
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::byte>((i % 251) ^ 0xA5u ^ salt);
  }
}

std::vector<std::byte> poison_bytes(std::size_t size, std::uint8_t salt) {
  std::vector<std::byte> bytes(size);
  fill_poison(bytes, salt);
  return bytes;
}

std::uint64_t uniform(std::mt19937_64& rng, std::uint64_t min, std::uint64_t max) {
  return std::uniform_int_distribution<std::uint64_t>(min, max)(rng);
}

std::uint64_t log_uniform_size(std::mt19937_64& rng, std::uint64_t min, std::uint64_t max) {
  const double lo = std::log(static_cast<double>(min));
  const double hi = std::log(static_cast<double>(max) + 1.0);
  const double x = std::uniform_real_distribution<double>(lo, hi)(rng);
  const auto size = static_cast<std::uint64_t>(std::exp(x));
  return std::clamp(size, min, max);
}

void apply_fill(std::span<std::byte> bytes, std::uint64_t offset, std::uint64_t size,
                std::uint32_t pattern) {
  for (std::uint64_t i = 0; i < size; ++i) {
    bytes[offset + i] = static_cast<std::byte>((pattern >> (8 * (i % 4))) & 0xFFu);
  }
}

bool check_bytes_equal(std::span<const std::byte> actual, std::span<const std::byte> expected,
                       std::string_view what) {
  if (actual.size() != expected.size()) {
    FAIL_CHECK(what << ": size " << actual.size() << ", expected " << expected.size());
    return false;
  }
  if (std::memcmp(actual.data(), expected.data(), actual.size()) == 0) return true;
  std::size_t first = actual.size();
  std::size_t last = 0;
  std::size_t count = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) {
      first = std::min(first, i);
      last = i;
      ++count;
    }
  }
  std::ostringstream text;
  text << what << ": " << count << " of " << actual.size() << " bytes differ, first at " << first
       << " (got 0x" << std::hex << std::to_integer<unsigned>(actual[first]) << ", expected 0x"
       << std::to_integer<unsigned>(expected[first]) << std::dec << "), last at " << last;
  FAIL_CHECK(text.str());
  return false;
}

}  // namespace ferry_test
