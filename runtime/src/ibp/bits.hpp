// Bit-level helpers of the IBP codec: little-endian loads and stores, pext/pdep over a mask's runs
// of set bits (portable; a column's variable bits are usually one or two runs), and the row bit
// stream's writer and reader (bits least significant first in little-endian 32-bit words).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ferry::ibp::detail {

static_assert(std::endian::native == std::endian::little,
              "the IBP codec reads the stream's little-endian fields in place");

template <typename T>
inline T load(const std::byte* p) noexcept {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}
template <typename T>
inline void store(std::byte* p, T value) noexcept {
  std::memcpy(p, &value, sizeof(T));
}

// The low `bits` bits set (bits 0..64).
constexpr std::uint64_t low_bits(unsigned bits) noexcept {
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

// pext(x, m): the bits of x where m is set, lowest first, packed into the low bits.
inline std::uint64_t extract_bits(std::uint64_t x, std::uint64_t m) noexcept {
  std::uint64_t out = 0;
  unsigned at = 0;
  while (m != 0) {
    const unsigned start = static_cast<unsigned>(std::countr_zero(m));
    const std::uint64_t shifted = m >> start;
    const unsigned width = static_cast<unsigned>(std::countr_one(shifted));
    out |= ((x >> start) & low_bits(width)) << at;
    at += width;
    m = width + start >= 64 ? 0 : m & ~(low_bits(width + start));
  }
  return out;
}

// pdep(x, m): the low bits of x, lowest first, placed at the set bits of m.
inline std::uint64_t deposit_bits(std::uint64_t x, std::uint64_t m) noexcept {
  std::uint64_t out = 0;
  unsigned at = 0;
  while (m != 0) {
    const unsigned start = static_cast<unsigned>(std::countr_zero(m));
    const std::uint64_t shifted = m >> start;
    const unsigned width = static_cast<unsigned>(std::countr_one(shifted));
    out |= ((x >> at) & low_bits(width)) << start;
    at += width;
    m = width + start >= 64 ? 0 : m & ~(low_bits(width + start));
  }
  return out;
}

// A column's variable bits (~mask) are nearly always one run: then pext and pdep are a shift and a
// mask. `field_shift` precomputes, per column, that run's shift, or kScattered for several runs.
inline constexpr std::uint8_t kScattered = 0xff;
inline std::uint8_t field_shift(std::uint64_t variable) noexcept {
  if (variable == 0) return 0;
  const auto shift = static_cast<unsigned>(std::countr_zero(variable));
  const std::uint64_t run = variable >> shift;
  return (run & (run + 1)) == 0 ? static_cast<std::uint8_t>(shift) : kScattered;
}
// pext(x, variable) for a column of `width` variable bits and field_shift `shift`.
inline std::uint64_t extract_field(std::uint64_t x, std::uint64_t variable, unsigned width,
                                   std::uint8_t shift) noexcept {
  return shift != kScattered ? (x >> shift) & low_bits(width) : extract_bits(x, variable);
}
// pdep(bits, variable): bits holds only the column's `width` low bits.
inline std::uint64_t deposit_field(std::uint64_t bits, std::uint64_t variable,
                                   std::uint8_t shift) noexcept {
  return shift != kScattered ? bits << shift : deposit_bits(bits, variable);
}

// Appends fields to a row [out, end); the caller sized the row exactly, finish() writes the last
// partial words (zero-padded). Nothing is written past `end` (rows are written by several
// threads side by side). The format's little-endian 32-bit words are the bytes of little-endian
// 64-bit ones. put() has no branch on the data: it stores the whole accumulator every time
// (where 8 bytes fit before `end`: a test that fails only at the row's last bytes, where no
// word is full) and moves on by a word when one filled.
class BitWriter {
 public:
  BitWriter(std::byte* out, std::byte* end) noexcept : out_(out), end_(end) {}
  // The low `bits` (0..64) bits of value; bits above them must be zero.
  void put(std::uint64_t value, unsigned bits) noexcept {
    acc_ |= value << count_;  // count_ < 64
    if (end_ - out_ >= 8) store(out_, acc_);
    const unsigned total = count_ + bits;
    const bool full = total >= 64;
    // The bits of value that did not fit when a word filled: value >> (64 - count_), 0 for
    // count_ = 0 (two shifts, each below 64).
    acc_ = full ? (value >> 1) >> (63 - count_) : acc_;
    out_ += full ? 8 : 0;
    count_ = total & 63u;
  }
  void finish() noexcept {
    for (unsigned at = 0; at < count_; at += 32) {
      store(out_, static_cast<std::uint32_t>(acc_ >> at));
      out_ += 4;
    }
    acc_ = 0;
    count_ = 0;
  }

 private:
  std::byte* out_;
  std::byte* end_;
  std::uint64_t acc_ = 0;
  unsigned count_ = 0;
};

// Reads fields from a row of `bytes` bytes; the caller checked that the fields fit (the row's
// exact length), and no read goes past the row's end whatever the fields are.
class BitReader {
 public:
  BitReader(const std::byte* row, std::uint64_t bytes) noexcept : row_(row), bytes_(bytes) {}
  // The next `bits` (0..64) bits.
  std::uint64_t get(unsigned bits) noexcept {
    const std::uint64_t byte = bit_ / 8;
    const unsigned offset = static_cast<unsigned>(bit_ % 8);
    bit_ += bits;
    std::uint64_t window;
    if (byte + 9 <= bytes_) {
      // 64 bits from `offset`: the 8 bytes at `byte`, the 9th byte's low bits on top.
      window = load<std::uint64_t>(row_ + byte) >> offset;
      window |= (std::uint64_t{load<std::uint8_t>(row_ + byte + 8)} << 1) << (63 - offset);
    } else {
      window = tail(byte, offset);
    }
    return window & low_bits(bits);
  }
  std::uint64_t position() const noexcept { return bit_; }

 private:
  // The row's bits from bit 8 x byte + offset on, the bytes past its end read as zeros.
  std::uint64_t tail(std::uint64_t byte, unsigned offset) const noexcept {
    std::uint64_t window = 0;
    for (unsigned i = 0; i < 8 && byte + i < bytes_; ++i) {
      window |= std::uint64_t{load<std::uint8_t>(row_ + byte + i)} << (8 * i);
    }
    window >>= offset;
    if (offset != 0 && byte + 8 < bytes_) {
      window |= std::uint64_t{load<std::uint8_t>(row_ + byte + 8)} << (64 - offset);
    }
    return window;
  }
  const std::byte* row_;
  std::uint64_t bytes_;
  std::uint64_t bit_ = 0;
};

}  // namespace ferry::ibp::detail
