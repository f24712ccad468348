// CRC-32C (Castagnoli): the checksum of ferry's files (BinaryIndex's format). Chosen over a
// non-cryptographic hash because its error detection is specified (every burst of up to 32 bits,
// every odd number of flipped bits), it is what storage formats use for the same job (iSCSI,
// ext4 and Btrfs metadata), and x86-64 computes it in hardware (SSE4.2), taken at run time;
// elsewhere a table-driven loop (slicing by 8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ferry::detail {

// The CRC-32C of `bytes` continued from `crc` (the value a previous call returned, or 0 to
// start): crc32c(b, crc32c(a)) == crc32c(a followed by b).
std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept;
// The same by the table-driven loop alone (what crc32c does without SSE4.2), for tests.
std::uint32_t crc32c_portable(std::span<const std::byte> bytes, std::uint32_t crc = 0) noexcept;

}  // namespace ferry::detail
