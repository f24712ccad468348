#include "vulkan/ops/hamming_topk_plan.hpp"

#include <algorithm>
#include <bit>
#include <string>

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
// The cooperative-matrix scan: tiles of whole 16-query columns, 64-row rounds of 16-row blocks,
// one block per subgroup; NVIDIA's 48 KiB of shared memory hold it.
static_assert(FERRY_HAMMING_MAX_TILE % FERRY_HAMMING_COOPMAT_N == 0);
static_assert(FERRY_HAMMING_COOPMAT_MIN_TILE % FERRY_HAMMING_COOPMAT_N == 0);
static_assert(kRound % FERRY_HAMMING_COOPMAT_M == 0);
static_assert((kRound / FERRY_HAMMING_COOPMAT_M) * (FERRY_HAMMING_MAX_TILE / FERRY_HAMMING_COOPMAT_N) <=
              FERRY_HAMMING_WORKGROUP_SIZE / FERRY_HAMMING_COOPMAT_SUBGROUP);
static_assert(kHammingCoopmatSharedBytes <= 48 * 1024);
static_assert(kHammingCoopmatFillSharedBytes <= kHammingCoopmatSharedBytes);
// The fill: a subgroup per query group of 32 in the largest tile, whole 16-row blocks a round.
static_assert(FERRY_HAMMING_FILL_MAX_TILE ==
              2 * FERRY_HAMMING_COOPMAT_N *
                  (FERRY_HAMMING_WORKGROUP_SIZE / FERRY_HAMMING_COOPMAT_SUBGROUP));
static_assert(FERRY_HAMMING_FILL_MIN_TILE * (kRound / FERRY_HAMMING_COOPMAT_M) ==
              FERRY_HAMMING_FILL_MAX_TILE);

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

std::uint32_t hamming_coopmat_fill_tile(std::uint32_t words, std::uint32_t queries) {
  if (words == 0 || words > kHammingMaxCodeBits / 32) return 0;
  if (queries < kHammingCoopmatFillMinQueries) return 0;
  std::uint32_t tile = FERRY_HAMMING_FILL_MAX_TILE;
  while (tile > FERRY_HAMMING_FILL_MIN_TILE && tile / 2 >= queries) tile /= 2;
  return tile;
}

HammingPoolPlan hamming_pool_plan(const ops::HammingTopkArgs& args, std::uint64_t scratch_bytes) {
  const ops::HammingPoolShape shape = ops::hamming_pool_shape(args);
  if (shape.pool_cap == 0 || args.queries == 0) return {};
  // This layout's words per query, and a word to align the candidates: what the public call
  // offers per query (the larger of the backends' layouts), so `fits` slices fit the scratch.
  const std::uint64_t per_query = shape.offered_words_per_query;
  const std::uint64_t fits = std::min<std::uint64_t>(scratch_bytes / 4 / per_query, 65535);
  if (fits < kHammingMinPoolSlice && fits < args.queries) return {};
  const std::uint64_t slices = (args.queries + fits - 1) / fits;
  HammingPoolPlan plan;
  plan.pool_cap = shape.pool_cap;
  plan.sample_groups = shape.sample_groups;
  plan.sample_rows = shape.sample_rows;
  plan.slice = static_cast<std::uint32_t>((args.queries + slices - 1) / slices);
  plan.counts_word = plan.slice * plan.pool_cap;
  plan.minima_base = (plan.counts_word + plan.slice + 1) / 2;
  plan.bound_base = plan.minima_base + plan.slice * plan.sample_groups;
  return plan;
}

std::string hamming_coopmat_unsupported(const CooperativeMatrixSupport& support) {
  if (!support.extension) return "no VK_NV_cooperative_matrix";
  if (!support.feature) return "no cooperativeMatrix feature";
  if (!support.shader_int8) return "no shaderInt8 feature";
  if (!support.vulkan_memory_model) return "no vulkanMemoryModel feature";
  if (!support.vulkan_memory_model_device_scope) return "no vulkanMemoryModelDeviceScope feature";
  if (!support.subgroup_vote) return "no subgroup vote operations in compute shaders";
  constexpr std::uint32_t kSubgroup = FERRY_HAMMING_COOPMAT_SUBGROUP;
  if (support.subgroup_size != kSubgroup || support.min_subgroup_size != kSubgroup ||
      support.max_subgroup_size != kSubgroup) {
    return "subgroups of " + std::to_string(support.min_subgroup_size) + " to " +
           std::to_string(support.max_subgroup_size) + " invocations, not always " +
           std::to_string(kSubgroup);
  }
  if (support.compute_shared_bytes < kHammingCoopmatSharedBytes) {
    return "maxComputeSharedMemorySize of " + std::to_string(support.compute_shared_bytes) +
           " bytes, not " + std::to_string(kHammingCoopmatSharedBytes);
  }
  for (const CooperativeMatrixShape& shape : support.shapes) {
    if (shape.a == MatrixComponent::sint8 && shape.b == MatrixComponent::sint8 &&
        shape.c == MatrixComponent::sint32 && shape.result == MatrixComponent::sint32 &&
        shape.m == FERRY_HAMMING_COOPMAT_M && shape.n == FERRY_HAMMING_COOPMAT_N &&
        shape.k == FERRY_HAMMING_COOPMAT_K && shape.subgroup_scope) {
      return "";
    }
  }
  return "no int8 x int8 -> int32 cooperative matrices of 16 x 16 x 32 at subgroup scope";
}

HammingScanShape hamming_coopmat_scan_shape(std::uint32_t k, std::uint32_t queries) {
  const std::uint32_t least = ops::hamming_scan_min_cap(k, kRound);
  HammingScanShape shape;
  shape.tile = FERRY_HAMMING_MAX_TILE;
  // 32 where its buffers hold two rounds beyond k (a compaction only after more than a round of
  // rows came nearer), else 16.
  while (shape.tile > FERRY_HAMMING_COOPMAT_MIN_TILE &&
         (shape.tile / 2 >= queries || least + kRound > max_cap(shape.tile))) {
    shape.tile /= 2;
  }
  if (least > max_cap(shape.tile)) return HammingScanShape{};
  shape.cap = std::min(ops::hamming_scan_cap(k, kRound), max_cap(shape.tile));
  return shape;
}

}  // namespace ferry::vulkan
