// Exact merging of per-chunk top-k lists into the global top-k, with the ops' own order, so that
// an index searched in several parts (segments, streamed chunks) returns what one search over
// all rows would: Hamming lists by (distance, id); rescored lists by score (the metric's
// direction; +0 and -0 equal; NaN after every number), then id.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ferry/ops/rescore.hpp"

namespace ferry::index {

struct HammingHit {
  std::uint32_t distance = 0;
  std::uint64_t id = 0;
};

// One query's list from one chunk: hamming_topk's distances and (chunk-local) indices, padding
// (kHammingNoIndex) included; `base` is the id of the chunk's row 0.
struct HammingList {
  std::span<const std::uint32_t> distances;
  std::span<const std::uint32_t> indices;
  std::uint64_t base = 0;
};

// The k best hits of the lists, best first (fewer when the lists hold fewer).
std::vector<HammingHit> merge_hamming(std::span<const HammingList> lists, std::uint32_t k);

struct ScoredHit {
  std::uint32_t score_bits = 0;  // float32 or int32, as rescore writes it
  std::uint64_t id = 0;
};

// One query's rescored list from one segment (rescore's scores and local indices, padding
// included).
struct ScoredList {
  std::span<const std::uint32_t> scores;
  std::span<const std::uint32_t> indices;
  std::uint64_t base = 0;
};

// Whether `a` ranks before `b` under rescore's order for this element type and metric.
bool ranks_before(const ScoredHit& a, const ScoredHit& b, RescoreElement element,
                  RescoreMetric metric);

std::vector<ScoredHit> merge_rescored(std::span<const ScoredList> lists, std::uint32_t k,
                                      RescoreElement element, RescoreMetric metric);

}  // namespace ferry::index
