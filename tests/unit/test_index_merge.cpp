// BinaryIndex's host-side merges (runtime/src/index/merge.hpp) against a full sort of every entry,
// on lists with ties, padding and signed zeros; and its file header (index_file.hpp): encoded then
// decoded unchanged, every damage refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ferry/ops/hamming_topk.hpp"
#include "index/index_file.hpp"
#include "index/merge.hpp"

namespace {

using ferry::index::HammingHit;
using ferry::index::HammingList;
using ferry::index::ScoredHit;
using ferry::index::ScoredList;

// Chunks of sorted (distance, local index) lists, padded to k, as hamming_topk writes them.
struct Chunk {
  std::vector<std::uint32_t> distances, indices;
  std::uint64_t base = 0;
};

}  // namespace

TEST_CASE("merge_hamming: the k smallest (distance, global id) of every chunk's list") {
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 50; ++round) {
    const std::uint32_t k = 1 + static_cast<std::uint32_t>(rng() % 20);
    std::vector<Chunk> chunks(1 + rng() % 5);
    std::vector<std::pair<std::uint32_t, std::uint64_t>> all;
    std::uint64_t base = 0;
    for (Chunk& chunk : chunks) {
      const std::uint32_t rows = 1 + static_cast<std::uint32_t>(rng() % 30);
      chunk.base = base;
      std::vector<std::pair<std::uint32_t, std::uint32_t>> list;
      for (std::uint32_t r = 0; r < rows; ++r) {
        list.emplace_back(static_cast<std::uint32_t>(rng() % 4), r);  // ties everywhere
        all.emplace_back(list.back().first, base + r);
      }
      std::sort(list.begin(), list.end());
      for (std::uint32_t i = 0; i < k; ++i) {
        chunk.distances.push_back(i < rows ? list[i].first : ferry::kHammingNoDistance);
        chunk.indices.push_back(i < rows ? list[i].second : ferry::kHammingNoIndex);
      }
      base += rows;
    }
    std::sort(all.begin(), all.end());
    all.resize(std::min<std::size_t>(all.size(), k));
    std::vector<HammingList> lists;
    for (const Chunk& chunk : chunks) lists.push_back({chunk.distances, chunk.indices, chunk.base});
    const std::vector<HammingHit> merged = ferry::index::merge_hamming(lists, k);
    REQUIRE(merged.size() == all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      CHECK(merged[i].distance == all[i].first);
      CHECK(merged[i].id == all[i].second);
    }
  }
}

TEST_CASE("rescored order: the metric's direction, +0 == -0, NaN last, then the lower id") {
  using ferry::RescoreElement;
  using ferry::RescoreMetric;
  auto f = [](float v) { return std::bit_cast<std::uint32_t>(v); };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float denormal = std::numeric_limits<float>::denorm_min();
  // Expected order for inner product (larger first) and for l2 (smaller first).
  const std::vector<ScoredHit> hits = {{f(1.5f), 9}, {f(-0.0f), 4}, {f(0.0f), 2}, {f(nan), 1},
                                       {f(denormal), 8}, {f(-2.0f), 0}, {f(nan), 0}, {f(1.5f), 3}};
  std::vector<ScoredList> lists;
  std::vector<std::uint32_t> scores, indices;
  for (const ScoredHit& hit : hits) {
    scores.push_back(hit.score_bits);
    indices.push_back(static_cast<std::uint32_t>(hit.id));
  }
  indices.push_back(ferry::kRescoreNoIndex);  // padding is skipped
  scores.push_back(ferry::kRescoreNoScoreBits);
  lists.push_back({scores, indices, 0});
  auto ids = [](const std::vector<ScoredHit>& merged) {
    std::vector<std::uint64_t> out;
    for (const ScoredHit& hit : merged) out.push_back(hit.id);
    return out;
  };
  CHECK(ids(ferry::index::merge_rescored(lists, 10, RescoreElement::float32,
                                         RescoreMetric::inner_product)) ==
        std::vector<std::uint64_t>{3, 9, 8, 2, 4, 0, 0, 1});
  CHECK(ids(ferry::index::merge_rescored(lists, 3, RescoreElement::float32, RescoreMetric::l2)) ==
        std::vector<std::uint64_t>{0, 2, 4});
  // int32 scores: signed.
  const std::vector<std::uint32_t> ints = {5, static_cast<std::uint32_t>(-7), 5, 0};
  const std::vector<std::uint32_t> rows = {6, 1, 2, 3};
  const std::vector<ScoredList> int_lists = {{ints, rows, 100}};
  CHECK(ids(ferry::index::merge_rescored(int_lists, 4, RescoreElement::int8,
                                         RescoreMetric::inner_product)) ==
        std::vector<std::uint64_t>{102, 106, 103, 101});
  CHECK(ids(ferry::index::merge_rescored(int_lists, 4, RescoreElement::int8, RescoreMetric::l2)) ==
        std::vector<std::uint64_t>{101, 103, 102, 106});
}

