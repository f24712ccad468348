// Checked size arithmetic (core/checked.hpp) against 128-bit arithmetic, at and around 2^64.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/checked.hpp"

namespace {

using ferry::detail::checked_add;
using ferry::detail::checked_mul;
using ferry::detail::checked_mul_add;
using ferry::detail::checked_round_up;
using ferry::detail::pieces_of;
using ferry::detail::range_within;
using ferry::detail::round_down;
__extension__ using Wide = unsigned __int128;  // GCC and Clang: an independent truth

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// Values where overflow bugs live: 0, 1, powers of two and their neighbours, near 2^64.
std::vector<std::uint64_t> awkward_values(std::mt19937_64& rng) {
  std::vector<std::uint64_t> values = {0, 1, 2, 3, 255, 256, 257, 4095, 4096, kMax, kMax - 1,
                                       kMax - 255, kMax - 256, kMax / 2, kMax / 2 + 1};
  for (int bit = 1; bit < 64; bit += 7) {
    const std::uint64_t power = std::uint64_t{1} << bit;
    values.insert(values.end(), {power - 1, power, power + 1});
  }
  for (int i = 0; i < 16; ++i) values.push_back(rng() >> (rng() % 64));
  return values;
}

}  // namespace

TEST_CASE("checked arithmetic agrees with 128-bit arithmetic, overflow included") {
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<std::uint64_t> values = awkward_values(rng);
  for (const std::uint64_t a : values) {
    for (const std::uint64_t b : values) {
      CAPTURE(a);
      CAPTURE(b);
      const Wide sum = Wide{a} + b;
      const auto added = checked_add(a, b);
      CHECK(added.has_value() == (sum <= kMax));
      if (added) CHECK(*added == sum);

      const Wide product = Wide{a} * b;
      const auto multiplied = checked_mul(a, b);
      CHECK(multiplied.has_value() == (product <= kMax));
      if (multiplied) CHECK(*multiplied == product);

      const Wide with_extent = product + 7;
      const auto mul_added = checked_mul_add(a, b, 7);
      CHECK(mul_added.has_value() == (with_extent <= kMax));
      if (mul_added) CHECK(*mul_added == with_extent);

      CHECK(range_within(a, b, kMax / 3) == (Wide{a} + b <= kMax / 3));
      CHECK(range_within(a, b, kMax) == (Wide{a} + b <= kMax));

      if (b != 0) {
        const Wide rounded = (Wide{a} + b - 1) / b * b;
        const auto up = checked_round_up(a, b);
        CHECK(up.has_value() == (rounded <= kMax));
        if (up) CHECK(*up == rounded);
        CHECK(pieces_of(a, b) == (Wide{a} + b - 1) / b);
        CHECK(round_down(a, b) == a - a % b);
        CHECK(round_down(a, b) <= a);
      }
    }
  }
  CHECK_FALSE(checked_round_up(5, 0).has_value());
  CHECK(pieces_of(5, 0) == 0);
}
