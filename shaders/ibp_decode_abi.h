// The ABI of ibp_decode.comp: its constants and push constants, shared word for word by the GLSL
// shader and the C++ host code (the shader #includes this file too). The algorithm is described
// in runtime/src/ops/ibp_decode.hpp, the windows in runtime/src/vulkan/ops/ibp_decode_plan.hpp.
//
// Every position is a 32-bit word index (stream, indices, status) or byte index (output) from the
// start of its bound window: windows are under 2^31 bytes.
#ifndef FERRY_SHADERS_IBP_DECODE_ABI_H
#define FERRY_SHADERS_IBP_DECODE_ABI_H

// ibp_decode.comp (portable): one workgroup of 32 invocations per item (row or gather slot).
#define FERRY_IBP_DECODE_WORKGROUP_SIZE 32
// ibp_decode_subgroup.comp: specialization constants (the subgroup size the pipeline requires,
// the subgroups per workgroup, and the workgroup size, their product).
#define FERRY_IBP_DECODE_SUBGROUP_ID 0
#define FERRY_IBP_DECODE_TEAMS_ID 1
#define FERRY_IBP_DECODE_WORKGROUP_ID 2
// flags
#define FERRY_IBP_DECODE_GATHER 1u  // items are rows read from the indices window
// The first dispatch of an op: one workgroup writes 0 to the status, and nothing else (a
// barrier orders it before the dispatches that OR bits into it).
#define FERRY_IBP_DECODE_CLEAR_STATUS 2u
// row_table_word is a word of the stream window, not of the tables': a gather of few rows from a
// stream in host memory reads its row table entries in place (the tables' copy then stops before
// the row table: ops::ibp_gather_reads_row_table_in_place).
#define FERRY_IBP_DECODE_ROW_TABLE_IN_STREAM 4u

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace ferry::shaders {
inline constexpr std::uint32_t kIbpDecodeWorkgroupSize = FERRY_IBP_DECODE_WORKGROUP_SIZE;
#define FERRY_UINT std::uint32_t
struct IbpDecodePushConstants {
#else
#define FERRY_UINT uint
layout(push_constant, std430) uniform IbpDecodePushConstants {
#endif
  FERRY_UINT flags;
  FERRY_UINT element_size;    // 1, 2, 4 or 8
  FERRY_UINT group_rows;      // G
  FERRY_UINT rows;            // the stream's rows
  FERRY_UINT row_elements;    // R
  FERRY_UINT last_row_elements;  // elements of the last row (R unless it is short)
  // The tables are read through binding 4: the stream window again, or a device copy of the
  // stream's bytes before its row data.
  FERRY_UINT group_table_word;   // tables window word of group table entry 0 (uint64 entries)
  FERRY_UINT masks_byte;         // tables window byte of group 0's mask block
  FERRY_UINT mask_block_bytes;
  FERRY_UINT row_table_word;     // tables (or stream) window word of row table entry 0
  FERRY_UINT data_word;          // stream window word of the row data section
  FERRY_UINT data_bytes;
  FERRY_UINT items;              // items of this dispatch
  FERRY_UINT first_row;          // whole / range: the row of this dispatch's first item
  FERRY_UINT indices_word;       // gather: indices window word of this dispatch's first index
  FERRY_UINT output_byte;        // output window byte of this dispatch's first item
  FERRY_UINT slot_bytes;         // output bytes from an item to the next: R x element_size
  FERRY_UINT status_word;        // status window word of the status
  // ibp_decode_subgroup.comp: subgroups decoding one item, a power of two dividing the
  // workgroup's subgroups (the portable shader ignores it).
  FERRY_UINT teams_per_row;
#ifdef __cplusplus
};
#undef FERRY_UINT
static_assert(sizeof(IbpDecodePushConstants) == 76);
static_assert(offsetof(IbpDecodePushConstants, teams_per_row) == 72);
}  // namespace ferry::shaders
#else
} push;
#undef FERRY_UINT
#endif

#endif  // FERRY_SHADERS_IBP_DECODE_ABI_H
