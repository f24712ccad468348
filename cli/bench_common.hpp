// Helpers the bench commands share: random test data, the host memory left for buffers, and
// buffer allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry::cli {

// splitmix64 bytes: fast enough to fill a GiB quickly, and every seed gives different bytes.
void fill_random(std::span<std::byte> bytes, std::uint64_t seed);

// Memory the OS could give us now (MemAvailable), or 0 when unknown.
std::uint64_t available_host_memory();

// `count` buffers of `bytes` each.
Result<std::vector<Buffer>> create_buffers(const Device& device, std::size_t count,
                                           std::uint64_t bytes, MemoryKind kind);

}  // namespace ferry::cli
