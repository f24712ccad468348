// shaders/rescore_score.h (the integer fma, the checked score steps and the ranking keys that
// rescore.comp and the CPU reference run) against the host's IEEE arithmetic: random bit patterns
// of every class, nearby magnitudes (rounding, cancellation), subnormal inputs and results,
// infinities and NaNs; the steps also with the x86 flush-to-zero and denormals-are-zero modes on,
// which the check and fallback must make irrelevant.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "rescore_score.h"

namespace {

namespace score = ferry::shaders::rescore;

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t to_bits(float value) { return std::bit_cast<std::uint32_t>(value); }

std::string hex(std::uint32_t bits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", bits);
  return text;
}

// IEEE's fma of three floats, NaN results as the one NaN rescore writes. The test runs with the
// default float modes (nothing flushed).
std::uint32_t truth_fma(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  const float r = std::fma(from_bits(a), from_bits(b), from_bits(c));
  return std::isnan(r) ? FERRY_RESCORE_NAN_BITS : to_bits(r);
}
std::uint32_t truth_sub(std::uint32_t a, std::uint32_t b) {
  const float r = from_bits(a) - from_bits(b);
  return std::isnan(r) ? FERRY_RESCORE_NAN_BITS : to_bits(r);
}

// A float with a random exponent field in [lo, hi] (0: zero or subnormal; 255: inf or NaN) and
// random mantissa and sign.
std::uint32_t random_field(std::mt19937& rng, std::uint32_t lo, std::uint32_t hi) {
  const std::uint32_t field = std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng);
  std::uint32_t mantissa = static_cast<std::uint32_t>(rng()) & 0x7FFFFFu;
  if (rng() % 8 == 0) mantissa &= 0x7F0000u;  // short mantissas: exact products, ties
  return (static_cast<std::uint32_t>(rng()) & 0x80000000u) | (field << 23) | mantissa;
}

// Interesting values: zeros, the smallest and largest subnormals and normals, infinities, NaNs.
const std::vector<std::uint32_t> kSpecial = {
    0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x807FFFFFu, 0x00800000u,
    0x80800000u, 0x00800001u, 0x3F800000u, 0xBF800000u, 0x3F800001u, 0x7F7FFFFFu, 0xFF7FFFFFu,
    0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x34000000u, 0x1F800000u,
    0x20000000u, 0x5F800000u, 0x00400000u};

int check_fma(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  const std::uint32_t expected = truth_fma(a, b, c);
  const std::uint32_t soft = score::ferry_rescore_soft_fma(a, b, c);
  const std::uint32_t step = score::ferry_rescore_fma_step(a, b, c);
  if (soft == expected && step == expected) return 0;
  INFO("fma(" << hex(a) << ", " << hex(b) << ", " << hex(c) << ") = " << hex(expected)
              << "; soft " << hex(soft) << ", step " << hex(step));
  CHECK(soft == expected);
  CHECK(step == expected);
  return 1;
}

}  // namespace

TEST_CASE("rescore integer fma: special values in every combination") {
  int failed = 0;
  for (std::uint32_t a : kSpecial) {
    for (std::uint32_t b : kSpecial) {
      for (std::uint32_t c : kSpecial) failed += check_fma(a, b, c);
    }
  }
  CHECK(failed == 0);
}

TEST_CASE("rescore integer fma: random bit patterns of every exponent") {
  std::mt19937 rng(2024);
  int failed = 0;
  for (int i = 0; i < 300000 && failed < 5; ++i) {
    failed += check_fma(static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng()),
                        static_cast<std::uint32_t>(rng()));
  }
  CHECK(failed == 0);
}

TEST_CASE("rescore integer fma: nearby magnitudes, cancellation, subnormal inputs and results") {
  std::mt19937 rng(77);
  int failed = 0;
  for (int i = 0; i < 400000 && failed < 5; ++i) {
    std::uint32_t a = 0, b = 0, c = 0;
    switch (i % 4) {
      case 0: {  // c about -a * b: the sum cancels to few bits, or none
        a = random_field(rng, 1, 254);
        b = random_field(rng, 1, 254);
        const float p = from_bits(a) * from_bits(b);
        if (!std::isfinite(p)) continue;
        c = to_bits(-p) + static_cast<std::uint32_t>(rng() % 5) - 2u;
        break;
      }
      case 1:  // products and sums around and below the smallest normal
        a = random_field(rng, 0, 80);
        b = random_field(rng, 40, 100);
        c = random_field(rng, 0, 30);
        break;
      case 2:  // subnormal operands anywhere
        a = random_field(rng, 0, 0);
        b = random_field(rng, 0, 254);
        c = random_field(rng, 0, 254);
        break;
      default:  // results near overflow
        a = random_field(rng, 190, 254);
        b = random_field(rng, 120, 140);
        c = random_field(rng, 240, 254);
        break;
    }
    failed += check_fma(a, b, c);
  }
  CHECK(failed == 0);
}

