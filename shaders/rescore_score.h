// rescore's float32 arithmetic and ranking keys, shared word for word by shaders/rescore.comp
// and the CPU reference (runtime/src/ops/rescore.cpp); tests/unit/ops/rescore_score.cpp checks
// it against std::fma. cuda_backend/ops/rescore_thread.cuh mirrors the keys for CUDA.
//
// Why a check and a fallback around the hardware fma: the score is defined as IEEE fma steps with
// subnormals kept (ferry/ops/rescore.hpp), but a Vulkan device may flush subnormals to zero
// unless the shader declares DenormPreserve, which not every device supports (lavapipe does
// not), and a CPU thread may run with FTZ/DAZ set by another library. A flushing fma differs from
// IEEE's only when an input is subnormal or the result is tiny (below the smallest normal, zero
// included), so exactly then the step is recomputed with integer arithmetic
// (ferry_rescore_soft_fma). The same check also routes every infinity and NaN through the integer
// code, which returns one NaN (FERRY_RESCORE_NAN_BITS) whatever the inputs' payloads.
//
// The code is written in the subset of C++ and GLSL the two languages share (as normalize_lut.h):
// `uint`, `int`, `uint64_t`, `findMSB`, functional casts, no structs, no out parameters.
#ifndef FERRY_SHADERS_RESCORE_SCORE_H
#define FERRY_SHADERS_RESCORE_SCORE_H

#define FERRY_RESCORE_NAN_BITS 0x7FC00000u   // ferry::kRescoreNaNScoreBits
#define FERRY_RESCORE_WORST_KEY 0xFFFFFFFFu  // a NaN score's key: after every number

