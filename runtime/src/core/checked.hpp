// Checked size arithmetic: every size and offset computation in ferry goes through these, so a
// size near 2^64 is an error instead of a wrapped, small number (a 1-byte allocation that a
// later in-range copy overflows). Core, pipelines and backends all use this one header.
#pragma once

#include <cstdint>
#include <optional>

namespace ferry::detail {

// a + b, or nothing when it does not fit 64 bits.
constexpr std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

// a * b, or nothing when it does not fit 64 bits.
constexpr std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// a * b + c (a stride times a count, plus the last item's extent), or nothing when it does not fit.
constexpr std::optional<std::uint64_t> checked_mul_add(std::uint64_t a, std::uint64_t b,
                                                       std::uint64_t c) noexcept {
  const std::optional<std::uint64_t> product = checked_mul(a, b);
  return product ? checked_add(*product, c) : std::nullopt;
}

// `value` rounded up to a multiple of `alignment` (> 0), or nothing when that does not fit.
constexpr std::optional<std::uint64_t> checked_round_up(std::uint64_t value,
                                                        std::uint64_t alignment) noexcept {
  if (alignment == 0) return std::nullopt;
  const std::uint64_t remainder = value % alignment;
  if (remainder == 0) return value;
  return checked_add(value, alignment - remainder);
}

// `value` rounded down to a multiple of `alignment` (> 0).
constexpr std::uint64_t round_down(std::uint64_t value, std::uint64_t alignment) noexcept {
  return value / alignment * alignment;
}

// Whether [offset, offset + size) lies within [0, total), without computing offset + size.
constexpr bool range_within(std::uint64_t offset, std::uint64_t size, std::uint64_t total) noexcept {
  return offset <= total && size <= total - offset;
}

// Whether [a, a + a_size) and [b, b + b_size) share a byte; both ranges already lie within one
// buffer (range_within), so the sums cannot overflow.
constexpr bool ranges_overlap(std::uint64_t a, std::uint64_t a_size, std::uint64_t b,
                              std::uint64_t b_size) noexcept {
  return a < b + b_size && b < a + a_size;
}

// The number of pieces of at most `piece` (> 0) bytes that cover `bytes`: ceil(bytes / piece),
// which cannot overflow (the usual (bytes + piece - 1) / piece can).
constexpr std::uint64_t pieces_of(std::uint64_t bytes, std::uint64_t piece) noexcept {
  return piece == 0 ? 0 : bytes / piece + (bytes % piece != 0 ? 1 : 0);
}

}  // namespace ferry::detail
