// Test inputs and byte-exact comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string_view>
#include <vector>

namespace ferry_test {

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t size);
void fill_random(std::mt19937_64& rng, std::span<std::byte> bytes);

// Bytes a transfer never writes: a recognisable pattern, different for each `salt`, so data
// landing at a wrong offset or not landing at all shows up.
std::vector<std::byte> poison_bytes(std::size_t size, std::uint8_t salt = 0);
void fill_poison(std::span<std::byte> bytes, std::uint8_t salt = 0);

// A size in [min, max], uniform in log scale so small and large sizes are both common.
std::uint64_t log_uniform_size(std::mt19937_64& rng, std::uint64_t min, std::uint64_t max);
std::uint64_t uniform(std::mt19937_64& rng, std::uint64_t min, std::uint64_t max);

// The result of filling [offset, offset + size) of `bytes` with `pattern` (CommandList::fill's
// contract: byte offset + i gets byte i % 4 of the little-endian pattern).
void apply_fill(std::span<std::byte> bytes, std::uint64_t offset, std::uint64_t size,
                std::uint32_t pattern);

// CHECKs that the spans are equal; on mismatch reports the first differing index, the values
// there and how many bytes differ, in one message (never one failure per byte).
bool check_bytes_equal(std::span<const std::byte> actual, std::span<const std::byte> expected,
                       std::string_view what);

}  // namespace ferry_test
