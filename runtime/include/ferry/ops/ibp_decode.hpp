// ibp_decode: an IBP stream (docs/IBP_FORMAT.md) back into its tensor, on the device -- the whole
// tensor, a range of rows, or a gather of rows by index.
//
// Exact semantics, identical on every backend (bit for bit): the bytes ferry::ibp::decode,
// decode_rows and decode_gather (ferry/ibp.hpp) write for a valid stream.
//   Source: the stream, in device memory or in host memory the device reads in place (a Lease, a
//   host buffer: zero-copy over the bus), described by `layout`, which ferry::ibp::read_layout
//   made from the stream's first 64 bytes on the host.
//   Output, whole / rows: the tensor's elements of rows [first_row, first_row + row_count),
//   contiguous (the short last row only has its own elements).
//   Output, gather: slot i (row_elements x element_size bytes) holds row indices[i]; indices are
//   uint32, in any order, duplicates allowed; the short last row's slot ends with zero bytes.
//   Status: a uint32 written with 0, or the OR of kIbpStatusCorrupt (a group or row table entry,
//   or a row's length, that breaks the format: that row's output is zeros) and
//   kIbpStatusIndexOutOfRange (a gather index >= rows: that slot is zeros). Whatever the stream's
//   bytes, nothing outside the bound ranges is read or written. The CRCs are not checked here:
//   ferry::ibp::validate the bytes on the host when they come from outside.
#pragma once

#include <cstdint>

#include "ferry/ibp.hpp"
#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry {

inline constexpr std::uint32_t kIbpStatusCorrupt = 1u;
inline constexpr std::uint32_t kIbpStatusIndexOutOfRange = 2u;

enum class IbpDecodeRows : std::uint8_t { whole, range, gather };

struct IbpDecodeParams {
  ibp::Layout layout;  // from ferry::ibp::read_layout
  IbpDecodeRows rows = IbpDecodeRows::whole;
  std::uint64_t first_row = 0;   // range: first_row + row_count <= layout.rows, row_count >= 1
  std::uint64_t row_count = 0;   // range: rows; gather: indices (>= 1, at most 2^32 - 1)
};

// Where the op reads and writes. stream: read, layout.stream_bytes from stream_offset (a multiple
// of 8); indices: read, row_count uint32 (gather only; offset a multiple of 4); output: written,
// the bytes above (offset a multiple of the element size); status: written, one uint32 (offset a
// multiple of 4).
struct IbpDecodeBuffers {
  BufferRef stream;
  std::uint64_t stream_offset = 0;
  BufferRef indices;
  std::uint64_t indices_offset = 0;
  BufferRef output;
  std::uint64_t output_offset = 0;
  BufferRef status;
  std::uint64_t status_offset = 0;
};

// The output bytes of `params`: what `output` must hold from output_offset.
Result<std::uint64_t> ibp_decode_output_bytes(const IbpDecodeParams& params);

// Records the decode, on the compute queue. Errors (nothing recorded): a layout read_layout would
// refuse or a field outside the ranges above (invalid_argument, naming it and its value), a
// misaligned offset (invalid_argument), a range outside its buffer (out_of_range), an output or
// status overlapping each other or an input (invalid_argument), released memory, memory of
// another device, and what a backend cannot bind (unavailable).
Status ibp_decode(CommandList& commands, const IbpDecodeBuffers& buffers,
                  const IbpDecodeParams& params);

}  // namespace ferry