TEST_CASE("index file header: encoded and decoded unchanged; damage refused") {
  using ferry::index::FileHeader;
  FileHeader h;
  h.dims = 100;
  h.metric = ferry::IndexMetric::cosine;
  h.input_type = ferry::ElementType::bfloat16;
  h.threshold = ferry::IndexThreshold::first_add_mean;
  h.keep = ferry::KeptVectors::int8;
  h.rows = 12345;
  h.int8_scale = 3.25f;
  h.thresholds_stored = 100;
  h.code_bytes = 16;
  h.vector_bytes = 100;
  h.payload_bytes = *ferry::index::payload_size(h);
  h.payload_crc = 0xdeadbeefu;
  std::array<std::byte, ferry::index::kHeaderBytes> bytes{};
  ferry::index::encode_header(h, bytes);
  const std::uint64_t size = 64 + h.payload_bytes;
  const auto decoded = ferry::index::decode_header(bytes, size);
  REQUIRE(decoded.ok());
  CHECK(decoded->dims == h.dims);
  CHECK(decoded->metric == h.metric);
  CHECK(decoded->input_type == h.input_type);
  CHECK(decoded->threshold == h.threshold);
  CHECK(decoded->keep == h.keep);
  CHECK(decoded->rows == h.rows);
  CHECK(decoded->int8_scale == h.int8_scale);
  CHECK(decoded->thresholds_stored == h.thresholds_stored);
  CHECK(decoded->payload_bytes == h.payload_bytes);
  CHECK(decoded->payload_crc == h.payload_crc);

  auto refused = [&](std::span<const std::byte> damaged, std::uint64_t file_size, const char* what) {
    const auto result = ferry::index::decode_header(damaged, file_size);
    REQUIRE(!result.ok());
    CHECK_MESSAGE(result.status().message().find(what) != std::string::npos,
                  result.status().message());
  };
  refused(bytes, size - 1, "truncated");
  refused(bytes, size + 3, "3 unexpected bytes");
  refused(bytes, 63, "shorter than the 64-byte header");
  for (std::size_t at = 0; at < bytes.size(); ++at) {  // every single-bit flip
    std::array<std::byte, ferry::index::kHeaderBytes> flipped = bytes;
    flipped[at] ^= std::byte{0x04};
    const auto result = ferry::index::decode_header(flipped, size);
    CHECK_MESSAGE(!result.ok(), "a flip at byte " << at << " was accepted");
  }
  // A consistent header (its CRC right) with inconsistent fields is refused too.
  FileHeader wrong = h;
  wrong.code_bytes = 24;
  ferry::index::encode_header(wrong, bytes);
  refused(bytes, size, "do not match dims");
  wrong = h;
  wrong.payload_bytes += 1;
  ferry::index::encode_header(wrong, bytes);
  refused(bytes, size + 1, "payload size");
}
