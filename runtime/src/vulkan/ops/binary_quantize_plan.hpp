// How one binary_quantize becomes dispatches of shaders/binary_quantize.comp: a pure function,
// unit-tested without a GPU (tests/unit/ops/binary_quantize_plan.cpp).
//
// The shader sees the input, the codes and the thresholds through storage-buffer windows. A
// window must start at a multiple of minStorageBufferOffsetAlignment and be at most
// maxStorageBufferRange bytes, and ferry keeps it under 2^31 bytes so that every index inside fits
// the shader's 32-bit arithmetic. A binary_quantize whose input or codes do not fit one window
// becomes several dispatches, each over a run of whole rows. A row is at most 256 KiB of input
// and 8 KiB of codes (kMaxBinaryQuantizeDims), far below the 128 MiB every Vulkan device allows,
// so that a single row does not fit is an error (resource_exhausted) only with made-up limits.
//
// Windows start on 16 bytes at least (so that the shader's 16-byte vector loads are aligned in
// memory, not only in the window) and the input window ends on a whole 32-bit word (the shader
// reads 16-bit elements as the word they lie in): both stay inside the VkBuffer, whose size is a
// multiple of 16. Consecutive dispatches' windows may overlap by less than the alignment; the
// recorder orders such dispatches with a barrier, since the validation layers see whole windows.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "binary_quantize_abi.h"
#include "ferry/status.hpp"
#include "ops/binary_quantize.hpp"

namespace ferry::vulkan {

struct BinaryQuantizeLimits {
  std::uint64_t offset_alignment = 16;        // minStorageBufferOffsetAlignment
  std::uint64_t max_window_bytes = 1u << 27;  // maxStorageBufferRange
  std::uint32_t max_group_count = 65535;      // maxComputeWorkGroupCount[0] (capped)
  std::uint32_t workgroup_size = shaders::kBinaryQuantizeWorkgroupSize;
};

struct BinaryQuantizeDispatch {
  std::uint64_t src_window_offset = 0;  // input descriptor offset in its buffer
  std::uint64_t src_window_size = 0;    // input descriptor range (a multiple of 4)
  std::uint64_t dst_window_offset = 0;  // codes descriptor offset in its buffer
  std::uint64_t dst_window_size = 0;    // codes descriptor range
  // The thresholds' descriptor, the same for every dispatch (size 0 without thresholds: the
  // recorder then binds the input window there).
  std::uint64_t threshold_window_offset = 0;
  std::uint64_t threshold_window_size = 0;
  std::uint32_t first_row = 0;    // the dispatch covers rows [first_row, + push.rows)
  std::uint32_t group_count = 0;  // workgroups (a grid-stride loop covers the rest)
  shaders::BinaryQuantizePushConstants push{};
};

// The dispatches of one binary_quantize whose input starts at byte input_offset of its buffer,
// codes at codes_offset of theirs, and thresholds (when args.has_thresholds) at
// threshold_offset. Errors: ErrorCode::resource_exhausted when one row's input or codes, or the
// thresholds, exceed a window; ErrorCode::internal for arguments core should have rejected.
Result<std::vector<BinaryQuantizeDispatch>> plan_binary_quantize(
    const ops::BinaryQuantizeArgs& args, std::uint64_t input_offset, std::uint64_t codes_offset,
    std::uint64_t threshold_offset, const BinaryQuantizeLimits& limits);

}  // namespace ferry::vulkan