#ifdef __cplusplus
#include <bit>
#include <cmath>
#include <cstdint>
namespace ferry::shaders::rescore {
using uint = std::uint32_t;
using uint64_t = std::uint64_t;
// GLSL's findMSB: the index of the highest set bit, -1 for 0.
inline int findMSB(uint value) { return std::bit_width(value) - 1; }
#define FERRY_RESCORE_FUNCTION inline
// The hot steps are inlined into callers compiled for the FMA instruction set.
#define FERRY_RESCORE_HOT [[gnu::always_inline]] inline
#else
#define FERRY_RESCORE_FUNCTION
#define FERRY_RESCORE_HOT
#endif

FERRY_RESCORE_FUNCTION int ferry_rescore_msb64(uint64_t value) {
  const uint high = uint(value >> 32);
  return high != 0u ? 32 + findMSB(high) : findMSB(uint(value));
}

// Bits of fma(a, b, c) (float32 bits) rounded once to nearest even, subnormals kept; every NaN
// result is FERRY_RESCORE_NAN_BITS.
//
// The product's mantissa (at most 48 bits) and c's (24) are each placed with their leading bit at
// bit 62 of a uint64_t, so each has at least 14 zero bits below; the smaller term is shifted right
// by the exponent difference with the bits shifted out jammed into bit 0. That is exact for
// rounding: bits are lost only when the difference is 2 or more, and then the result's leading
// bit is at bit 61 or above, so it rounds at bit 38 or above (higher for subnormal results), and
// the computed sum, odd, lies strictly between the same two rounding boundaries as the true one.
FERRY_RESCORE_FUNCTION uint ferry_rescore_soft_fma(uint a, uint b, uint c) {
  const uint a_magnitude = a & 0x7FFFFFFFu;
  const uint b_magnitude = b & 0x7FFFFFFFu;
  const uint c_magnitude = c & 0x7FFFFFFFu;
  if (a_magnitude > 0x7F800000u || b_magnitude > 0x7F800000u || c_magnitude > 0x7F800000u) {
    return FERRY_RESCORE_NAN_BITS;
  }
  const uint product_negative = (a ^ b) >> 31;
  const uint c_negative = c >> 31;
  if (a_magnitude == 0x7F800000u || b_magnitude == 0x7F800000u) {
    if (a_magnitude == 0u || b_magnitude == 0u) return FERRY_RESCORE_NAN_BITS;  // inf * 0
    if (c_magnitude == 0x7F800000u && c_negative != product_negative) {
      return FERRY_RESCORE_NAN_BITS;  // inf - inf
    }
    return (product_negative << 31) | 0x7F800000u;
  }
  if (c_magnitude == 0x7F800000u) return c;

  const uint a_field = a_magnitude >> 23;
  const uint b_field = b_magnitude >> 23;
  const uint c_field = c_magnitude >> 23;
  const uint a_mantissa = (a & 0x7FFFFFu) | (a_field != 0u ? 0x800000u : 0u);
  const uint b_mantissa = (b & 0x7FFFFFu) | (b_field != 0u ? 0x800000u : 0u);
  const uint c_mantissa = (c & 0x7FFFFFu) | (c_field != 0u ? 0x800000u : 0u);
  const uint64_t product = uint64_t(a_mantissa) * uint64_t(b_mantissa);  // exact, < 2^48
  if (product == uint64_t(0u)) {
    // a * b = +-0: the result is c, except that the sum of two zeros is -0 only when both are.
    if (c_magnitude != 0u) return c;
    return (product_negative & c_negative) << 31;
  }
  // Exponent of each term's bit 0 (subnormals have field 0 and the exponent of field 1).
  const int product_low_exp =
      int(a_field != 0u ? a_field : 1u) + int(b_field != 0u ? b_field : 1u) - 300;
  const int c_low_exp = int(c_field != 0u ? c_field : 1u) - 150;

  const int product_msb = ferry_rescore_msb64(product);
  uint64_t larger = product << (62 - product_msb);
  int larger_exp = product_low_exp + product_msb;  // exponent of bit 62
  uint larger_negative = product_negative;
  uint64_t smaller = uint64_t(0u);
  int smaller_exp = larger_exp;
  uint smaller_negative = c_negative;
  if (c_mantissa != 0u) {
    const int c_msb = findMSB(c_mantissa);
    const uint64_t placed_c = uint64_t(c_mantissa) << (62 - c_msb);
    const int placed_c_exp = c_low_exp + c_msb;
    if (placed_c_exp > larger_exp || (placed_c_exp == larger_exp && placed_c > larger)) {
      smaller = larger;
      smaller_exp = larger_exp;
      smaller_negative = larger_negative;
      larger = placed_c;
      larger_exp = placed_c_exp;
      larger_negative = c_negative;
    } else {
      smaller = placed_c;
      smaller_exp = placed_c_exp;
    }
  }

  const int exp_gap = larger_exp - smaller_exp;  // >= 0
  if (exp_gap >= 63) {
    smaller = uint64_t(smaller != uint64_t(0u) ? 1u : 0u);
  } else if (exp_gap > 0) {
    const uint64_t lost = smaller & ((uint64_t(1u) << exp_gap) - uint64_t(1u));
    smaller = (smaller >> exp_gap) | uint64_t(lost != uint64_t(0u) ? 1u : 0u);
  }
  // larger >= smaller after the swap, so the difference is never negative; a sum carries at most
  // into bit 63.
  const uint64_t total =
      larger_negative == smaller_negative ? larger + smaller : larger - smaller;
  if (total == uint64_t(0u)) return 0u;  // exact cancellation: +0 when rounding to nearest

  const int lead_exp = larger_exp - 62 + ferry_rescore_msb64(total);  // exponent of the lead bit
  const uint sign_bit = larger_negative << 31;
  if (lead_exp > 127) return sign_bit | 0x7F800000u;
  // The result's bit 0 is 2^(lead_exp - 23) for normals, 2^-149 for subnormals.
  const int result_low_exp = lead_exp - 23 > -149 ? lead_exp - 23 : -149;
  const int shift = result_low_exp - (larger_exp - 62);  // bits of total below the result's bit 0
  uint mantissa = 0u;
  if (shift <= 0) {
    mantissa = uint(total << (-shift));  // exact
  } else if (shift >= 64) {
    // Far below the smallest subnormal (a product of tiny numbers): 0, or the smallest subnormal
    // when total is above half of it (2^63 in total's units, reachable only at shift 64).
    mantissa = shift == 64 && total > (uint64_t(1u) << 63) ? 1u : 0u;
  } else {
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

FERRY_RESCORE_HOT bool ferry_rescore_subnormal(uint x) {
  return (x & 0x7F800000u) == 0u && (x & 0x7FFFFFu) != 0u;
}

// Whether `r`, the hardware's fma(a, b, c) or a - b, may differ from IEEE's (see above): an input
// is subnormal, or r is zero, subnormal, infinite or NaN.
FERRY_RESCORE_HOT bool ferry_rescore_unsure(uint a, uint b, uint c, uint r) {
  const uint r_field = (r >> 23) & 0xFFu;
  return r_field == 0u || r_field == 0xFFu || ferry_rescore_subnormal(a) ||
         ferry_rescore_subnormal(b) || ferry_rescore_subnormal(c);
}

// One step of the score chain, exact whatever the float modes (see above): fma(a, b, c), and the
// l2 difference a - b (= fma(a, 1, -b)). `precise` keeps the GLSL compiler from contracting or
// splitting them (NoContraction on the SPIR-V Fma and FSub).
#ifdef __cplusplus
FERRY_RESCORE_HOT uint ferry_rescore_fma_step(uint a, uint b, uint c) {
  const uint r = std::bit_cast<uint>(
      std::fma(std::bit_cast<float>(a), std::bit_cast<float>(b), std::bit_cast<float>(c)));
  return ferry_rescore_unsure(a, b, c, r) ? ferry_rescore_soft_fma(a, b, c) : r;
}
FERRY_RESCORE_HOT uint ferry_rescore_sub_step(uint a, uint b) {
  if (a == b && (a & 0x7F800000u) != 0x7F800000u) return 0u;  // x - x = +0 for finite x
  const uint r = std::bit_cast<uint>(std::bit_cast<float>(a) - std::bit_cast<float>(b));
  return ferry_rescore_unsure(a, b, 0u, r) ? ferry_rescore_soft_fma(a, 0x3F800000u, b ^ 0x80000000u)
                                           : r;
}
#else
// The shader defines FERRY_RESCORE_HARDWARE_FMA: whether the device's fma() is known to be fused
// (Vulkan does not promise it, and lavapipe splits it); without it every step is the integer fma.
uint ferry_rescore_fma_step(uint a, uint b, uint c) {
  if (!FERRY_RESCORE_HARDWARE_FMA) return ferry_rescore_soft_fma(a, b, c);
  precise float r = fma(uintBitsToFloat(a), uintBitsToFloat(b), uintBitsToFloat(c));
  const uint bits = floatBitsToUint(r);
  return ferry_rescore_unsure(a, b, c, bits) ? ferry_rescore_soft_fma(a, b, c) : bits;
}
uint ferry_rescore_sub_step(uint a, uint b) {
  if (a == b && (a & 0x7F800000u) != 0x7F800000u) return 0u;  // x - x = +0 for finite x
  precise float r = uintBitsToFloat(a) - uintBitsToFloat(b);
  const uint bits = floatBitsToUint(r);
  return ferry_rescore_unsure(a, b, 0u, bits)
             ? ferry_rescore_soft_fma(a, 0x3F800000u, b ^ 0x80000000u)
             : bits;
}
#endif

// Ranking: a score becomes a 32-bit key that sorts ascending in rank order (better first).
// float32: a NaN gets FERRY_RESCORE_WORST_KEY, -0 the key of +0, and the other floats their
// order as unsigned integers (sign-magnitude to offset binary); int32: offset binary. Inner
// products rank larger first: their keys are complemented. Only a NaN score has the worst key
// (the largest inner product key is that of -inf; int32 sums never reach INT32_MIN or INT32_MAX).
FERRY_RESCORE_HOT uint ferry_rescore_key(uint score, bool is_float, bool larger_better) {
  uint ordered = score ^ 0x80000000u;
  if (is_float) {
    if ((score & 0x7FFFFFFFu) > 0x7F800000u) return FERRY_RESCORE_WORST_KEY;
    const uint positive_zero_for_negative = score == 0x80000000u ? 0u : score;
    ordered = (positive_zero_for_negative >> 31) != 0u ? ~positive_zero_for_negative
                                                       : positive_zero_for_negative | 0x80000000u;
  }
  return larger_better ? ~ordered : ordered;
}

// The score of a key: the score's own bits, except that a -0 comes back as +0 (its key is +0's)
// and a NaN as FERRY_RESCORE_NAN_BITS.
FERRY_RESCORE_FUNCTION uint ferry_rescore_key_score(uint key, bool is_float, bool larger_better) {
  if (is_float && key == FERRY_RESCORE_WORST_KEY) return FERRY_RESCORE_NAN_BITS;
  const uint ordered = larger_better ? ~key : key;
  if (!is_float) return ordered ^ 0x80000000u;
  return (ordered >> 31) != 0u ? ordered & 0x7FFFFFFFu : ~ordered;
}

#ifdef __cplusplus
}  // namespace ferry::shaders::rescore
#endif
#undef FERRY_RESCORE_FUNCTION
#undef FERRY_RESCORE_HOT

#endif  // FERRY_SHADERS_RESCORE_SCORE_H
