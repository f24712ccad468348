// ibp_encode: a tensor in device memory to its IBP stream (docs/IBP_FORMAT.md), on the device.
//
// Exact semantics, identical on every backend (bit for bit): the stream ferry::ibp::encode
// (ferry/ibp.hpp) writes for the same tensor and parameters, checksums included. The stream is
// written from stream_offset; its length is in its header (ferry::ibp::read_layout(first 64
// bytes).stream_bytes), at most ferry::ibp::max_stream_bytes(params). Bytes of the output range
// past the stream's end are left as they were.
#pragma once

#include <cstdint>

#include "ferry/ibp.hpp"
#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry {

// params: as for ferry::ibp::encode, with group_rows >= 1 (the op does not search group sizes)
// and threads ignored.
struct IbpEncodeBuffers {
  BufferRef input;                  // read: elements x element_size bytes (offset: a multiple of
  std::uint64_t input_offset = 0;   // the element size)
  BufferRef stream;                 // written: max_stream_bytes(params) bytes (offset: a multiple
  std::uint64_t stream_offset = 0;  // of 8)
};

// Records the encode, on the compute queue. Errors (nothing recorded): a parameter outside its
// range (invalid_argument, naming it and its value), a misaligned offset (invalid_argument), a
// range outside its buffer (out_of_range), output overlapping input (invalid_argument), released
// memory, memory of another device, and what a backend cannot bind (unavailable).
Status ibp_encode(CommandList& commands, const IbpEncodeBuffers& buffers,
                  const ibp::EncodeParams& params);

}  // namespace ferry
