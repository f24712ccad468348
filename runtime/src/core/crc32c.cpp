#include "core/crc32c.hpp"

#include <array>
#include <cstring>

namespace ferry::detail {
namespace {

constexpr std::uint32_t kPolynomial = 0x82f63b78u;  // reflected Castagnoli polynomial

// tables[t][b]: the CRC of byte b followed by t zero bytes (slicing by 8).
constexpr std::array<std::array<std::uint32_t, 256>, 8> make_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> tables{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? kPolynomial : 0u);
    tables[0][b] = crc;
  }
  for (std::size_t t = 1; t < 8; ++t) {
    for (std::uint32_t b = 0; b < 256; ++b) {
      tables[t][b] = (tables[t - 1][b] >> 8) ^ tables[0][tables[t - 1][b] & 0xffu];
    }
  }
  return tables;
}
constexpr auto kTables = make_tables();

std::uint32_t load_le32(const unsigned char* p) {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
         std::uint32_t{p[3]} << 24;
}

// On the inverted register (the CRC's pre- and post-conditioning are done by the caller).
std::uint32_t crc_table(const unsigned char* p, std::size_t n, std::uint32_t crc) {
  while (n >= 8) {
    const std::uint32_t low = load_le32(p) ^ crc;
    const std::uint32_t high = load_le32(p + 4);
    crc = kTables[7][low & 0xffu] ^ kTables[6][(low >> 8) & 0xffu] ^
          kTables[5][(low >> 16) & 0xffu] ^ kTables[4][low >> 24] ^ kTables[3][high & 0xffu] ^
          kTables[2][(high >> 8) & 0xffu] ^ kTables[1][(high >> 16) & 0xffu] ^
          kTables[0][high >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xffu];
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) std::uint32_t crc_sse42(const unsigned char* p, std::size_t n,
                                                          std::uint32_t crc) {
  std::uint64_t wide = crc;
  while (n >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);  // x86 is little-endian, as the CRC's byte order wants
    wide = __builtin_ia32_crc32di(wide, word);
    p += 8;
    n -= 8;
  }
  auto narrow = static_cast<std::uint32_t>(wide);
  while (n-- > 0) narrow = __builtin_ia32_crc32qi(narrow, *p++);
  return narrow;
}

bool have_sse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::uint32_t inverted = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (have_sse42()) return ~crc_sse42(p, bytes.size(), inverted);
#endif
  return ~crc_table(p, bytes.size(), inverted);
}

std::uint32_t crc32c_portable(std::span<const std::byte> bytes, std::uint32_t crc) noexcept {
  return ~crc_table(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), ~crc);
}

}  // namespace ferry::detail
