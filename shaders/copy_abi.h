// The ABI of copy.comp (host<->device copies run by a compute shader instead of the copy engine,
// vulkan/copy_shader.hpp): its push constants, shared word for word by the GLSL shader and the
// C++ host code (the shader #includes this file too). The C++ side checks with static_assert
// that its struct has the std430 offsets the shader uses.
#ifndef FERRY_SHADERS_COPY_ABI_H
#define FERRY_SHADERS_COPY_ABI_H

#define FERRY_COPY_WORKGROUP_SIZE 256
// 16-byte loads each invocation issues before its stores: reads of host memory cross PCIe, so
// many must be in flight at once.
#define FERRY_COPY_UNROLL 4

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace ferry::shaders {
inline constexpr std::uint32_t kCopyWorkgroupSize = FERRY_COPY_WORKGROUP_SIZE;
inline constexpr std::uint32_t kCopyUnroll = FERRY_COPY_UNROLL;
#define FERRY_UINT std::uint32_t
struct CopyPushConstants {
#else
#define FERRY_UINT uint
layout(push_constant, std430) uniform CopyPushConstants {
#endif
  // 16-byte blocks: block src_first + i of the source window goes to block dst_first + i of the
  // destination window, for i in [0, count).
  FERRY_UINT src_first;
  FERRY_UINT dst_first;
  FERRY_UINT count;
  FERRY_UINT reserved;  // keeps the block 16 bytes
#ifdef __cplusplus
};
#undef FERRY_UINT
static_assert(sizeof(CopyPushConstants) == 16);
static_assert(offsetof(CopyPushConstants, src_first) == 0);
static_assert(offsetof(CopyPushConstants, dst_first) == 4);
static_assert(offsetof(CopyPushConstants, count) == 8);
static_assert(offsetof(CopyPushConstants, reserved) == 12);
}  // namespace ferry::shaders
#else
} push;
#undef FERRY_UINT
#endif

#endif  // FERRY_SHADERS_COPY_ABI_H
