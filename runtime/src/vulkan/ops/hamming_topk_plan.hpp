// The shape of shaders/hamming_topk.comp's level-0 scan for a search: a pure function, unit-tested
// without a GPU (tests/unit/ops/hamming_topk_plan.cpp).
//
// The shader's shared memory is fixed (hamming_topk_abi.h: a pool of words and the query codes'
// quads, 32 KiB in all, what lavapipe offers): a tile of `tile` queries needs tile x ceil(words / 4)
// quads of codes and tile key buffers of `cap` keys in the pool. The tile is 32 queries for k up
// to 32, 8 beyond (as the CUDA scan), halved while half of it still holds every query (a tile's
// absent queries cost as much as the others), or a preferred tile given for measurements; then
// halved while the codes or the least buffers that work (ops::hamming_scan_min_cap) do not fit;
// the buffers take ops::hamming_scan_cap keys, or as many as fit.
#pragma once

#include <cstdint>
#include <string>

#include "hamming_topk_abi.h"
#include "ops/hamming_topk.hpp"
#include "vulkan/cooperative_matrix.hpp"

namespace ferry::vulkan {

struct HammingScanShape {
  std::uint32_t tile = 0;  // queries per workgroup: 32, 16, 8 or 4
  std::uint32_t cap = 0;   // keys per query buffer
};

// Every k from 1 to kHammingMaxK and every code length fits a tile of 4 (checked in the .cpp);
// `preferred_tile` 0 picks by k and the number of queries.
HammingScanShape hamming_scan_shape(std::uint32_t k, std::uint32_t words, std::uint32_t queries,
                                    std::uint32_t preferred_tile = 0);

// ---- The pooled search (shaders/hamming_topk.comp, "Pools") ----
//
// Its scratch for a slice of queries, in 32-bit words from the binding's start: the pools
// (pool_cap row indices per query), their counts, then, from an even word, as candidates of two
// words (what the bound pass, a merge, reads and writes), the sample's minima (sample_groups per
// query) and the bounds (k per query).
struct HammingPoolPlan {
  std::uint32_t pool_cap = 0;  // 0: no pooled search
  std::uint32_t sample_groups = 0;
  std::uint32_t sample_rows = 0;
  std::uint32_t slice = 0;        // queries per slice (slices of equal size)
  std::uint32_t counts_word = 0;  // query 0's pool count
  std::uint32_t minima_base = 0;  // candidates
  std::uint32_t bound_base = 0;   // candidates
};
// Pools where ops::hamming_pool_shape has them, with a slice of at least kHammingMinPoolSlice
// queries (or all of them) in `scratch_bytes`.
inline constexpr std::uint32_t kHammingMinPoolSlice = 32;
HammingPoolPlan hamming_pool_plan(const ops::HammingTopkArgs& args, std::uint64_t scratch_bytes);

// ---- The pooled search's sample and fill with cooperative matrices ----
// (shaders/hamming_topk_coopmat_fill.comp)
//
// Its shared memory: two buffers of a round's expanded rows, 16 x 16 words per subgroup, one
// tile of 16 x 16 words (each element's place), each subgroup's waiting appends and their count.
// No more than the cooperative-matrix scan's (checked in the .cpp), so
// hamming_coopmat_unsupported answers for both shaders.
inline constexpr std::uint32_t kHammingCoopmatFillSharedBytes =
    16 * 2 * FERRY_HAMMING_ROUND_ROWS * FERRY_HAMMING_FILL_PITCH +
    4 * (FERRY_HAMMING_WORKGROUP_SIZE / FERRY_HAMMING_COOPMAT_SUBGROUP + 1) *
        FERRY_HAMMING_COOPMAT_M * FERRY_HAMMING_COOPMAT_N +
    4 * (FERRY_HAMMING_WORKGROUP_SIZE / FERRY_HAMMING_COOPMAT_SUBGROUP) *
        (FERRY_HAMMING_FILL_PENDING + 1);

// The fill's tile for slices of `queries` queries of `words`-word codes: 256 queries, halved (to
// 128, 64) while half of it still holds them all. 0 (the portable fill) for slices of fewer than
// kHammingCoopmatFillMinQueries queries: measured on the H200 (docs/PERFORMANCE.md), the
// portable fill is faster there (1 and 16 queries), slower from 32 on.
inline constexpr std::uint32_t kHammingCoopmatFillMinQueries = 32;
std::uint32_t hamming_coopmat_fill_tile(std::uint32_t words, std::uint32_t queries);

// ---- The scan's cooperative-matrix path (shaders/hamming_topk_coopmat.comp) ----
//
// Its shared memory: the same pool, the expanded codes of a round's rows and of a tile's queries
// (a chunk of the codes at a time), a 16 x 16 int32 tile per subgroup and the queries' popcounts.
inline constexpr std::uint32_t kHammingCoopmatSharedBytes =
    4 * FERRY_HAMMING_POOL_WORDS +
    16 * FERRY_HAMMING_COOPMAT_PITCH * (FERRY_HAMMING_ROUND_ROWS + FERRY_HAMMING_MAX_TILE) +
    4 * (FERRY_HAMMING_WORKGROUP_SIZE / FERRY_HAMMING_COOPMAT_SUBGROUP) * FERRY_HAMMING_COOPMAT_M *
        FERRY_HAMMING_COOPMAT_N +
    4 * FERRY_HAMMING_MAX_TILE;

// Empty when the device can run the cooperative-matrix scan, else why not: it needs the
// extension and its feature, an int8 x int8 -> int32 entry of 16 x 16 x 32 (FERRY_HAMMING_COOPMAT_*)
// at subgroup scope, subgroups of exactly 32 invocations (the shader has 8 of them compute),
// subgroup votes, shaderInt8, vulkanMemoryModel and kHammingCoopmatSharedBytes of shared memory.
std::string hamming_coopmat_unsupported(const CooperativeMatrixSupport& support);

// The cooperative-matrix scan's tile for a search: 32 queries, 16 when 16 hold them all or when
// 32 buffers of the least size (ops::hamming_scan_min_cap) and a round more do not fit (k above
// 41); tile 0 when the least buffers do not fit 16 either (k above 256: the portable path takes
// it). Buffers as hamming_scan_shape's.
HammingScanShape hamming_coopmat_scan_shape(std::uint32_t k, std::uint32_t queries);

}  // namespace ferry::vulkan
