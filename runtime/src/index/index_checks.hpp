// The argument checks BinaryIndex's public calls make (binary_index.cpp), shared with
// ShardedIndex, so that both name the same problems the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ferry/binary_index.hpp"
#include "ferry/status.hpp"

namespace ferry::index {

// The options, or invalid_argument naming the field and its value.
Status validate_options(const char* call, const BinaryIndexOptions& options);
// That `bytes` is exactly `rows` rows of the index's input.
Status check_rows(const char* call, const char* what, const BinaryIndexOptions& options,
                  std::size_t bytes, std::uint64_t rows);
// `rows` packed codes: their size, and zeros in the padding bits past dims.
Status check_codes(const char* call, const char* what, const BinaryIndexOptions& options,
                   std::span<const std::byte> codes, std::uint64_t rows);
// A search's parameters on index `state`; `candidates` gets the Hamming list length.
Status check_search(const char* call, const BinaryIndex::State& state,
                    std::uint32_t queries_count, const SearchParams& params,
                    std::uint32_t& candidates);
// std::bad_alloc from a host vector, as the error every call returns for it.
Status out_of_host_memory(const char* call);

}  // namespace ferry::index
