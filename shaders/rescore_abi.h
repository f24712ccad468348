// The ABI of rescore.comp: its constants and push constants, shared word for word by the GLSL
// shader and the C++ host code (the shader #includes this file too). The algorithm is described
// in runtime/src/ops/rescore.hpp; the constants here must equal those there
// (runtime/src/vulkan/ops/rescore.cpp checks).
//
// Vector positions are byte offsets from the start of their bound window, candidate and output
// positions 32-bit word indices: windows are at most maxStorageBufferRange (< 4 GiB) bytes.
#ifndef FERRY_SHADERS_RESCORE_ABI_H
#define FERRY_SHADERS_RESCORE_ABI_H

#define FERRY_RESCORE_WORKGROUP_SIZE 256
#define FERRY_RESCORE_SLOTS 2048  // sort slots per workgroup: 16 KiB of (key, index) pairs
#define FERRY_RESCORE_FLOAT_UNROLL 2  // dimensions per loop iteration
#define FERRY_RESCORE_INT8_UNROLL 8
#define FERRY_RESCORE_HARDWARE_FMA_ID 0  // specialization constant: the device's fma() is fused
// flags
#define FERRY_RESCORE_INT8 1u  // int8 vectors, int32 scores (else float32)
#define FERRY_RESCORE_L2 2u    // squared L2, smaller first (else inner product, larger first)

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace ferry::shaders {
#define FERRY_UINT std::uint32_t
struct RescorePushConstants {
#else
#define FERRY_UINT uint
layout(push_constant, std430) uniform RescorePushConstants {
#endif
  FERRY_UINT flags;
  FERRY_UINT dims;
  FERRY_UINT queries;
  FERRY_UINT rows;        // database rows: a candidate index at or above it is skipped
  FERRY_UINT candidates;  // per query
  FERRY_UINT k;
  FERRY_UINT query_pitch;     // bytes from a query to the next (0 with one query)
  FERRY_UINT database_pitch;  // bytes from a row to the next (0 with one row)
  FERRY_UINT queries_byte;    // where each binding's data starts in its window
  FERRY_UINT database_byte;
  FERRY_UINT candidates_word;
  FERRY_UINT scores_word;
  FERRY_UINT indices_word;
#ifdef __cplusplus
};
#undef FERRY_UINT
static_assert(sizeof(RescorePushConstants) == 52);
static_assert(offsetof(RescorePushConstants, indices_word) == 48);
}  // namespace ferry::shaders
#else
} push;
#undef FERRY_UINT
#endif

#endif  // FERRY_SHADERS_RESCORE_ABI_H
