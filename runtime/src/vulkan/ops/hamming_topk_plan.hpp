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

#include "hamming_topk_abi.h"

namespace ferry::vulkan {

struct HammingScanShape {
  std::uint32_t tile = 0;  // queries per workgroup: 32, 16, 8 or 4
  std::uint32_t cap = 0;   // keys per query buffer
};

// Every k from 1 to kHammingMaxK and every code length fits a tile of 4 (checked in the .cpp);
// `preferred_tile` 0 picks by k and the number of queries.
HammingScanShape hamming_scan_shape(std::uint32_t k, std::uint32_t words, std::uint32_t queries,
                                    std::uint32_t preferred_tile = 0);

}  // namespace ferry::vulkan
