// The ABI of hamming_topk.comp: its constants and push constants, shared word for word by the GLSL
// shader and the C++ host code (the shader #includes this file too). The algorithm and the plan
// of passes are in runtime/src/ops/hamming_topk.hpp; the constants here must equal those there
// (runtime/src/vulkan/ops/hamming_topk.cpp checks).
//
// Every index is in 32-bit words relative to the bound window (windows are below 4 GiB), and
// every candidate is two words in the scratch window: distance, then database row index.
#ifndef FERRY_SHADERS_HAMMING_TOPK_ABI_H
#define FERRY_SHADERS_HAMMING_TOPK_ABI_H

#define FERRY_HAMMING_WORKGROUP_SIZE 256
#define FERRY_HAMMING_CHUNK_ROWS 2048     // level 0: rows per workgroup (8 per invocation)
#define FERRY_HAMMING_QUERY_TILE 4        // level 0: queries per workgroup
#define FERRY_HAMMING_MERGE_GROUP 16384   // merges: candidates per workgroup (64 per invocation)
#define FERRY_HAMMING_MAX_BITS 4096
#define FERRY_HAMMING_MAX_K 1024
// flags
#define FERRY_HAMMING_FROM_CODES 1u  // level 0: distances from the codes (else candidates)
#define FERRY_HAMMING_FINAL 2u       // writes distances and indices (else candidates)

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace ferry::shaders {
#define FERRY_UINT std::uint32_t
struct HammingTopkPushConstants {
#else
#define FERRY_UINT uint
layout(push_constant, std430) uniform HammingTopkPushConstants {
#endif
  FERRY_UINT flags;
  FERRY_UINT words;        // 32-bit words per code
  FERRY_UINT k;
  FERRY_UINT items;        // per query: database rows (level 0) or candidates in
  FERRY_UINT groups;       // per query (tile): ceil(items / group size)
  FERRY_UINT query_begin;  // the slice's first query (outputs are indexed by the whole query)
  FERRY_UINT query_count;  // queries in the slice
  FERRY_UINT in_base;      // merges: first candidate of the input (candidates)
  FERRY_UINT in_stride;    // merges: candidates from a query to the next
  FERRY_UINT out_base;     // not final: first candidate written
  FERRY_UINT out_stride;   // not final: candidates from a query to the next
  FERRY_UINT queries_word;    // where each binding's data starts in its window
  FERRY_UINT database_word;
  FERRY_UINT distances_word;
  FERRY_UINT indices_word;
  FERRY_UINT scratch_word;
#ifdef __cplusplus
};
#undef FERRY_UINT
static_assert(sizeof(HammingTopkPushConstants) == 64);
static_assert(offsetof(HammingTopkPushConstants, scratch_word) == 60);
}  // namespace ferry::shaders
#else
} push;
#undef FERRY_UINT
#endif

#endif  // FERRY_SHADERS_HAMMING_TOPK_ABI_H
