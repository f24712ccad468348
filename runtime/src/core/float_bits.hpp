// Exact conversions of 16-bit float formats to float32 bits, in integer code: no dependence on
// the host's float environment (a denormals-are-zero mode another library may have set) or on
// compiler support for _Float16. The CPU reference of binary_quantize and BinaryIndex's host-side
// preparation of vectors share them.
#pragma once

#include <bit>
#include <cstdint>

namespace ferry::detail {

// The float32 bits of a float16, converted exactly (subnormal halves are normal floats).
constexpr std::uint32_t float16_to_float32_bits(std::uint16_t half) noexcept {
  const std::uint32_t sign = std::uint32_t{half & 0x8000u} << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return sign | 0x7f800000u | (mantissa << 13);  // infinity, NaN
  if (exponent != 0) return sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  if (mantissa == 0) return sign;
  // mantissa * 2^-24 with its leading 1 at bit p: 2^(p - 24) times 1.fraction.
  const std::uint32_t p = static_cast<std::uint32_t>(std::bit_width(mantissa)) - 1;  // 0..9
  return sign | ((p + 127 - 24) << 23) | ((mantissa << (23 - p)) & 0x7fffffu);
}

// The float32 bits of a bfloat16: its top half.
constexpr std::uint32_t bfloat16_to_float32_bits(std::uint16_t value) noexcept {
  return std::uint32_t{value} << 16;
}

}  // namespace ferry::detail
