// The integer-only arithmetic of shaders/normalize_lut.h (the code normalize.comp builds its
// lookup table with, compiled here as C++) against the host's IEEE fma and ferry's 16-bit
// encodings, for every byte value and many factors: random bit patterns over the whole finite
// range, near-cancellations, exact zeros, subnormal results and overflow.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ferry/ops/normalize.hpp"
#include "normalize_lut.h"

namespace {

namespace lut = ferry::shaders::normalize_lut;

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t to_bits(float value) { return std::bit_cast<std::uint32_t>(value); }

std::string hex(std::uint32_t bits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", bits);
  return text;
}

// Checks every byte value for one (scale, bias) pair; returns the number of mismatches (and
// reports the first few).
int check_factors(float scale, float bias) {
  int mismatches = 0;
  for (std::uint32_t x = 0; x < 256; ++x) {
    const float truth = std::fma(static_cast<float>(x), scale, bias);
    const std::uint32_t truth_bits = to_bits(truth);
    const std::uint32_t f32 =
        lut::ferry_normalize_entry(x, to_bits(scale), to_bits(bias), FERRY_NORMALIZE_FLOAT32);
    const std::uint32_t f16 =
        lut::ferry_normalize_entry(x, to_bits(scale), to_bits(bias), FERRY_NORMALIZE_FLOAT16);
    const std::uint32_t bf16 =
        lut::ferry_normalize_entry(x, to_bits(scale), to_bits(bias), FERRY_NORMALIZE_BFLOAT16);
    const bool ok = f32 == truth_bits && f16 == ferry::to_float16_bits(truth) &&
                    bf16 == ferry::to_bfloat16_bits(truth);
    if (!ok && ++mismatches <= 3) {
      INFO("x " << x << ", scale " << scale << " (" << hex(to_bits(scale)) << "), bias " << bias
                << " (" << hex(to_bits(bias)) << ")");
      CHECK(f32 == truth_bits);
      CHECK(f16 == ferry::to_float16_bits(truth));
      CHECK(bf16 == ferry::to_bfloat16_bits(truth));
    }
  }
  return mismatches;
}

// A finite float with uniformly random bits (every exponent equally likely, subnormals and
// zeros included).
float random_finite(std::mt19937& rng) {
  for (;;) {
    const float value = from_bits(static_cast<std::uint32_t>(rng()));
    if (std::isfinite(value)) return value;
  }
}

// A finite float with a random exponent in [lo, hi] and random mantissa and sign.
float random_float(std::mt19937& rng, int lo, int hi) {
  const int exponent = std::uniform_int_distribution<int>(lo, hi)(rng);
  const float mantissa = std::uniform_real_distribution<float>(1.0f, 2.0f)(rng);
  const float value = std::ldexp(mantissa, exponent);
  return (rng() & 1u) != 0 ? -value : value;
}

}  // namespace

TEST_CASE("normalize lookup table: hand-picked factors") {
  const float max = std::numeric_limits<float>::max();
  const float min_normal = std::numeric_limits<float>::min();
  const float min_subnormal = std::numeric_limits<float>::denorm_min();
  const std::vector<std::pair<float, float>> factors = {
      {1.0f, 0.0f},          {1.0f, -0.0f},        {-1.0f, 0.0f},       {-1.0f, -0.0f},
      {0.0f, 0.0f},          {-0.0f, -0.0f},       {0.0f, -0.0f},       {-0.0f, 0.0f},
      {0.0f, 3.5f},          {-0.0f, -min_subnormal},
      {1.0f, -128.0f},       {-1.0f, 128.0f},      {0.5f, -64.0f},      {1.0f / 255, -0.5f},
      {1.0f / 58.395f, -123.675f / 58.395f},
      {max, 0.0f},           {max, -max},          {max / 255, max},    {-max, max},
      {max / 200, 0.0f},     {max / 255, 0.0f},    {1e30f, 1e38f},
      {min_subnormal, 0.0f}, {min_subnormal, -min_subnormal},           {min_subnormal, min_normal},
      {min_normal, -min_normal * 100}, {min_normal / 3, -min_normal},
      {min_subnormal * 7, -min_subnormal * 1000},
      {1e-8f, 1.0f},         {1e-8f, -1.0f},       {3e-8f, 1.0f},       {6e-8f, -1.0f},
      {65504.0f / 255, 0.0f}, {65520.0f / 255, 0.0f}, {65519.99f / 255, 0.0f},
      {std::ldexp(1.0f, -24) / 255, 0.0f}, {std::ldexp(1.0f, -25), 0.0f},
      {std::ldexp(1.0f, -26), std::ldexp(1.0f, -25)},
      {std::ldexp(1.0f, 20), -std::ldexp(1.0f, 27)},
      {1.0f + std::ldexp(1.0f, -23), -1.0f},  // products of more than 24 bits, cancelling
      {std::nextafter(1.0f / 3, 1.0f), -std::nextafter(85.0f, 0.0f)},
  };
  for (const auto& [scale, bias] : factors) CHECK(check_factors(scale, bias) == 0);
}

