// A copy of 16-byte blocks between two bound windows (vulkan/copy_shader.hpp): host<->device
// copies on a compute-capable queue, run by the shader cores instead of the copy engine.
// Grid-stride: the host caps the group count; each invocation issues FERRY_COPY_UNROLL loads,
// each a grid's width apart (so a warp's loads are contiguous), before its stores.
#version 460
#extension GL_GOOGLE_include_directive : require

#include "copy_abi.h"

layout(local_size_x = FERRY_COPY_WORKGROUP_SIZE) in;

layout(std430, set = 0, binding = 0) restrict readonly buffer Source {
  uvec4 blocks[];
} src;

layout(std430, set = 0, binding = 1) restrict writeonly buffer Destination {
  uvec4 blocks[];
} dst;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  // count < 2^28 and stride < 2^24 (copy_plan.hpp): no index below overflows.
  uint i = gl_GlobalInvocationID.x;
  for (; i + (FERRY_COPY_UNROLL - 1) * stride < push.count; i += FERRY_COPY_UNROLL * stride) {
    uvec4 v[FERRY_COPY_UNROLL];
    for (uint k = 0u; k < FERRY_COPY_UNROLL; ++k) v[k] = src.blocks[push.src_first + i + k * stride];
    for (uint k = 0u; k < FERRY_COPY_UNROLL; ++k) dst.blocks[push.dst_first + i + k * stride] = v[k];
  }
  for (; i < push.count; i += stride) dst.blocks[push.dst_first + i] = src.blocks[push.src_first + i];
}
