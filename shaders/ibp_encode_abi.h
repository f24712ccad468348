// The ABI of ibp_encode.comp: its push constants and pass numbers, shared word for word by the
// GLSL shader and the C++ host code (the shader #includes this file too). One shader, one
// pipeline: `pass` picks what a dispatch does (runtime/src/ops/ibp_encode.hpp has the passes).
// Positions are bytes from the stream's start (stream_word: its first word in the window),
// elements from the input's first byte in its window (input_byte), words of scratch from
// scratch_word: the Vulkan backend keeps every window under 2^32 bytes, so all fit 32 bits.
#ifndef FERRY_SHADERS_IBP_ENCODE_ABI_H
#define FERRY_SHADERS_IBP_ENCODE_ABI_H

#define FERRY_IBP_WORKGROUP_SIZE 256
#define FERRY_IBP_SLICE_ROWS 255
#define FERRY_IBP_SCAN_BLOCK 1024

// Passes, in the order a command records them.
#define FERRY_IBP_PASS_CLEAR 0u    // zero the batch's column records
#define FERRY_IBP_PASS_COUNT 1u    // ones per bit
#define FERRY_IBP_PASS_ORDER 2u    // majority values, ranks
#define FERRY_IBP_PASS_HIST 3u     // kmax histogram
#define FERRY_IBP_PASS_CHOOSE 4u   // best k: mask, value
#define FERRY_IBP_PASS_MASKS 5u    // the batch's mask blocks into the stream
#define FERRY_IBP_PASS_LENGTHS 6u  // row table entries = length | mode
#define FERRY_IBP_PASS_REDUCE 7u   // scan: level sums
#define FERRY_IBP_PASS_TOP 8u      // scan: the last level, data_bytes
#define FERRY_IBP_PASS_DOWN 9u     // scan: a level from the one above
#define FERRY_IBP_PASS_GROUPS 10u  // scan of the rows: group table
#define FERRY_IBP_PASS_OFFSETS 11u // scan of the rows: row table offsets
#define FERRY_IBP_PASS_ROWS 12u    // the rows' bit streams
#define FERRY_IBP_PASS_CRC 13u     // the checksum table
#define FERRY_IBP_PASS_HEADER 14u  // the checksum table's CRC, the header

// CRC-32C (reflected): the polynomial and x^(2^k) mod P for k = 0..31, for the shift operator
// that combines lanes' CRCs (as zlib's crc32_combine).
#define FERRY_IBP_CRC_POLY 0x82f63b78u
#define FERRY_IBP_X2N_TABLE                                                                     \
  0x40000000u, 0x20000000u, 0x08000000u, 0x00800000u, 0x00008000u, 0x82f63b78u, 0x6ea2d55cu,    \
      0x18b8ea18u, 0x510ac59au, 0xb82be955u, 0xb8fdb1e7u, 0x88e56f72u, 0x74c360a4u,             \
      0xe4172b16u, 0x0d65762au, 0x35d73a62u, 0x28461564u, 0xbf455269u, 0xe2ea32dcu,             \
      0xfe7740e6u, 0xf946610bu, 0x3c204f8fu, 0x538586e3u, 0x59726915u, 0x734d5309u,             \
      0xbc1ac763u, 0x7d0722ccu, 0xd289cabeu, 0xe94ca9bcu, 0x05b74f3fu, 0xa51e1f42u, 0x40000000u

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
namespace ferry::shaders {
#define FERRY_UINT std::uint32_t
struct IbpEncodePushConstants {
#else
#define FERRY_UINT uint
layout(push_constant, std430) uniform IbpEncodePushConstants {
#endif
  FERRY_UINT pass;
  FERRY_UINT element_size;
  FERRY_UINT header;            // dtype << 8 | ndim
  FERRY_UINT group_rows;
  FERRY_UINT rows;
  FERRY_UINT row_elements;
  FERRY_UINT elements;
  FERRY_UINT group_count;
  FERRY_UINT input_byte;        // the input's first byte in its window
  FERRY_UINT stream_word;       // the stream's first word in its window
  FERRY_UINT scratch_word;      // the scratch's first word in its window
  FERRY_UINT masks_offset;      // stream layout, bytes
  FERRY_UINT mask_block_bytes;
  FERRY_UINT row_table_offset;
  FERRY_UINT data_offset;
  FERRY_UINT data_bytes_word;   // scratch word of data_bytes
  FERRY_UINT batch_first;       // column passes: the batch's first group
  FERRY_UINT batch_groups;      // and its groups
  FERRY_UINT items;             // scan passes: entries of the level read
  FERRY_UINT level_word;        // scratch word of that level's sums (level >= 1)
  FERRY_UINT above_word;        // scratch word of the level above's sums
#ifdef __cplusplus
};
#undef FERRY_UINT
static_assert(sizeof(IbpEncodePushConstants) == 84);
static_assert(offsetof(IbpEncodePushConstants, above_word) == 80);
}  // namespace ferry::shaders
#else
} push;
#undef FERRY_UINT
#endif

#endif  // FERRY_SHADERS_IBP_ENCODE_ABI_H
