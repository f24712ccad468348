// How one host<->device copy becomes dispatches of shaders/copy.comp (vulkan/copy_shader.hpp): a
// pure function, unit-tested without a GPU (tests/unit/test_copy_plan.cpp).
//
// The shader copies 16-byte blocks between two storage-buffer windows. A window must start at a
// multiple of minStorageBufferOffsetAlignment and be at most maxStorageBufferRange bytes (and
// under 2^31, so block indices fit the shader's 32-bit push constants), so a long copy becomes
// several dispatches over consecutive pieces. The shader takes copies whose two offsets are
// multiples of 16; the last size % 16 bytes are left to the copy engine (`tail_offset`).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::vulkan {

struct CopyLimits {
  std::uint64_t offset_alignment = 16;        // minStorageBufferOffsetAlignment
  std::uint64_t max_window_bytes = 1u << 27;  // maxStorageBufferRange
  std::uint32_t max_group_count = 65535;      // maxComputeWorkGroupCount[0], or a smaller cap
  std::uint32_t workgroup_size = 256;         // the shader's local_size_x
  std::uint32_t unroll = 4;                   // blocks per invocation per grid-stride step
};

struct CopyDispatch {
  std::uint64_t src_window_offset = 0;  // descriptor offsets and ranges in the two buffers
  std::uint64_t src_window_size = 0;
  std::uint64_t dst_window_offset = 0;
  std::uint64_t dst_window_size = 0;
  std::uint32_t src_first = 0;  // first block of the piece within each window
  std::uint32_t dst_first = 0;
  std::uint32_t count = 0;        // 16-byte blocks of the piece
  std::uint32_t group_count = 0;  // workgroups (the grid-stride loop covers the rest)
};

struct CopyPlan {
  std::vector<CopyDispatch> dispatches;  // empty: the shader cannot take the copy
  std::uint64_t tail_offset = 0;         // bytes [tail_offset, size) go to the copy engine
};

// Whether the shader can take the copy: both offsets multiples of 16, at least 16 bytes, and
// limits that hold a window.
bool shader_can_copy(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t size,
                     const CopyLimits& limits);

// Empty dispatches where shader_can_copy is false.
CopyPlan plan_shader_copy(std::uint64_t src_offset, std::uint64_t dst_offset, std::uint64_t size,
                          const CopyLimits& limits);

// Who runs host<->device copies on compute-capable queues (FERRY_VULKAN_COPIES): the copy engine
// (vkCmdCopyBuffer, the default) or copy.comp; `group_cap` bounds the shader's workgroups per
// dispatch (0: one per compute unit where the device says how many).
struct CopySettings {
  bool shader = false;
  std::uint32_t group_cap = 0;
};

// "engine", "shader" or "shader,groups=N" (N in 1..65535); ErrorCode::invalid_argument naming
// the variable otherwise.
Result<CopySettings> parse_copy_settings(std::string_view spec);

}  // namespace ferry::vulkan
