// The value normalize stores for input byte x of channel c, computed with integer arithmetic only,
// shared word for word by shaders/normalize.comp (which builds a lookup table of it in shared
// memory) and the host unit test tests/unit/test_normalize_lut.cpp (which checks it against
// std::fma on the CPU).
//
// Why integers: Vulkan does not promise that GLSL fma() is fused, how float->half conversions
// round, or whether denormals survive, but normalize is defined bit for bit (ferry/normalize.hpp):
//   y = fma(float(x), scale, bias) rounded once to nearest even (IEEE-754 binary32, subnormals
//   included), then float16 / bfloat16 rounded to nearest even.
// scale and bias are finite floats, passed as their bits.
//
// The code is written in the subset of C++ and GLSL the two languages share: `uint`, `int`,
// `uint64_t`, `findMSB`, functional casts, no structs, no out parameters. Names avoid GLSL's
// reserved words and built-in functions (half, exp, sign, distance, ...).
#ifndef FERRY_SHADERS_NORMALIZE_LUT_H
#define FERRY_SHADERS_NORMALIZE_LUT_H

#include "normalize_abi.h"  // FERRY_NORMALIZE_FLOAT32 / FLOAT16 / BFLOAT16

#ifdef __cplusplus
#include <bit>
#include <cstdint>
namespace ferry::shaders::normalize_lut {
using uint = std::uint32_t;
using uint64_t = std::uint64_t;
// GLSL's findMSB: the index of the highest set bit, -1 for 0.
inline int findMSB(uint value) { return std::bit_width(value) - 1; }
#define FERRY_LUT_FUNCTION inline
#else
#define FERRY_LUT_FUNCTION
#endif

FERRY_LUT_FUNCTION int ferry_msb64(uint64_t value) {
  const uint high = uint(value >> 32);
  return high != 0u ? 32 + findMSB(high) : findMSB(uint(value));
}

// Bits of fma(float(x), scale, bias) for an integer x in [0, 255], rounded to nearest even.
//
// Both terms are exact integers times powers of two: x * scale = (x * scale mantissa) * 2^e with
// a product of at most 32 bits, bias = (bias mantissa) * 2^e'. Each is placed with its leading bit
// at bit 62 of a uint64_t; the smaller one is shifted right by the exponent difference with the
// bits shifted out "jammed" into bit 0 (bit 0 |= any of them was set). That is exact for
// rounding: bits are only lost when the difference exceeds 31 (the low 31 bits of a placed term
// are zero), and then the sum keeps its leading bit at bit 61 or higher, so the 24-bit result
// rounds at bit 37 or higher and only needs to know that something below was non-zero.
FERRY_LUT_FUNCTION uint ferry_fma_u8_bits(uint x, uint scale_bits, uint bias_bits) {
  const uint scale_field = (scale_bits >> 23) & 0xFFu;
  const uint bias_field = (bias_bits >> 23) & 0xFFu;
  const uint scale_mantissa = (scale_bits & 0x7FFFFFu) | (scale_field != 0u ? 0x800000u : 0u);
  const uint bias_mantissa = (bias_bits & 0x7FFFFFu) | (bias_field != 0u ? 0x800000u : 0u);
  // Exponent of each term's mantissa bit 0 (subnormals have field 0 and the exponent of field 1).
  const int product_low_exp = int(scale_field != 0u ? scale_field : 1u) - 150;
  const int bias_low_exp = int(bias_field != 0u ? bias_field : 1u) - 150;
  const uint product_negative = scale_bits >> 31;  // float(x) is never negative
  const uint bias_negative = bias_bits >> 31;

  const uint product = x * scale_mantissa;  // x < 2^8, mantissa < 2^24: exact in 32 bits
  if (product == 0u) {
    // fma(x, s, b) with x * s = +-0 is b, except that the sum of two zeros is -0 only when both
    // are -0.
    if (bias_mantissa != 0u) return bias_bits;
    return (product_negative & bias_negative) << 31;
  }

  const int product_msb = findMSB(product);
  uint64_t larger = uint64_t(product) << (62 - product_msb);
  int larger_exp = product_low_exp + product_msb;  // exponent of bit 62
  uint larger_negative = product_negative;
  uint64_t smaller = uint64_t(0u);
  int smaller_exp = larger_exp;
  uint smaller_negative = bias_negative;
  if (bias_mantissa != 0u) {
    const int bias_msb = findMSB(bias_mantissa);
    const uint64_t placed_bias = uint64_t(bias_mantissa) << (62 - bias_msb);
    const int placed_bias_exp = bias_low_exp + bias_msb;
    if (placed_bias_exp > larger_exp || (placed_bias_exp == larger_exp && placed_bias > larger)) {
      smaller = larger;
      smaller_exp = larger_exp;
      smaller_negative = larger_negative;
      larger = placed_bias;
      larger_exp = placed_bias_exp;
      larger_negative = bias_negative;
    } else {
      smaller = placed_bias;
      smaller_exp = placed_bias_exp;
    }
  }

  const int exp_gap = larger_exp - smaller_exp;  // >= 0
  if (exp_gap >= 63) {
    smaller = uint64_t(smaller != uint64_t(0u) ? 1u : 0u);
  } else if (exp_gap > 0) {
    const uint64_t lost = smaller & ((uint64_t(1u) << exp_gap) - uint64_t(1u));
    smaller = (smaller >> exp_gap) | uint64_t(lost != uint64_t(0u) ? 1u : 0u);
  }
  // larger >= smaller after the swap, so the difference is never negative.
  const uint64_t total =
      larger_negative == smaller_negative ? larger + smaller : larger - smaller;
  if (total == uint64_t(0u)) return 0u;  // exact cancellation: +0 when rounding to nearest

  const int lead_exp = larger_exp - 62 + ferry_msb64(total);  // exponent of the leading bit
  const uint sign_bit = larger_negative << 31;
  if (lead_exp > 127) return sign_bit | 0x7F800000u;
  // The result's bit 0 is 2^(lead_exp - 23) for normals, 2^-149 for subnormals.
  const int result_low_exp = lead_exp - 23 > -149 ? lead_exp - 23 : -149;
  const int shift = result_low_exp - (larger_exp - 62);  // bits of total below the result's bit 0
  uint mantissa = 0u;
  if (shift <= 0) {
    mantissa = uint(total << (-shift));  // exact
  } else {
    // shift <= 62: it is msb(total) - 23 <= 40 for normals, and -149 - (larger_exp - 62) for
    // subnormals, where larger_exp >= -149.
    const uint64_t kept = total >> shift;
    const uint64_t rest = total & ((uint64_t(1u) << shift) - uint64_t(1u));
    const uint64_t halfway = uint64_t(1u) << (shift - 1);
    const bool round_up =
        rest > halfway || (rest == halfway && (kept & uint64_t(1u)) != uint64_t(0u));
    mantissa = uint(kept) + (round_up ? 1u : 0u);
  }
  // A mantissa rounded up to 2^24 (normal) or 2^23 (subnormal) carries into the exponent field,
  // which is what IEEE rounding does.
  uint bits = lead_exp < -126 ? mantissa : (uint(lead_exp + 126) << 23) + mantissa;
  if (bits >= 0x7F800000u) bits = 0x7F800000u;  // rounded up past the largest finite float
  return sign_bit | bits;
}

// Bits of the float16 nearest to the float with bits `f` (ties to even; subnormals kept,
// overflow to infinity, NaN stays a quiet NaN).
FERRY_LUT_FUNCTION uint ferry_float16_bits(uint f) {
  const uint sign_bit = (f >> 16) & 0x8000u;
  const uint magnitude = f & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) return sign_bit | (magnitude > 0x7F800000u ? 0x7E00u : 0x7C00u);
  // Exponent of the leading bit; float32 zeros and subnormals (field 0) land far below -25.
  const int lead_exp = int(magnitude >> 23) - 127;
  if (lead_exp < -25) return sign_bit;  // below half the smallest float16 subnormal: rounds to 0
  const uint mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  // The result's bit 0 is 2^(lead_exp - 10) for normals, 2^-24 for subnormals.
  const int result_low_exp = lead_exp - 10 > -24 ? lead_exp - 10 : -24;
  const int shift = result_low_exp - (lead_exp - 23);  // 13 to 24
  const uint kept = mantissa >> shift;
  const uint rest = mantissa & ((1u << shift) - 1u);
  const uint halfway = 1u << (shift - 1);
  const bool round_up = rest > halfway || (rest == halfway && (kept & 1u) != 0u);
  const uint rounded = kept + (round_up ? 1u : 0u);
  const uint bits = lead_exp < -14 ? rounded : (uint(lead_exp + 14) << 10) + rounded;
  return sign_bit | (bits >= 0x7C00u ? 0x7C00u : bits);
}

// Bits of the bfloat16 nearest to the float with bits `f` (ties to even; a carry out of the
// mantissa moves into the exponent, up to infinity; NaN stays a quiet NaN).
FERRY_LUT_FUNCTION uint ferry_bfloat16_bits(uint f) {
  if ((f & 0x7FFFFFFFu) > 0x7F800000u) return (f >> 16) | 0x40u;
  return (f + 0x7FFFu + ((f >> 16) & 1u)) >> 16;
}

// The stored bits of one lookup-table entry: float32 bits, or 16-bit float bits in the low half.
FERRY_LUT_FUNCTION uint ferry_normalize_entry(uint x, uint scale_bits, uint bias_bits,
                                              uint output_type) {
  const uint value = ferry_fma_u8_bits(x, scale_bits, bias_bits);
  if (output_type == FERRY_NORMALIZE_FLOAT16) return ferry_float16_bits(value);
  if (output_type == FERRY_NORMALIZE_BFLOAT16) return ferry_bfloat16_bits(value);
  return value;
}

#ifdef __cplusplus
}  // namespace ferry::shaders::normalize_lut
#endif
#undef FERRY_LUT_FUNCTION

#endif  // FERRY_SHADERS_NORMALIZE_LUT_H
