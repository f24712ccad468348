// The CPU backend's hamming_topk on every instruction-set path this machine supports (each one
// forced), against a brute-force truth computed here: every code length class the paths
// specialize (1, 2, 4 words and generic lengths, masked tails), rows that are no multiple of the
// vector widths or blocks, ties, k above the rows, and thread counts that split the queries or
// the rows. A path the CPU lacks is reported and skipped (it is still compiled).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ops/hamming_topk.hpp"

namespace {

using ferry::ops::HammingCpuPath;

struct Case {
  std::uint32_t bits, queries, rows, k;
  std::uint32_t distinct = 0;  // 0: random codes, else rows drawn from this many codes
};

std::vector<std::byte> random_codes(std::mt19937_64& rng, std::size_t bytes) {
  std::vector<std::byte> codes(bytes);
  for (std::byte& b : codes) b = static_cast<std::byte>(rng());
  return codes;
}

// Every distance, sorted by (distance, index), the first k, padded: [queries x k] each.
std::pair<std::vector<std::uint32_t>, std::vector<std::uint32_t>> brute_force(
    const std::vector<std::byte>& queries, const std::vector<std::byte>& database,
    const Case& c) {
  const std::size_t code = c.bits / 8;
  std::vector<std::uint32_t> distances, indices;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> all(c.rows);
  for (std::size_t q = 0; q < c.queries; ++q) {
    for (std::uint32_t r = 0; r < c.rows; ++r) {
      std::uint32_t d = 0;
      for (std::size_t b = 0; b < code; ++b) {
        d += static_cast<std::uint32_t>(std::popcount(
            std::to_integer<unsigned>(queries[q * code + b] ^ database[r * code + b])));
      }
      all[r] = {d, r};
    }
    std::sort(all.begin(), all.end());
    for (std::uint32_t j = 0; j < c.k; ++j) {
      distances.push_back(j < c.rows ? all[j].first : ferry::kHammingNoDistance);
      indices.push_back(j < c.rows ? all[j].second : ferry::kHammingNoIndex);
    }
  }
  return {distances, indices};
}

void check(std::mt19937_64& rng, const Case& c, HammingCpuPath path, unsigned threads) {
  INFO("path " << std::string(ferry::ops::to_string(path)) << ", threads " << threads << ", bits " << c.bits
               << ", queries " << c.queries << ", rows " << c.rows << ", k " << c.k
               << ", distinct " << c.distinct);
  const std::size_t code = c.bits / 8;
  std::vector<std::byte> database = random_codes(rng, c.rows * code);
  if (c.distinct != 0) {
    const std::vector<std::byte> pool = random_codes(rng, c.distinct * code);
    for (std::size_t r = 0; r < c.rows; ++r)
      std::memcpy(database.data() + r * code, pool.data() + rng() % c.distinct * code, code);
  }
  std::vector<std::byte> queries = random_codes(rng, c.queries * code);
  if (c.queries > 1)  // one query equal to a row: distance 0 present
    std::memcpy(queries.data(), database.data() + rng() % c.rows * code, code);
  const auto [distances, indices] = brute_force(queries, database, c);

  // Outputs start poisoned, so that an entry left unwritten fails.
  std::vector<std::byte> out_distances(std::size_t{c.queries} * c.k * 4, std::byte{0xA5});
  std::vector<std::byte> out_indices(out_distances.size(), std::byte{0x5A});
  const std::span<std::byte> bindings[] = {queries, database, out_distances, out_indices};
  const ferry::ops::HammingTopkArgs args{c.bits / 32, c.queries, c.rows, c.k, 0};
  ferry::ops::run_hamming_topk_cpu(args, bindings, path, threads);
  for (std::size_t i = 0; i < distances.size(); ++i) {
    std::uint32_t d = 0, index = 0;
    std::memcpy(&d, out_distances.data() + i * 4, 4);
    std::memcpy(&index, out_indices.data() + i * 4, 4);
    if (d == distances[i] && index == indices[i]) continue;
    FAIL_CHECK("query " << i / c.k << " rank " << i % c.k << ": got (" << d << ", " << index
                        << "), expected (" << distances[i] << ", " << indices[i] << ")");
    return;
  }
}

}  // namespace

TEST_CASE("hamming_topk CPU: every supported path, forced, matches brute force") {
  std::mt19937_64 rng(20261124);
  const Case cases[] = {
      {64, 9, 1, 1},                    // one row
      {64, 17, 1031, 7},                // 1 word: rows no multiple of 8
      {128, 7, 2053, 33, 5},            // 2 words, ties everywhere
      {192, 5, 1500, 10},               // 3 words: masked tails on every path
      {256, 11, 3077, 16},              // 4 words: rows across blocks of 1024
      {256, 3, 9, 20},                  // k above the rows: padded
      {256, 2, 4100, 1024, 40},         // k = the maximum, 40 distinct codes
      {320, 8, 777, 5},                 // 5 words
      {512, 4, 1025, 3},                // 8 words: one full chunk
      {576, 4, 1000, 12},               // 9 words: a full chunk and a 1-word tail
      {1024, 6, 600, 50, 7},            // 16 words, ties
      {2048 + 64, 2, 300, 9},           // 33 words: AVX2 sums bytes over 31 chunks, then more
      {4096, 3, 129, 17},               // the longest code
  };
  int paths = 0;
  for (HammingCpuPath path : ferry::ops::kHammingCpuPaths) {
    if (!ferry::ops::hamming_cpu_path_supported(path)) {
      MESSAGE("this CPU has no " << std::string(ferry::ops::to_string(path)) << " path: not tested here");
      continue;
    }
    ++paths;
    for (const Case& c : cases) {
      for (unsigned threads : {1u, 3u}) check(rng, c, path, threads);
    }
  }
  CHECK(paths >= 1);
}

TEST_CASE("hamming_topk CPU: rows split over threads, the parts merged, on every path") {
  std::mt19937_64 rng(7);
  // Fewer query blocks than threads: the rows are searched in ranges and merged; ties across the
  // ranges must still go to the lower index.
  const Case cases[] = {
      {256, 1, 40000, 10},
      {256, 3, 30001, 100, 30},
      {64, 2, 20000, 1024, 3},
  };
  for (HammingCpuPath path : ferry::ops::kHammingCpuPaths) {
    if (!ferry::ops::hamming_cpu_path_supported(path)) continue;
    for (const Case& c : cases) {
      for (unsigned threads : {2u, 16u}) check(rng, c, path, threads);
    }
  }
}

TEST_CASE("hamming_topk CPU: the default path is the fastest supported one") {
  const HammingCpuPath path = ferry::ops::hamming_cpu_default_path();
  CHECK(ferry::ops::hamming_cpu_path_supported(path));
  if (std::getenv("FERRY_CPU_ISA") == nullptr) {  // no cap asked for
    for (HammingCpuPath faster : ferry::ops::kHammingCpuPaths) {
      if (faster > path) CHECK_FALSE(ferry::ops::hamming_cpu_path_supported(faster));
    }
  }
  MESSAGE("default CPU path: " << std::string(ferry::ops::to_string(path)));
}
