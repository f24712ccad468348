#include "vulkan/ops/hamming_topk_plan.hpp"

#include <algorithm>
#include <bit>

#include "ferry/ops/hamming_topk.hpp"
#include "ops/hamming_topk.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint32_t kRound = FERRY_HAMMING_ROUND_ROWS;
constexpr std::uint32_t kKeyWords = FERRY_HAMMING_POOL_WORDS - FERRY_HAMMING_SCAN_KEYS;

constexpr std::uint32_t max_cap(std::uint32_t tile) { return kKeyWords / tile; }
// The largest k and the longest codes fit the smallest tile.
static_assert(FERRY_HAMMING_MIN_TILE * (kHammingMaxCodeBits / 128) <= FERRY_HAMMING_QUERY_QUADS);
static_assert(max_cap(FERRY_HAMMING_MIN_TILE) >= kHammingMaxK + kRound);
static_assert(FERRY_HAMMING_POSITION_BITS == ops::kHammingScanPositionBits);

}  // namespace

HammingScanShape hamming_scan_shape(std::uint32_t k, std::uint32_t words, std::uint32_t queries,
                                    std::uint32_t preferred_tile) {
  const std::uint32_t quads = (words + 3) / 4;
  const std::uint32_t least = ops::hamming_scan_min_cap(k, kRound);
  HammingScanShape shape;
  shape.tile = preferred_tile != 0 ? preferred_tile : (k <= 32 ? FERRY_HAMMING_MAX_TILE : 8);
  shape.tile = std::bit_floor(
      std::clamp<std::uint32_t>(shape.tile, FERRY_HAMMING_MIN_TILE, FERRY_HAMMING_MAX_TILE));
  while (preferred_tile == 0 && shape.tile > FERRY_HAMMING_MIN_TILE && shape.tile / 2 >= queries)
    shape.tile /= 2;
  while (shape.tile > FERRY_HAMMING_MIN_TILE &&
         (shape.tile * quads > FERRY_HAMMING_QUERY_QUADS || least > max_cap(shape.tile))) {
    shape.tile /= 2;
  }
  shape.cap = std::min(ops::hamming_scan_cap(k, kRound), max_cap(shape.tile));
  return shape;
}

}  // namespace ferry::vulkan
