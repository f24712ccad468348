// hamming_topk's cooperative-matrix scan without a GPU: the arithmetic the shader shares with
// this test (shaders/hamming_topk_signs.h: rows expanded to 0/1 bytes, queries to +-1 bytes,
// accumulators started at limit - popc(query)) against popcounts of random codes; which devices
// get the path (a property list like NVIDIA's, and each missing piece); the tiles and buffers it
// takes against its shared memory.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ferry/ops/hamming_topk.hpp"
#include "hamming_topk_signs.h"
#include "ops/hamming_topk.hpp"
#include "vulkan/ops/hamming_topk_plan.hpp"

namespace {

namespace signs = ferry::shaders::hamming;
using ferry::vulkan::CooperativeMatrixShape;
using ferry::vulkan::CooperativeMatrixSupport;
using ferry::vulkan::MatrixComponent;

// A code's bits as the shader's int8 bytes, `padded_words` words long (zero bytes past the code):
// each word as its 8 planes of 4 bytes.
template <typename Plane>
std::vector<std::int8_t> expand(const std::vector<std::uint32_t>& code, std::size_t padded_words,
                                Plane plane) {
  std::vector<std::int8_t> bytes(32 * padded_words, 0);
  for (std::size_t w = 0; w < code.size(); ++w) {
    for (std::uint32_t p = 0; p < 8; ++p) {
      const std::uint32_t four = plane(code[w], p);
      for (std::uint32_t b = 0; b < 4; ++b) {
        bytes[32 * w + 4 * p + b] =
            static_cast<std::int8_t>(static_cast<std::uint8_t>(four >> (8 * b)));
      }
    }
  }
  return bytes;
}

TEST_CASE("hamming_topk coopmat: 0/1 x +-1 products and the accumulator's start give the distance") {
  std::mt19937 random(13);
  // Every bit lands in exactly one byte, the same one on both sides.
  for (std::uint32_t bit = 0; bit < 32; ++bit) {
    int rows_set = 0, queries_set = 0;
    for (std::uint32_t p = 0; p < 8; ++p) {
      const std::uint32_t row = signs::ferry_hamming_row_plane(1u << bit, p);
      const std::uint32_t query = signs::ferry_hamming_query_plane(1u << bit, p);
      const std::uint32_t zero = signs::ferry_hamming_query_plane(0u, p);
      CHECK(zero == 0xFFFFFFFFu);
      for (std::uint32_t b = 0; b < 4; ++b) {
        const std::uint32_t row_byte = (row >> (8 * b)) & 0xFFu, query_byte = (query >> (8 * b)) & 0xFFu;
        CHECK((row_byte == 0u || row_byte == 1u));
        CHECK((query_byte == 0x01u || query_byte == 0xFFu));
        CHECK((row_byte == 1u) == (query_byte == 0x01u));
        CHECK((row_byte == 1u) == (8 * b + p == bit));
        rows_set += row_byte == 1u ? 1 : 0;
        queries_set += query_byte == 0x01u ? 1 : 0;
      }
    }
    CHECK(rows_set == 1);
    CHECK(queries_set == 1);
  }
  for (int trial = 0; trial < 2000; ++trial) {
    const std::uint32_t words = 1 + random() % (ferry::kHammingMaxCodeBits / 32);
    // Codes of mostly equal bits too, so that distances near 0 and near the code length occur.
    const std::uint32_t mode = random() % 4;
    std::vector<std::uint32_t> row(words), query(words);
    for (std::uint32_t w = 0; w < words; ++w) {
      row[w] = static_cast<std::uint32_t>(random());
      query[w] = mode == 0   ? static_cast<std::uint32_t>(random())
                 : mode == 1 ? row[w] ^ (1u << (random() % 32))
                 : mode == 2 ? ~row[w]
                             : 0u;
    }
    // Padded to whole chunks, as the shader's last chunk is.
    const std::size_t chunk_words = FERRY_HAMMING_COOPMAT_CHUNK_BITS / 32;
    const std::size_t padded = (words + chunk_words - 1) / chunk_words * chunk_words;
    const std::vector<std::int8_t> a = expand(row, padded, signs::ferry_hamming_row_plane);
    const std::vector<std::int8_t> b = expand(query, padded, signs::ferry_hamming_query_plane);
    std::int32_t dot = 0;
    for (std::size_t i = 0; i < a.size(); ++i) dot += std::int32_t{a[i]} * std::int32_t{b[i]};
    std::uint32_t distance = 0, query_bits = 0;
    for (std::uint32_t w = 0; w < words; ++w) {
      distance += static_cast<std::uint32_t>(std::popcount(row[w] ^ query[w]));
      query_bits += static_cast<std::uint32_t>(std::popcount(query[w]));
    }
    // Limits around the distance, 0 (queries past the slice) and 8191 (no threshold yet).
    for (const std::uint32_t limit : {0u, distance, distance + 1, distance + 2, 32 * words + 1,
                                      8191u, static_cast<std::uint32_t>(random() % (32 * words + 2))}) {
      INFO("words " << words << ", distance " << distance << ", limit " << limit);
      const std::int32_t acc = signs::ferry_hamming_coopmat_start(limit, query_bits) + dot;
      CHECK((acc > 0) == (distance < limit));
      if (acc > 0) CHECK(signs::ferry_hamming_coopmat_distance(limit, acc) == distance);
    }
  }
}

// What the H100's driver lists (s8 and u8 at 16 x 16 x 32 and 16 x 8 x 32, fp16) and offers.
CooperativeMatrixSupport nvidia_like() {
  CooperativeMatrixSupport support;
  support.extension = support.feature = support.shader_int8 = support.vulkan_memory_model = true;
  support.vulkan_memory_model_device_scope = true;
  support.subgroup_vote = true;
  support.subgroup_size = support.min_subgroup_size = support.max_subgroup_size = 32;
  support.compute_shared_bytes = 49152;
  for (const std::uint32_t n : {8u, 16u}) {
    support.shapes.push_back({MatrixComponent::uint8, MatrixComponent::uint8,
                              MatrixComponent::uint32, MatrixComponent::uint32, 16, n, 32, true});
    support.shapes.push_back({MatrixComponent::sint8, MatrixComponent::sint8,
                              MatrixComponent::sint32, MatrixComponent::sint32, 16, n, 32, true});
    support.shapes.push_back({MatrixComponent::other, MatrixComponent::other,
                              MatrixComponent::other, MatrixComponent::other, 16, n, 16, true});
  }
  return support;
}

TEST_CASE("hamming_topk coopmat: only a device with every piece gets the path") {
  using ferry::vulkan::hamming_coopmat_unsupported;
  CHECK(hamming_coopmat_unsupported(nvidia_like()) == "");
  CHECK(hamming_coopmat_unsupported(CooperativeMatrixSupport{}) != "");  // lavapipe: nothing

  auto without = [](auto change) {
    CooperativeMatrixSupport support = nvidia_like();
    change(support);
    return hamming_coopmat_unsupported(support);
  };
  CHECK(without([](auto& s) { s.extension = false; }) != "");
  CHECK(without([](auto& s) { s.feature = false; }) != "");  // FERRY_VULKAN_HIDE_FEATURES
  CHECK(without([](auto& s) { s.shader_int8 = false; }) != "");
  CHECK(without([](auto& s) { s.vulkan_memory_model = false; }) != "");
  CHECK(without([](auto& s) { s.vulkan_memory_model_device_scope = false; }) != "");
  CHECK(without([](auto& s) { s.subgroup_vote = false; }) != "");
  CHECK(without([](auto& s) { s.subgroup_size = s.min_subgroup_size = s.max_subgroup_size = 64; }) != "");
  CHECK(without([](auto& s) { s.min_subgroup_size = 16; }) != "");  // a size could vary
  CHECK(without([](auto& s) { s.max_subgroup_size = 64; }) != "");
  CHECK(without([](auto& s) { s.compute_shared_bytes = 32768; }) != "");
  CHECK(without([](auto& s) { s.shapes.clear(); }) != "");
  // The one entry the shader uses: int8 x int8 -> int32, 16 x 16 x 32, subgroup scope.
  CHECK(without([](auto& s) { std::erase_if(s.shapes, [](const CooperativeMatrixShape& shape) {
          return shape.a == MatrixComponent::sint8 && shape.n == 16;
        }); }) != "");
  CHECK(without([](auto& s) {
          for (CooperativeMatrixShape& shape : s.shapes) shape.subgroup_scope = false;
        }) != "");
  CHECK(without([](auto& s) {
          for (CooperativeMatrixShape& shape : s.shapes) {
            if (shape.a == MatrixComponent::sint8) shape.result = MatrixComponent::sint8;
          }
        }) != "");
  CooperativeMatrixSupport only = nvidia_like();
  only.shapes = {{MatrixComponent::sint8, MatrixComponent::sint8, MatrixComponent::sint32,
                  MatrixComponent::sint32, 16, 16, 32, true}};
  CHECK(hamming_coopmat_unsupported(only) == "");
}

TEST_CASE("hamming_topk coopmat: tiles and buffers fit the shader's shared memory") {
  using ferry::vulkan::hamming_coopmat_scan_shape;
  using ferry::vulkan::HammingScanShape;
  static_assert(ferry::vulkan::kHammingCoopmatSharedBytes <= 48 * 1024);  // NVIDIA's default
  constexpr std::uint32_t kRound = FERRY_HAMMING_ROUND_ROWS;
  const std::uint32_t key_words = FERRY_HAMMING_POOL_WORDS - FERRY_HAMMING_SCAN_KEYS;
  for (std::uint32_t k = 1; k <= ferry::kHammingMaxK; ++k) {
    const std::uint32_t least = ferry::ops::hamming_scan_min_cap(k, kRound);
    for (const std::uint32_t queries : {1u, 16u, 17u, 32u, 1000u}) {
      const HammingScanShape shape = hamming_coopmat_scan_shape(k, queries);
      INFO("k " << k << ", queries " << queries << ": tile " << shape.tile << ", cap " << shape.cap);
      // Taken exactly when the least buffers fit a tile of 16.
      CHECK((shape.tile != 0) == (FERRY_HAMMING_COOPMAT_MIN_TILE * least <= key_words));
      if (shape.tile == 0) continue;
      CHECK((shape.tile == FERRY_HAMMING_MAX_TILE || shape.tile == FERRY_HAMMING_COOPMAT_MIN_TILE));
      CHECK((shape.tile == FERRY_HAMMING_COOPMAT_MIN_TILE || shape.tile / 2 < queries));
      CHECK(shape.cap >= least);
      CHECK((shape.tile == FERRY_HAMMING_COOPMAT_MIN_TILE || shape.cap >= least + kRound));
      CHECK(shape.cap <= ferry::ops::hamming_scan_cap(k, kRound));
      CHECK(FERRY_HAMMING_SCAN_KEYS + shape.tile * shape.cap <= FERRY_HAMMING_POOL_WORDS);
    }
  }
  // The search (k = 10) takes 32 queries a tile; few queries a tile of 16; a k whose
  // buffers fit no tile of 16 goes to the portable path.
  CHECK(hamming_coopmat_scan_shape(10, 1000).tile == 32);
  CHECK(hamming_coopmat_scan_shape(10, 16).tile == 16);
  CHECK(hamming_coopmat_scan_shape(100, 1000).tile == 16);
  CHECK(hamming_coopmat_scan_shape(1024, 1000).tile == 0);
  CHECK(hamming_coopmat_scan_shape(41, 1000).tile == 32);
  CHECK(hamming_coopmat_scan_shape(42, 1000).tile == 16);
  CHECK(hamming_coopmat_scan_shape(256, 1000).tile == 16);
  CHECK(hamming_coopmat_scan_shape(257, 1000).tile == 0);
}

TEST_CASE("hamming_topk coopmat: the pools' fill takes batches of 32 queries or more in tiles they fill") {
  using ferry::vulkan::hamming_coopmat_fill_tile;
  for (std::uint32_t words = 1; words <= ferry::kHammingMaxCodeBits / 32; ++words) {
    for (const std::uint32_t queries :
         {1u, 16u, 31u, 32u, 33u, 64u, 65u, 128u, 129u, 256u, 1000u, 65535u}) {
      const std::uint32_t tile = hamming_coopmat_fill_tile(words, queries);
      INFO("words " << words << ", queries " << queries << ": tile " << tile);
      // Every code length; fewer queries take the portable fill.
      CHECK((tile != 0) == (queries >= 32));
      if (tile == 0) continue;
      CHECK((tile == 64 || tile == 128 || tile == 256));
      // The smallest tile that holds every query, or 256 for more.
      CHECK((tile >= queries || tile == FERRY_HAMMING_FILL_MAX_TILE));
      CHECK((tile == FERRY_HAMMING_FILL_MIN_TILE || tile / 2 < queries));
    }
  }
  CHECK(hamming_coopmat_fill_tile(8, 1000) == 256);   // 256-bit codes, the batch
  CHECK(hamming_coopmat_fill_tile(8, 100) == 128);
  CHECK(hamming_coopmat_fill_tile(2, 32) == 64);
  CHECK(hamming_coopmat_fill_tile(8, 16) == 0);  // 16 queries: the portable fill
  CHECK(hamming_coopmat_fill_tile(24, 1000) == 256);  // 768 bits: in chunks of 8 words
  CHECK(hamming_coopmat_fill_tile(128, 40) == 64);
  CHECK(hamming_coopmat_fill_tile(129, 1000) == 0);   // past the longest code
  static_assert(ferry::vulkan::kHammingCoopmatFillSharedBytes <= 48 * 1024);
}

}  // namespace