TEST_CASE("normalize lookup table: random factors over the whole float range") {
  std::mt19937 rng(1234);
  int failed = 0;
  for (int i = 0; i < 20000 && failed < 5; ++i) {
    failed += check_factors(random_finite(rng), random_finite(rng)) != 0;
  }
  CHECK(failed == 0);
}

TEST_CASE("normalize lookup table: random factors of nearby magnitudes (rounding, cancellation)") {
  std::mt19937 rng(5678);
  int failed = 0;
  for (int i = 0; i < 40000 && failed < 5; ++i) {
    const int exponent = std::uniform_int_distribution<int>(-140, 120)(rng);
    const float scale = random_float(rng, exponent, exponent);
    // A bias about x * scale for some byte x: the sum cancels to few bits, or none.
    const int x0 = std::uniform_int_distribution<int>(0, 255)(rng);
    float bias = -static_cast<float>(static_cast<double>(x0) * scale);
    switch (rng() % 4) {
      case 0: break;
      case 1: bias = std::nextafter(bias, 0.0f); break;
      case 2: bias = random_float(rng, exponent - 30, exponent + 9); break;
      default: bias = std::nextafter(bias, bias * 2); break;
    }
    if (!std::isfinite(bias)) continue;  // x0 * scale beyond the float range
    failed += check_factors(scale, bias) != 0;
  }
  CHECK(failed == 0);
}

TEST_CASE("normalize lookup table: results in and around the float16 and float32 subnormals") {
  std::mt19937 rng(91011);
  int failed = 0;
  for (int i = 0; i < 20000 && failed < 5; ++i) {
    const bool f16_range = (rng() & 1u) != 0;
    const int lo = f16_range ? -34 : -160;
    const int hi = f16_range ? -10 : -120;
    failed += check_factors(random_float(rng, lo, hi), random_float(rng, lo, hi + 8)) != 0;
  }
  CHECK(failed == 0);
}

TEST_CASE("normalize lookup table: 16-bit encodings of every float32 exponent") {
  // ferry_float16_bits / ferry_bfloat16_bits on their own, against the library's encoders.
  std::mt19937 rng(1213);
  for (std::uint32_t field = 0; field < 256; ++field) {
    for (int i = 0; i < 2000; ++i) {
      std::uint32_t bits = (field << 23) | (static_cast<std::uint32_t>(rng()) & 0x807FFFFFu);
      if (i < 8) bits = (field << 23) | (i & 1 ? 0x80000000u : 0u) | (i < 4 ? 0u : 0x7FFFFFu);
      const float value = from_bits(bits);
      CAPTURE(bits);
      if (std::isnan(value)) {
        CHECK((lut::ferry_float16_bits(bits) & 0x7FFFu) > 0x7C00u);
        CHECK((lut::ferry_bfloat16_bits(bits) & 0x7FFFu) > 0x7F80u);
        continue;
      }
      REQUIRE(lut::ferry_float16_bits(bits) == ferry::to_float16_bits(value));
      REQUIRE(lut::ferry_bfloat16_bits(bits) == ferry::to_bfloat16_bits(value));
    }
  }
}
