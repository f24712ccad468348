// The feature_match sample's matching logic: descriptor packing (strided rows, padding to 64-bit
// codes, the bit layout), the ratio test and homographies, against truths computed here.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ferry/ops/hamming_topk.hpp"
#include "matching.hpp"

namespace {

using feature_match::Codes;
using feature_match::Homography;
using feature_match::Point;

// Bit j of a code as hamming_topk defines it: bit j % 32 of little-endian 32-bit word j / 32.
bool code_bit(const Codes& codes, std::uint64_t row, std::uint32_t j) {
  std::uint32_t word = 0;
  std::memcpy(&word, codes.bytes.data() + row * (codes.code_bits / 8) + j / 32 * 4, 4);
  return ((word >> (j % 32)) & 1u) != 0;
}

// The distance of two descriptors bit by bit, as a descriptor's tests define it (test t is bit
// t % 8 of byte t / 8).
std::uint32_t descriptor_distance(const std::uint8_t* a, const std::uint8_t* b, std::uint32_t bytes) {
  std::uint32_t distance = 0;
  for (std::uint32_t t = 0; t < bytes * 8; ++t) {
    distance += ((a[t / 8] >> (t % 8)) & 1) != ((b[t / 8] >> (t % 8)) & 1);
  }
  return distance;
}

std::uint32_t code_distance(const Codes& codes, std::uint64_t r, std::uint64_t s) {
  std::uint32_t distance = 0;
  for (std::uint32_t j = 0; j < codes.code_bits; ++j) distance += code_bit(codes, r, j) != code_bit(codes, s, j);
  return distance;
}

}  // namespace

TEST_CASE("pack_codes: strided descriptors become codes with the same bits, zero-padded") {
  std::mt19937_64 rng(std::random_device{}());
  // ORB (32 bytes: 256 bits as they are), BRIEF-16, AKAZE (61 bytes -> 512 bits), 1 byte.
  for (const std::uint32_t bytes : {32u, 16u, 61u, 1u, 512u}) {
    for (const std::uint64_t stride : {std::uint64_t{bytes}, std::uint64_t{bytes} + 13}) {
      CAPTURE(bytes);
      CAPTURE(stride);
      const std::uint64_t rows = 1 + rng() % 40;
      std::vector<std::uint8_t> matrix(rows * stride);
      for (auto& b : matrix) b = static_cast<std::uint8_t>(rng());
      auto codes = feature_match::pack_codes(matrix.data(), rows, stride, bytes);
      REQUIRE(codes.ok());
      CHECK(codes->code_bits == (bytes * 8 + 63) / 64 * 64);
      CHECK(codes->code_bits % 64 == 0);
      CHECK(codes->rows == rows);
      REQUIRE(codes->bytes.size() == rows * codes->code_bits / 8);
      for (std::uint64_t r = 0; r < rows; ++r) {
        const std::uint8_t* descriptor = matrix.data() + r * stride;
        for (std::uint32_t t = 0; t < codes->code_bits; ++t) {
          // Test t of the descriptor is bit t of the code; the padding is zero.
          const bool expected = t < bytes * 8 && ((descriptor[t / 8] >> (t % 8)) & 1) != 0;
          if (code_bit(*codes, r, t) != expected) {
            FAIL("row " << r << " bit " << t);
          }
        }
      }
      // Distances between codes are the descriptors' distances.
      for (std::uint64_t r = 0; r + 1 < rows; ++r) {
        CHECK(code_distance(*codes, r, r + 1) ==
              descriptor_distance(matrix.data() + r * stride, matrix.data() + (r + 1) * stride, bytes));
      }
    }
  }
}

TEST_CASE("pack_codes: what it refuses") {
  const std::vector<std::uint8_t> matrix(1024);
  CHECK(feature_match::pack_codes(matrix.data(), 2, 32, 0).status().code() ==
        ferry::ErrorCode::invalid_argument);
  CHECK(feature_match::pack_codes(matrix.data(), 1, 513, 513).status().code() ==
        ferry::ErrorCode::invalid_argument);
  const auto short_stride = feature_match::pack_codes(matrix.data(), 2, 31, 32);
  CHECK(short_stride.status().code() == ferry::ErrorCode::invalid_argument);
  CHECK(short_stride.status().message().find("row stride 31") != std::string::npos);
  // No rows is no error: nothing to search with, which the caller reports.
  CHECK(feature_match::pack_codes(matrix.data(), 0, 32, 32)->bytes.empty());
}

TEST_CASE("ratio_test: nearest strictly below ratio x second, with the op's padding") {
  using ferry::kHammingNoDistance;
  using ferry::kHammingNoIndex;
  // [queries x 2] as hamming_topk writes them.
  const std::vector<std::uint32_t> distances = {10, 20,   // 10 < 16: kept
                                                16, 20,   // 16 < 16: dropped (at the ratio)
                                                15, 20,   // kept
                                                0, 0,     // two rows at distance 0: ambiguous
                                                7, kHammingNoDistance,  // one database row: kept
                                                30, 31};  // dropped
  const std::vector<std::uint32_t> indices = {4, 9, 1, 2, 8, 3, 5, 6, 0, kHammingNoIndex, 2, 7};
  const auto matches = feature_match::ratio_test(distances, indices, 0.8);
  REQUIRE(matches.size() == 3);
  CHECK(matches[0].query == 0);
  CHECK(matches[0].train == 4);
  CHECK(matches[0].distance == 10);
  CHECK(matches[0].second_distance == 20);
  CHECK(matches[1].query == 2);
  CHECK(matches[1].train == 8);
  CHECK(matches[2].query == 4);
  CHECK(matches[2].train == 0);
  CHECK(matches[2].second_distance == kHammingNoDistance);
  // An empty database's padding never matches.
  CHECK(feature_match::ratio_test(std::vector<std::uint32_t>{kHammingNoDistance, kHammingNoDistance},
                                  std::vector<std::uint32_t>{kHammingNoIndex, kHammingNoIndex}, 1.0)
            .empty());
}

TEST_CASE("homographies: apply and multiply against closed forms") {
  const Homography shift = {1, 0, 5, 0, 1, -3, 0, 0, 1};
  const Homography double_size = {2, 0, 0, 0, 2, 0, 0, 0, 1};
  const Point p = feature_match::apply(feature_match::multiply(shift, double_size), {1.5, 2});
  CHECK(p.x == doctest::Approx(8.0));  // 2 * 1.5 + 5
  CHECK(p.y == doctest::Approx(1.0));  // 2 * 2 - 3
  const Point q = feature_match::apply(feature_match::multiply(double_size, shift), {1.5, 2});
  CHECK(q.x == doctest::Approx(13.0));  // 2 * (1.5 + 5)
  CHECK(q.y == doctest::Approx(-2.0));  // 2 * (2 - 3)
  // Perspective: w = 0.5 x + 1 at x = 2 is 2, so (2, 4) -> (1, 2).
  const Homography tilt = {1, 0, 0, 0, 1, 0, 0.5, 0, 1};
  const Point r = feature_match::apply(tilt, {2, 4});
  CHECK(r.x == doctest::Approx(1.0));
  CHECK(r.y == doctest::Approx(2.0));
}
