// How one normalize becomes dispatches of shaders/normalize.comp: a pure function, unit-tested
// without a GPU (tests/unit/test_normalize_plan.cpp).
//
// The shader sees its source and destination through storage-buffer windows. A window must start
// at a multiple of minStorageBufferOffsetAlignment and be at most maxStorageBufferRange bytes, and
// ferry keeps it under 2^31 bytes so that every offset inside fits the shader's 32-bit
// arithmetic. A normalize whose input or output does not fit one window becomes several
// dispatches, each over a run of whole images; a single image that does not fit is an error
// naming the sizes and the device limit.
//
// Consecutive dispatches' windows may overlap by less than the alignment (a window starts at the
// aligned address at or below its first byte); the recorder orders such dispatches with a
// barrier, since the validation layers see whole windows.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.hpp"
#include "ferry/status.hpp"
#include "normalize_push_constants.h"

namespace ferry::vulkan {

struct NormalizeLimits {
  std::uint64_t offset_alignment = 16;         // minStorageBufferOffsetAlignment
  std::uint64_t max_window_bytes = 1u << 27;   // maxStorageBufferRange
  // Workgroups per dispatch at most. Each workgroup builds the shader's lookup table once, so the
  // cap is about what the device runs at a time; grid-stride loops cover the rest.
  std::uint32_t max_group_count = 1024;
  std::uint32_t workgroup_size = shaders::kNormalizeDefaultWorkgroupSize;  // the specialization
};

struct NormalizeDispatch {
  std::uint64_t src_window_offset = 0;  // source descriptor offset in its buffer
  std::uint64_t src_window_size = 0;    // source descriptor range
  std::uint64_t dst_window_offset = 0;  // destination descriptor offset in its buffer
  std::uint64_t dst_window_size = 0;    // destination descriptor range
  std::uint32_t first_image = 0;        // the dispatch covers images [first_image, + image_count)
  std::uint32_t group_count = 0;        // workgroups to dispatch
  shaders::NormalizePushConstants push{};
};

// Errors: ErrorCode::resource_exhausted when one image's input or output exceeds a window;
// ErrorCode::internal for a command core should have rejected (an empty shape).
Result<std::vector<NormalizeDispatch>> plan_normalize(const backend::NormalizeCommand& command,
                                                      const NormalizeLimits& limits);

}  // namespace ferry::vulkan
