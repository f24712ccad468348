// FAISS IndexBinaryFlat (exhaustive Hamming search on the CPU) as `ferry bench search`'s CPU
// baseline, linked when CMake found FAISS (Debian's libfaiss-dev); elsewhere `available` is false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace ferry::cli {

struct FaissSearchBaseline {
  bool available = false;
  std::string reason = {};   // why not, when unavailable
  std::string version = {};  // "FAISS 1.7.3 (linked)"
  Timing timing = {};   // per search of every query
  // The k distances of each query in `sample` (row-major), for the bench to check.
  std::vector<std::int32_t> sample_distances = {};
};

// Adds `database` (rows of bits / 8 bytes) to an IndexBinaryFlat, then times searches of every
// query for their k nearest on `threads` OpenMP threads. The first search is the warm-up and
// gives the sampled queries' distances.
FaissSearchBaseline measure_faiss_search(std::span<const std::byte> database,
                                         std::span<const std::byte> queries, std::uint32_t bits,
                                         std::uint32_t k, unsigned threads,
                                         std::span<const std::uint32_t> sample,
                                         const RepeatSettings& settings);

}  // namespace ferry::cli
