// The ABI of binary_quantize.comp: its push constants, shared word for word by the GLSL shader
// and the C++ host code (the shader #includes this file too), so the two layouts cannot drift
// apart. The C++ side checks with static_assert that its struct has the std430 offsets the
// shader uses.
//
// One dispatch covers `rows` whole rows. Work item i is 32-bit code word (i % words_per_row) of
// row (i / words_per_row) of the dispatch; invocations walk the items a grid stride apart. Input
// positions count elements from the bound input window's start, code and threshold positions
// count 32-bit words from theirs, so all of them fit in 32 bits (windows are under 2^31 bytes;
// see runtime/src/vulkan/ops/binary_quantize_plan.hpp).
#ifndef FERRY_SHADERS_BINARY_QUANTIZE_ABI_H
#define FERRY_SHADERS_BINARY_QUANTIZE_ABI_H

#define FERRY_BINARY_QUANTIZE_WORKGROUP_SIZE 256
// Input element types, as input_type holds them.
#define FERRY_BINARY_QUANTIZE_FLOAT32 0u
#define FERRY_BINARY_QUANTIZE_FLOAT16 1u
#define FERRY_BINARY_QUANTIZE_BFLOAT16 2u

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace ferry::shaders {
inline constexpr std::uint32_t kBinaryQuantizeWorkgroupSize = FERRY_BINARY_QUANTIZE_WORKGROUP_SIZE;
#define FERRY_UINT std::uint32_t
struct BinaryQuantizePushConstants {
#else
#define FERRY_UINT uint
layout(push_constant, std430) uniform BinaryQuantizePushConstants {
#endif
  // Input element index, in the input window, of element 0 of the dispatch's first row, and
  // elements from a row to the next (0 when the dispatch has one row).
  FERRY_UINT src_origin;
  FERRY_UINT row_stride;
  FERRY_UINT dims;
  FERRY_UINT words_per_row;  // 2 * ceil(dims / 64)
  FERRY_UINT rows;           // rows in this dispatch
  FERRY_UINT dst_origin;        // code word index, in the codes window, of the first row's word 0
  FERRY_UINT threshold_origin;  // word index, in the thresholds window, of threshold 0
  FERRY_UINT input_type;        // FERRY_BINARY_QUANTIZE_FLOAT32 / FLOAT16 / BFLOAT16
  FERRY_UINT has_thresholds;    // 0: every threshold is 0.0f (the thresholds window is unused)
  // 1 when every whole group of 32 elements, and every group of 32 thresholds, starts on a
  // 16-byte boundary of its window: the shader then loads them as 16-byte vectors.
  FERRY_UINT vector_loads;
#ifdef __cplusplus
};
#undef FERRY_UINT
// std430 offsets of the block above, as the SPIR-V declares them.
static_assert(sizeof(BinaryQuantizePushConstants) == 40);
static_assert(offsetof(BinaryQuantizePushConstants, src_origin) == 0);
static_assert(offsetof(BinaryQuantizePushConstants, row_stride) == 4);
static_assert(offsetof(BinaryQuantizePushConstants, dims) == 8);
static_assert(offsetof(BinaryQuantizePushConstants, words_per_row) == 12);
static_assert(offsetof(BinaryQuantizePushConstants, rows) == 16);
static_assert(offsetof(BinaryQuantizePushConstants, dst_origin) == 20);
static_assert(offsetof(BinaryQuantizePushConstants, threshold_origin) == 24);
static_assert(offsetof(BinaryQuantizePushConstants, input_type) == 28);
static_assert(offsetof(BinaryQuantizePushConstants, has_thresholds) == 32);
static_assert(offsetof(BinaryQuantizePushConstants, vector_loads) == 36);
}  // namespace ferry::shaders
#else
} push;
#undef FERRY_UINT
#endif

#endif  // FERRY_SHADERS_BINARY_QUANTIZE_ABI_H
