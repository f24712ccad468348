// How one ibp_decode becomes dispatches of shaders/ibp_decode.comp: a pure function, unit-tested
// without a GPU (tests/unit/ops/ibp_decode_plan.cpp).
//
// The shader sees the stream, the output, the status and the indices through storage-buffer
// windows (at most maxStorageBufferRange bytes, kept under 2^31 so that every position fits the
// shader's 32-bit arithmetic, starting on a multiple of minStorageBufferOffsetAlignment). The
// stream is one window: where a row's bits lie is only known on the device, so a stream larger
// than a window is refused (unavailable). The output and indices are split: each dispatch covers
// a run of whole items. The first dispatch only clears the status; a barrier follows every
// dispatch (they all OR into the status, and consecutive output windows may share a word).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ferry/status.hpp"
#include "ibp_decode_abi.h"
#include "ops/ibp_decode.hpp"
#include "vulkan/context.hpp"

namespace ferry::vulkan {

struct IbpDecodeLimits {
  std::uint64_t offset_alignment = 16;        // minStorageBufferOffsetAlignment
  std::uint64_t max_window_bytes = 1u << 27;  // maxStorageBufferRange
  std::uint32_t max_group_count = 65535;      // maxComputeWorkGroupCount[0] (capped)
};

struct IbpDecodeWindow {
  std::uint64_t offset = 0;  // descriptor offset in its buffer
  std::uint64_t size = 0;    // descriptor range (a multiple of 4)
};

struct IbpDecodeDispatch {
  IbpDecodeWindow stream, output, status, indices;  // indices: size 0 without a gather
  // Where the shader reads the group table, masks and row table: the stream window, or a device
  // copy of the stream's bytes before its row data (tables_offset given: a stream in host
  // memory, whose tables would otherwise cross the bus with every row).
  IbpDecodeWindow tables;
  std::uint32_t group_count = 0;
  shaders::IbpDecodePushConstants push{};
};

// Which shader decodes. subgroup_size 0: shaders/ibp_decode.comp, the portable one (a workgroup
// of 32 invocations per item, scans through shared memory). Else shaders/ibp_decode_subgroup.comp
// with subgroups of exactly subgroup_size invocations (required with size control) and `teams`
// subgroups per workgroup, 1 to 8 of them decoding an item (IbpDecodeDispatch::push.teams_per_row).
struct IbpDecodeShader {
  std::uint32_t subgroup_size = 0;
  std::uint32_t teams = 0;
};

// The subgroup shader where the device has subgroup arithmetic and ballots in compute shaders and
// can require a subgroup size of 4 to 128 with full subgroups: 32 where it can (NVIDIA: always),
// else the nearest it offers (lavapipe: 8); 8 subgroups per workgroup, fewer where the device's
// limits say so. Else (or with `portable`) the portable shader.
IbpDecodeShader choose_ibp_decode_shader(const SubgroupSupport& subgroups,
                                         std::uint32_t max_workgroup_invocations, bool portable);

// The subgroup shader gives an item a team (subgroup) per this many chunks of subgroup_size units
// (words of narrow elements, elements of 8 bytes), up to its teams: short rows get one team each
// (several rows per workgroup), long ones several.
inline constexpr std::uint64_t kIbpDecodeChunksPerTeam = 4;

// A row of more bytes than this is refused: the shader counts a row's bits in 32 bits.
inline constexpr std::uint64_t kVulkanIbpMaxRowBytes = std::uint64_t{1} << 28;

// The dispatches of one ibp_decode whose bindings start at these offsets of their buffers
// (tables_offset: the scratch holding a copy of the stream's first layout.data_offset bytes).
// Errors: unavailable when the stream, a row or one item's output does not fit a window;
// internal for arguments core should have rejected.
Result<std::vector<IbpDecodeDispatch>> plan_ibp_decode(const ops::IbpDecodeArgs& args,
                                                       std::uint64_t stream_offset,
                                                       std::uint64_t output_offset,
                                                       std::uint64_t status_offset,
                                                       std::uint64_t indices_offset,
                                                       const IbpDecodeLimits& limits,
                                                       const IbpDecodeShader& shader = {},
                                                       std::optional<std::uint64_t> tables_offset = {});

}  // namespace ferry::vulkan

namespace ferry::vulkan {

// An upper bound of the loop iterations one invocation of `shader` runs in
// `dispatch` (its loops together), for lavapipe, which silently ends a shader's loops after 65535
// iterations: items per workgroup x (chunks decoded and zeroed twice, each with an invocation's
// elements, a word's worth of narrow ones, read twice and deposited over at most 32 runs of
// zeros).
// (The subgroup shader: item rounds x (its segment's chunks, each read twice and deposited over
// at most 32 runs, the zeroing of its share of a slot, and the teams' sums).)
std::uint64_t ibp_decode_loop_iterations(const IbpDecodeDispatch& dispatch,
                                         const IbpDecodeShader& shader = {});

}  // namespace ferry::vulkan
