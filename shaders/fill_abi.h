// The ABI of fill.comp: its push constants, shared word for word by the GLSL shader and the C++ host code
// (the shader #includes this file too), so the two layouts cannot drift apart. The C++ side
// checks with static_assert that its struct has the std430 offsets the shader uses.
#ifndef FERRY_SHADERS_FILL_ABI_H
#define FERRY_SHADERS_FILL_ABI_H

#define FERRY_FILL_WORKGROUP_SIZE 256

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace ferry::shaders {
inline constexpr std::uint32_t kFillWorkgroupSize = FERRY_FILL_WORKGROUP_SIZE;
#define FERRY_UINT std::uint32_t
struct FillPushConstants {
#else
#define FERRY_UINT uint
layout(push_constant, std430) uniform FillPushConstants {
#endif
  // Bytes [begin_byte, end_byte) of the bound window get the pattern; offsets are relative to the
  // window, which starts on a word boundary.
  FERRY_UINT begin_byte;
  FERRY_UINT end_byte;
  // The 32-bit pattern rotated so that it can be stored to every whole word of the window as is.
  FERRY_UINT word_pattern;
  FERRY_UINT reserved;  // keeps the block 16 bytes
#ifdef __cplusplus
};
#undef FERRY_UINT
// std430 offsets of the block above, as the SPIR-V declares them.
static_assert(sizeof(FillPushConstants) == 16);
static_assert(offsetof(FillPushConstants, begin_byte) == 0);
static_assert(offsetof(FillPushConstants, end_byte) == 4);
static_assert(offsetof(FillPushConstants, word_pattern) == 8);
static_assert(offsetof(FillPushConstants, reserved) == 12);
}  // namespace ferry::shaders
#else
} push;
#undef FERRY_UINT
#endif

#endif  // FERRY_SHADERS_FILL_ABI_H
