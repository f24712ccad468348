// Test helpers for IBP streams (docs/IBP_FORMAT.md): tensors of the test families, and
// re-stamping a stream's CRCs after a test edited its bytes, so that the structural checks (not
// the checksums) must catch the edit. Header-only; used by the unit tests and the fuzz loop.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "core/crc32c.hpp"
#include "ferry/ibp.hpp"

namespace ferry::test {

enum class IbpFamily { constant, random, alternating, small_ints, half_zero_floats, count };

inline const char* to_string(IbpFamily family) {
  switch (family) {
    case IbpFamily::constant: return "constant";
    case IbpFamily::random: return "random";
    case IbpFamily::alternating: return "alternating";
    case IbpFamily::small_ints: return "small ints with outliers";
    case IbpFamily::half_zero_floats: return "half-zero floats";
    case IbpFamily::count: break;
  }
  return "?";
}

// `elements` elements of `element_size` bytes of a family, little-endian.
inline std::vector<std::byte> ibp_tensor(IbpFamily family, std::uint8_t element_size,
                                         std::uint64_t elements, std::uint64_t row_elements,
                                         std::mt19937_64& rng) {
  std::vector<std::byte> out(elements * element_size);
  const std::uint64_t constant = rng();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::uint64_t i = 0; i < elements; ++i) {
    std::uint64_t x = 0;
    switch (family) {
      case IbpFamily::constant: x = constant; break;
      case IbpFamily::random: x = rng(); break;
      case IbpFamily::alternating:
        x = ((i / row_elements + i % row_elements) % 2 == 0) ? 0x5555555555555555u
                                                             : 0xaaaaaaaaaaaaaaaau;
        break;
      case IbpFamily::small_ints: x = rng() % 100 < 5 ? rng() : rng() % 16; break;
      case IbpFamily::half_zero_floats: {
        if (rng() % 2 == 0) break;
        const float f = std::fabs(normal(rng));
        if (element_size == 8) {
          const double d = f;
          std::memcpy(&x, &d, 8);
        } else {
          std::uint32_t bits = 0;
          std::memcpy(&bits, &f, 4);
          // 2 bytes: bf16 (the high half); 1 byte: the top byte.
          x = element_size == 4 ? bits : element_size == 2 ? bits >> 16 : bits >> 24;
        }
        break;
      }
      case IbpFamily::count: break;
    }
    std::memcpy(out.data() + i * element_size, &x, element_size);
  }
  return out;
}

// Recomputes the checksum table and both header CRCs of `stream` from its header fields, where
// they describe a stream that fits; otherwise only the header CRC.
inline void restamp_ibp(std::vector<std::byte>& stream) {
  if (stream.size() < 64) return;
  const auto get64 = [&](std::size_t at) {
    std::uint64_t v = 0;
    std::memcpy(&v, stream.data() + at, 8);
    return v;
  };
  std::uint8_t es = 0;
  std::memcpy(&es, stream.data() + 10, 1);
  std::uint32_t group_rows = 0;
  std::memcpy(&group_rows, stream.data() + 16, 4);
  const std::uint64_t rows = get64(24), row_elements = get64(32), data_bytes = get64(48);
  bool fits = (es == 1 || es == 2 || es == 4 || es == 8) && group_rows > 0 && rows > 0 &&
              row_elements > 0 && rows < (1u << 30) && row_elements < (1u << 30) &&
              data_bytes < (1ull << 40);
  if (fits) {
    const std::uint64_t groups = (rows + group_rows - 1) / group_rows;
    const std::uint64_t block = (2 * row_elements * es + 7) / 8 * 8;
    const std::uint64_t end =
        64 + 8 * (groups + 1) + groups * block + (4 * rows + 7) / 8 * 8 + data_bytes;
    const std::uint64_t chunks = (end - 64 + 65535) / 65536;
    if (end + 4 * chunks <= stream.size()) {
      for (std::uint64_t c = 0; c < chunks; ++c) {
        const std::uint64_t begin = 64 + c * 65536;
        const std::uint32_t crc = detail::crc32c(
            std::span<const std::byte>(stream.data() + begin, std::min<std::uint64_t>(65536, end - begin)));
        std::memcpy(stream.data() + end + 4 * c, &crc, 4);
      }
      const std::uint32_t table_crc =
          detail::crc32c(std::span<const std::byte>(stream.data() + end, 4 * chunks));
      std::memcpy(stream.data() + 56, &table_crc, 4);
    }
  }
  const std::uint32_t crc = detail::crc32c(std::span<const std::byte>(stream.data(), 60));
  std::memcpy(stream.data() + 60, &crc, 4);
}

}  // namespace ferry::test