TEST_CASE("rescore steps: the l2 difference is IEEE's, NaNs canonical") {
  std::mt19937 rng(5);
  int failed = 0;
  for (int i = 0; i < 200000 && failed < 5; ++i) {
    std::uint32_t a = static_cast<std::uint32_t>(rng()), b = static_cast<std::uint32_t>(rng());
    if (i % 3 == 0) b = a ^ (static_cast<std::uint32_t>(rng()) & 0x800000FFu);  // near-equal
    if (i % 7 == 0) a = random_field(rng, 0, 2), b = random_field(rng, 0, 2);
    if (i < static_cast<int>(kSpecial.size() * kSpecial.size())) {
      a = kSpecial[i % kSpecial.size()], b = kSpecial[i / kSpecial.size()];
    }
    const std::uint32_t expected = truth_sub(a, b), step = score::ferry_rescore_sub_step(a, b);
    if (step != expected && ++failed <= 3) {
      INFO(hex(a) << " - " << hex(b) << " = " << hex(expected) << ", step " << hex(step));
      CHECK(step == expected);
    }
  }
  CHECK(failed == 0);
}

#if defined(__x86_64__)
namespace {

// The steps' hardware operation under MXCSR's flush-to-zero and denormals-are-zero bits. The
// mode is set and restored around one call; volatile reads and writes keep the operation between
// the two (the compiler orders them with the MXCSR writes, not plain float arithmetic).
struct FlushModes {
  FlushModes() : saved(_mm_getcsr()) { _mm_setcsr(saved | 0x8040u); }  // FTZ | DAZ
  ~FlushModes() { _mm_setcsr(saved); }
  unsigned saved;
};

[[gnu::noinline]] std::uint32_t fma_step_flushing(std::uint32_t a, std::uint32_t b,
                                                  std::uint32_t c) {
  volatile std::uint32_t in[3] = {a, b, c};
  const FlushModes modes;
  volatile std::uint32_t out = score::ferry_rescore_fma_step(in[0], in[1], in[2]);
  return out;
}
[[gnu::noinline]] std::uint32_t sub_step_flushing(std::uint32_t a, std::uint32_t b) {
  volatile std::uint32_t in[2] = {a, b};
  const FlushModes modes;
  volatile std::uint32_t out = score::ferry_rescore_sub_step(in[0], in[1]);
  return out;
}
[[gnu::noinline]] float flushed_sum(float a, float b) {
  volatile float in[2] = {a, b};
  const FlushModes modes;
  volatile float out = in[0] + in[1];
  return out;
}

}  // namespace

TEST_CASE("rescore steps: exact with flush-to-zero and denormals-are-zero on") {
  // The modes do flush here (else this test would prove nothing).
  const float tiny = std::numeric_limits<float>::min();
  REQUIRE(flushed_sum(tiny * 1.5f, -tiny) == 0.0f);
  std::mt19937 rng(31337);
  int failed = 0;
  for (int i = 0; i < 200000 && failed < 5; ++i) {
    const std::uint32_t a = random_field(rng, 0, i % 2 == 0 ? 70 : 254);
    const std::uint32_t b = random_field(rng, 0, i % 2 == 0 ? 90 : 254);
    const std::uint32_t c = random_field(rng, 0, i % 3 == 0 ? 3 : 254);
    const std::uint32_t fma = fma_step_flushing(a, b, c), sub = sub_step_flushing(a, c);
    if ((fma != truth_fma(a, b, c) || sub != truth_sub(a, c)) && ++failed <= 3) {
      INFO("a " << hex(a) << ", b " << hex(b) << ", c " << hex(c));
      CHECK(fma == truth_fma(a, b, c));
      CHECK(sub == truth_sub(a, c));
    }
  }
  CHECK(failed == 0);
}
#endif

TEST_CASE("rescore keys: ascending keys are rank order, and give the score back") {
  std::mt19937 rng(8);
  std::vector<std::uint32_t> values = kSpecial;
  for (int i = 0; i < 2000; ++i) values.push_back(static_cast<std::uint32_t>(rng()));
  for (const bool larger_better : {false, true}) {
    for (std::uint32_t x : values) {
      for (int i = 0; i < 50; ++i) {
        const std::uint32_t y = values[rng() % values.size()];
        // float32: NaN after every number, +0 == -0, else by value.
        const float fx = from_bits(x), fy = from_bits(y);
        const int float_rank = std::isnan(fx) != std::isnan(fy) ? (std::isnan(fx) ? 1 : -1)
                               : std::isnan(fx) || fx == fy     ? 0
                               : (fx < fy) == larger_better     ? 1
                                                                : -1;
        const std::uint32_t kx = score::ferry_rescore_key(x, true, larger_better);
        const std::uint32_t ky = score::ferry_rescore_key(y, true, larger_better);
        CHECK((kx < ky ? -1 : kx > ky ? 1 : 0) == float_rank);
        // int32, by value.
        const auto ix = static_cast<std::int32_t>(x), iy = static_cast<std::int32_t>(y);
        const int int_rank = ix == iy ? 0 : (ix < iy) == larger_better ? 1 : -1;
        const std::uint32_t jx = score::ferry_rescore_key(x, false, larger_better);
        const std::uint32_t jy = score::ferry_rescore_key(y, false, larger_better);
        CHECK((jx < jy ? -1 : jx > jy ? 1 : 0) == int_rank);
      }
      const std::uint32_t back =
          score::ferry_rescore_key_score(score::ferry_rescore_key(x, true, larger_better), true,
                                         larger_better);
      CHECK(back == (std::isnan(from_bits(x)) ? FERRY_RESCORE_NAN_BITS
                     : x == 0x80000000u       ? 0u
                                              : x));
      CHECK(score::ferry_rescore_key_score(score::ferry_rescore_key(x, false, larger_better),
                                           false, larger_better) == x);
    }
  }
}
