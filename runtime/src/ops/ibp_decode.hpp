// ibp_decode, as every backend runs it (ferry/ops/ibp_decode.hpp has the public call and its exact
// semantics; docs/IBP_FORMAT.md the stream), with the layout checked and the rows resolved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ferry/ibp.hpp"
#include "ferry/ops/ibp_decode.hpp"

namespace ferry::ops {

// Binding 0: the stream, read: layout.stream_bytes bytes, on a multiple of 8. Binding 1: the
// output, written: output_bytes() bytes, on a multiple of the element size. Binding 2: the status,
// written: one uint32, on a multiple of 4. Binding 3, gather only: the indices, read: item_count()
// uint32, on a multiple of 4. Last, for a backend whose uses_optional_scratch(ibp_decode) is true,
// when the stream is in host memory and the device's scratch slabs hold ibp_tables_copy_bytes:
// scratch of that many bytes, where it copies the stream's bytes before its row data (header,
// group table, masks, row table) to read them from device memory (a gather of few rows: all but
// the row table, ibp_gather_reads_row_table_in_place). Core has checked the layout (what
// read_layout computes from its fields), the rows (range: first_row + row_count <= rows; gather:
// 1 <= row_count < 2^32), and that the outputs overlap nothing.
//
// Item i (0 <= i < item_count()) is row first_row + i (whole, range), or row indices[i] (gather);
// its output starts at byte i x R x element_size and is the row's elements (whole, range) or
// R x element_size bytes, the row's elements then zeros (gather).
struct IbpDecodeArgs {
  ibp::Layout layout;
  IbpDecodeRows rows = IbpDecodeRows::whole;
  std::uint64_t first_row = 0;  // whole: 0
  std::uint64_t row_count = 0;  // whole: layout.rows

  bool gather() const noexcept { return rows == IbpDecodeRows::gather; }
  std::uint64_t item_count() const noexcept { return row_count; }
  std::uint64_t slot_bytes() const noexcept { return layout.row_elements * layout.element_size; }
  // Core checked that it fits 64 bits (it is at most the tensor, or row_count slots).
  std::uint64_t output_bytes() const noexcept {
    if (gather()) return row_count * slot_bytes();
    const std::uint64_t last = first_row + row_count;
    const std::uint64_t end_element = last == layout.rows ? layout.elements : last * layout.row_elements;
    return (end_element - first_row * layout.row_elements) * layout.element_size;
  }
};

// Whether a backend that copies a host-memory stream's tables into the scratch (above) leaves its
// row table out and reads the gathered rows' entries in place: a gather of fewer than 1/8 of the
// rows. An entry read over the bus costs a 32-byte sector, a copied one 4 bytes of every row; the
// scratch is then copied only up to layout.row_table_offset.
inline bool ibp_gather_reads_row_table_in_place(const IbpDecodeArgs& args) noexcept {
  return args.gather() && args.row_count < args.layout.rows / 8;
}
// The stream's first bytes such a backend copies into the scratch (and so the scratch's size).
inline std::uint64_t ibp_tables_copy_bytes(const IbpDecodeArgs& args) noexcept {
  return ibp_gather_reads_row_table_in_place(args) ? args.layout.row_table_offset
                                                   : args.layout.data_offset;
}

// The CPU reference: `bindings` are the bindings' bytes.
void run_on_cpu(const IbpDecodeArgs& args, std::span<const std::span<std::byte>> bindings);

// ---- The GPU algorithm (shaders/ibp_decode.comp, cuda_backend/ops/ibp_decode.cu) ----
// (Vulkan's shaders/ibp_decode_subgroup.comp, where subgroup sizes can be required, splits a row
// among subgroups and checks its length before storing: its header says how. CUDA's kernel does
// the same with teams of warps when the items are few, and reads the fields from a per-warp
// shared-memory window: its header says how.)
//
// One 32-lane slice per item (a CUDA warp; a Vulkan workgroup of 32 invocations, scans through
// shared memory). The slice reads the row's group table entries [gs, ge) and row table entry
// (offset | mode) and the next row's (or ge for the group's last row), and checks, as the host's
// decoder does: gs <= ge <= data_bytes, gs a multiple of 4, mode <= 2, offset <= next <= ge - gs.
// Then, in chunks of 32 x P elements (lane l: elements P l .. P l + P - 1 of the chunk; P = 1 for
// 4- and 8-byte elements, a word's worth for narrower ones, stored as one word), each lane's field
// lengths (matched: W - popcount(mask); unmatched or raw: W), a slice prefix sum of the lanes' bits
// for their bit positions, the fields read as 32-bit words no further than the word after the
// row's stored end (still in the stream: the checksum table follows the row data), and the
// elements rebuilt (value | pdep(field, ~mask), a loop over the runs of zeros of the mask). Mode 2
// takes the same path with every element unmatched (fields of W bits). At the end, a row whose
// bits (padded to 4 bytes) are not exactly its stored length is rewritten with zeros; every
// failing row ORs kIbpStatusCorrupt into the status word, which a fill set to 0 before.
inline constexpr std::uint32_t kIbpDecodeSliceLanes = 32;

}  // namespace ferry::ops
