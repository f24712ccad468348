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
//
// Each dispatch takes the shader's vector path (runs of 4 or 8 pixels, word loads, 16-byte
// stores) when its input is interleaved and tightly packed and everything is aligned for it (see
// vector_run_pixels), and the element path otherwise; the grid counts work items of that path.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ops/normalize.hpp"
#include "ferry/status.hpp"
#include "normalize_abi.h"

namespace ferry::vulkan {

// One path's grid: its workgroup size (the pipeline's specialization constant) and the most
// workgroups a dispatch gets. Each workgroup builds the shader's lookup table once, so the cap is
// about what the device runs at a time (or less); grid-stride loops cover the rest.
struct NormalizeGrid {
  std::uint32_t workgroup_size = shaders::kNormalizeDefaultWorkgroupSize;
  std::uint32_t max_group_count = 1024;
};

struct NormalizeLimits {
  std::uint64_t offset_alignment = 16;         // minStorageBufferOffsetAlignment
  std::uint64_t max_window_bytes = 1u << 27;   // maxStorageBufferRange
  NormalizeGrid element_grid;                  // the shader's element path
  NormalizeGrid vector_grid;                   // its vector path
  // Source bytes each vector-path invocation keeps loading (it loads as many whole runs, 1 to 4,
  // at once); the plan does not depend on it.
  std::uint32_t source_bytes_in_flight = 48;
};

struct NormalizeDispatch {
  std::uint64_t src_window_offset = 0;  // source descriptor offset in its buffer
  std::uint64_t src_window_size = 0;    // source descriptor range
  std::uint64_t dst_window_offset = 0;  // destination descriptor offset in its buffer
  std::uint64_t dst_window_size = 0;    // destination descriptor range
  std::uint32_t first_image = 0;        // the dispatch covers images [first_image, + image_count)
  std::uint32_t group_count = 0;        // workgroups to dispatch
  // The shader's path: the vector path's run length in pixels (4 or 8; with 16-bit elements, 8
  // means 16-byte vectors and 4 means 8-byte ones; float32 runs are always 4 pixels, 16 bytes),
  // or 0 for the element path. The grid is that path's, and it and the push constants' steps
  // count its work items.
  std::uint32_t vector_pixels = 0;
  shaders::NormalizePushConstants push{};
};

// The run length of shaders/normalize.comp's vector path for a dispatch over `images` images
// whose input starts at byte src_start of its buffer, seen through a window at src_window_offset,
// and whose output starts at dst_start, in a window at dst_window_offset; or 0 when the dispatch
// must take the element path. The vector path needs interleaved, tightly packed input (pixel
// stride == channels, channel stride 1), a width that is a multiple of the run length, every row's
// first byte on a multiple of 4 and the first output element on a multiple of the vector size,
// in the window and in the buffer: 4 pixels (16 bytes) for float32; 8 pixels (16 bytes), else 4
// (8 bytes), for 16-bit outputs.
std::uint32_t vector_run_pixels(const ops::NormalizeArgs& command,
                                std::uint64_t src_window_offset, std::uint64_t src_start,
                                std::uint64_t dst_window_offset, std::uint64_t dst_start,
                                std::uint64_t images);

// The dispatches of one normalize whose first byte read lies at src_offset of its source buffer
// and whose output starts at dst_offset of its destination buffer. Errors:
// ErrorCode::resource_exhausted when one image's input or output exceeds a window;
// ErrorCode::internal for arguments core should have rejected (an empty shape).
Result<std::vector<NormalizeDispatch>> plan_normalize(const ops::NormalizeArgs& command,
                                                      std::uint64_t src_offset,
                                                      std::uint64_t dst_offset,
                                                      const NormalizeLimits& limits);

// For measurements, the environment variable FERRY_VULKAN_NORMALIZE_GRID: applies `spec`, comma
// separated key=value items, to `limits`: workgroup and groups (the vector path's grid),
// element_workgroup and element_groups (the element path's), in_flight (source bytes).
// invalid_argument naming the bad item and the ranges (leaving `limits` as it was).
Status override_normalize_limits(std::string_view spec, std::uint32_t max_workgroup_size,
                                 std::uint32_t max_groups, NormalizeLimits& limits);

}  // namespace ferry::vulkan
