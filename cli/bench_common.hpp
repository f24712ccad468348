// Helpers the bench commands share: random test data and the host memory left for buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ferry::cli {

// splitmix64 bytes: fast enough to fill a GiB quickly, and every seed gives different bytes.
void fill_random(std::span<std::byte> bytes, std::uint64_t seed);

// Memory the OS could give us now (MemAvailable), or 0 when unknown.
std::uint64_t available_host_memory();

}  // namespace ferry::cli
