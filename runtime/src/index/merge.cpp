#include "index/merge.hpp"

#include <algorithm>

#include "ferry/ops/hamming_topk.hpp"

namespace ferry::index {
namespace {

// float32 bits ordered as the values, in integer code (a denormals-are-zero mode set by another
// library in the process cannot change the order): -0 and +0 both map to 0.
std::int64_t float_key(std::uint32_t bits) {
  const auto magnitude = static_cast<std::int64_t>(bits & 0x7fffffffu);
  return (bits >> 31) != 0 ? -magnitude : magnitude;
}

bool is_nan(std::uint32_t bits) { return (bits & 0x7fffffffu) > 0x7f800000u; }

// Keeps the k best of `hits` (already gathered), sorted, by `before` (a total order: ids differ):
// a selection, then a sort of the kept, which beats a partial sort's heap when k is near the
// count (100 of 200 when two parts' candidates are merged).
template <typename Hit, typename Before>
void keep_best(std::vector<Hit>& hits, std::uint32_t k, Before before) {
  const std::size_t keep = std::min<std::size_t>(k, hits.size());
  if (keep < hits.size()) {
    std::nth_element(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(keep), hits.end(),
                     before);
    hits.resize(keep);
  }
  std::sort(hits.begin(), hits.end(), before);
}

}  // namespace

std::vector<HammingHit> merge_hamming(std::span<const HammingList> lists, std::uint32_t k) {
  std::vector<HammingHit> hits;
  for (const HammingList& list : lists) {
    for (std::size_t i = 0; i < list.indices.size(); ++i) {
      if (list.indices[i] == kHammingNoIndex) continue;
      hits.push_back({list.distances[i], list.base + list.indices[i]});
    }
  }
  keep_best(hits, k, [](const HammingHit& a, const HammingHit& b) {
    return a.distance != b.distance ? a.distance < b.distance : a.id < b.id;
  });
  return hits;
}

bool ranks_before(const ScoredHit& a, const ScoredHit& b, RescoreElement element,
                  RescoreMetric metric) {
  const bool larger_first = metric == RescoreMetric::inner_product;
  if (element == RescoreElement::float32) {
    const bool nan_a = is_nan(a.score_bits), nan_b = is_nan(b.score_bits);
    if (nan_a || nan_b) return nan_a && nan_b ? a.id < b.id : nan_b;
    const std::int64_t ka = float_key(a.score_bits), kb = float_key(b.score_bits);
    if (ka != kb) return larger_first ? ka > kb : ka < kb;
    return a.id < b.id;
  }
  const auto sa = static_cast<std::int32_t>(a.score_bits);
  const auto sb = static_cast<std::int32_t>(b.score_bits);
  if (sa != sb) return larger_first ? sa > sb : sa < sb;
  return a.id < b.id;
}

std::vector<ScoredHit> merge_rescored(std::span<const ScoredList> lists, std::uint32_t k,
                                      RescoreElement element, RescoreMetric metric) {
  std::vector<ScoredHit> hits;
  for (const ScoredList& list : lists) {
    for (std::size_t i = 0; i < list.indices.size(); ++i) {
      if (list.indices[i] == kRescoreNoIndex) continue;
      hits.push_back({list.scores[i], list.base + list.indices[i]});
    }
  }
  keep_best(hits, k, [&](const ScoredHit& a, const ScoredHit& b) {
    return ranks_before(a, b, element, metric);
  });
  return hits;
}

}  // namespace ferry::index
