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

// Appends fields to a row at `out`; the caller sized the row exactly, finish() writes the last
// partial word (zero-padded).
class BitWriter {
 public:
  explicit BitWriter(std::byte* out) noexcept : out_(out) {}
  // The low `bits` (0..64) bits of value; bits above them must be zero.
  void put(std::uint64_t value, unsigned bits) noexcept {
    if (bits > 32) {
      put32(static_cast<std::uint32_t>(value), 32);
      put32(static_cast<std::uint32_t>(value >> 32), bits - 32);
    } else {
      put32(static_cast<std::uint32_t>(value), bits);
    }
  }
  void finish() noexcept {
    if (count_ > 0) flush_word();
  }

 private:
  void put32(std::uint32_t value, unsigned bits) noexcept {
    acc_ |= std::uint64_t{value} << count_;
    count_ += bits;
    if (count_ >= 32) flush_word();
  }
  void flush_word() noexcept {
    store(out_, static_cast<std::uint32_t>(acc_));
    out_ += 4;
    acc_ >>= 32;
    count_ = count_ >= 32 ? count_ - 32 : 0;
  }
  std::byte* out_;
  std::uint64_t acc_ = 0;
  unsigned count_ = 0;
};

// Reads fields from a row of `words` 32-bit words; the caller checked that the fields fit.
class BitReader {
 public:
  BitReader(const std::byte* row, std::uint64_t words) noexcept : row_(row), words_(words) {}
  std::uint64_t get(unsigned bits) noexcept {
    if (bits > 32) {
      const std::uint64_t low = get32(32);
      return low | get32(bits - 32) << 32;
    }
    return get32(bits);
  }
  std::uint64_t position() const noexcept { return bit_; }

 private:
  std::uint64_t get32(unsigned bits) noexcept {
    if (bits == 0) return 0;
    const std::uint64_t word = bit_ / 32;
    const unsigned offset = static_cast<unsigned>(bit_ % 32);
    bit_ += bits;
    if (word >= words_) return 0;  // past the row: only on a bug, never read
    std::uint64_t window = load<std::uint32_t>(row_ + word * 4);
    if (offset + bits > 32 && word + 1 < words_) {
      window |= std::uint64_t{load<std::uint32_t>(row_ + word * 4 + 4)} << 32;
    }
    return (window >> offset) & low_bits(bits);
  }
  const std::byte* row_;
  std::uint64_t words_;
  std::uint64_t bit_ = 0;
};

}  // namespace ferry::ibp::detail
