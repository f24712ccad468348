// The pooled search's appends and limits, shared by the shaders that fill the pools
// (hamming_topk.comp's fill_pools, hamming_topk_coopmat_fill.comp); included after the push
// constants and the scratch binding (hamming_topk_abi.h has the layout of the scratch).
#ifndef FERRY_SHADERS_HAMMING_TOPK_POOLS_H
#define FERRY_SHADERS_HAMMING_TOPK_POOLS_H

// Query j's pool (j in the slice) takes `row`: counted always, written while there is room.
void pool_append(uint j, uint row) {
  const uint at = atomicAdd(scratch.words[push.scratch_word + push.pool_counts + j], 1u);
  if (at < push.pool_cap) scratch.words[push.scratch_word + j * push.pool_cap + at] = row;
}

// A row enters query j's pool when its distance is below this: the query's bound (the distance
// of the bound pass's k-th candidate) + 1.
uint pool_limit(uint j) {
  const uint at = push.bound_base + j * push.k + push.k - 1u;
  return scratch.words[push.scratch_word + 2u * at] + 1u;
}

#endif  // FERRY_SHADERS_HAMMING_TOPK_POOLS_H
