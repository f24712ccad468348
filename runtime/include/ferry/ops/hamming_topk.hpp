// hamming_topk: for each query code, the k nearest database codes by Hamming distance.
//
// Codes are binary vectors of `code_bits` bits (a multiple of 64, 64 to 4096), stored as rows of
// code_bits / 8 bytes: bit j of a code is bit (j % 8), least significant first, of byte j / 8
// (the same as bit j % 32 of little-endian 32-bit word j / 32; FAISS packs binary codes this way,
// and binary_quantize writes them so). The distance of two codes is the number of bits in which
// they differ: popcount(a XOR b), 0 to code_bits.
//
// Exact semantics, identical on every backend: for query i, the outputs at [i * k, i * k + k)
// hold the min(k, database_rows) nearest database rows in ascending distance, rows at the same
// distance in ascending row index (so the list is unique: the k smallest (distance, index)
// pairs). Entries past database_rows (k > database_rows) hold kHammingNoDistance and
// kHammingNoIndex. distances and indices are 32-bit unsigned integers.
#pragma once

#include <cstdint>

#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry {

inline constexpr std::uint32_t kHammingMinCodeBits = 64;
inline constexpr std::uint32_t kHammingMaxCodeBits = 4096;  // a multiple of 64 in between
inline constexpr std::uint32_t kHammingMaxK = 1024;
// A database row index is below this (it is the padding index, so that 32 bits hold any index).
inline constexpr std::uint64_t kHammingMaxDatabaseRows = 0xFFFFFFFFull;
// What entries past the database's rows hold (k > database_rows).
inline constexpr std::uint32_t kHammingNoDistance = 0xFFFFFFFFu;
inline constexpr std::uint32_t kHammingNoIndex = 0xFFFFFFFFu;

struct HammingTopkParams {
  std::uint32_t code_bits = 0;       // per code: a multiple of 64, 64 to 4096
  std::uint32_t queries = 0;         // rows of the query codes, >= 1
  std::uint64_t database_rows = 0;   // rows of the database codes, 1 to 2^32 - 2
  std::uint32_t k = 0;               // 1 to kHammingMaxK
};

// Where the op reads and writes: queries [queries x code_bits / 8 bytes] and database
// [database_rows x code_bits / 8 bytes] of codes, read; distances and indices [queries x k] of
// uint32, written. Every offset is a multiple of 4 bytes.
struct HammingTopkBuffers {
  BufferRef queries;
  std::uint64_t queries_offset = 0;
  BufferRef database;
  std::uint64_t database_offset = 0;
  BufferRef distances;
  std::uint64_t distances_offset = 0;
  BufferRef indices;
  std::uint64_t indices_offset = 0;
};

// Records the search, on the compute queue. It takes device scratch memory for the candidates of
// one slice of queries at a time (up to 8 MiB, more only for one query that needs it, at most
// DeviceOptions::scratch_slab_bytes; about 8.5 * k * database_rows / 2048 bytes per query, so
// with the default 64 MiB slab a query with k = 1024 over more than about 15 million rows needs
// the database searched in parts); a GPU backend's pooled search takes up to 32 MiB for its
// pools instead (at most 80 KiB per query, within the slab), where the device's scratch has it
// when the search is recorded. A command holds its scratch until it completes: a list of many
// large searches can ask for more than the device's slabs (resource_exhausted: submit part of
// it first).
// Errors (nothing recorded): a code_bits, k, queries or database_rows outside the ranges above
// (invalid_argument), an offset that is not a multiple of 4 (invalid_argument), a range outside
// its buffer (out_of_range), outputs that overlap each other (invalid_argument), released
// memory, memory of another device, a search whose candidates of one query do not fit in a
// scratch slab (resource_exhausted), and what a backend cannot bind (Vulkan: a database larger
// than maxStorageBufferRange; unavailable).
Status hamming_topk(CommandList& commands, const HammingTopkBuffers& buffers,
                    const HammingTopkParams& params);

}  // namespace ferry
