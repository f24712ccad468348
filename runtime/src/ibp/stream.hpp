// The IBP stream's internals shared by the host codec (ferry/ibp.hpp) and the CPU backend of the
// ibp_decode / ibp_encode ops: layouts, the header, checksums, one row's checked decode, and the
// encoder writing into a caller's span. The format is docs/IBP_FORMAT.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ferry/ibp.hpp"
#include "ferry/status.hpp"

namespace ferry::ibp::detail {

// Header field offsets (docs/IBP_FORMAT.md, "Layout").
inline constexpr std::uint64_t kChecksumsCrcAt = 56;
inline constexpr std::uint64_t kHeaderCrcAt = 60;

// B2 of the format: the bytes of a raw row of `n` elements (n x element_size, rounded up to 4).
constexpr std::uint64_t raw_row_bytes(std::uint64_t n, std::uint64_t element_size) noexcept {
  return (n * element_size + 3) / 4 * 4;
}

// Fills the derived fields of `layout` (group_count and every offset, stream_bytes) from its
// header fields (element_size, dtype, ndim, group_rows, rows, row_elements, elements,
// data_bytes). Returns the problem when a field is out of its range or a size overflows; the
// caller picks the code (invalid_argument for parameters, data_corrupt for a stream).
std::optional<std::string> complete_layout(Layout& layout);

// The layout of the stream `params` makes with `data_bytes` bytes of rows. params.group_rows must
// be >= 1 here. Errors: invalid_argument naming the parameter.
Result<Layout> layout_for(const EncodeParams& params, std::uint64_t data_bytes);

// The largest data section of `layout`'s tensor: every row raw.
std::uint64_t max_data_bytes(const Layout& layout) noexcept;

// Writes the 64-byte header of `layout` (checksums_crc must already be set) with its CRC into
// out[0, 64), and returns the header CRC.
std::uint32_t write_header(const Layout& layout, std::byte* out) noexcept;

// Computes the checksum table of stream[0, layout.checksum_offset) into
// stream[checksum_offset, stream_bytes) (threads: 0 = the hardware's), sets
// layout.checksums_crc and writes the header. stream must hold layout.stream_bytes bytes.
void stamp_checksums(Layout& layout, std::span<std::byte> stream, unsigned threads);

// Decodes row `row` of the stream into out (its n_r elements, n_r x element_size bytes), reading
// the group table entries of its group, its row table entry (and the next one of its group),
// its group's masks and its bits, each read checked against `stream` (the whole stream as the
// layout describes it, possibly truncated). Returns false, without reading or writing out of
// bounds, when any of these fail (the device decoder's checks, docs/IBP_FORMAT.md):
//   - row < layout.rows;
//   - the group's start and end offsets: start <= end <= data_bytes, start a multiple of 4;
//   - the row's mode 0..2, its offset and the next row's (or the group's end) in the group,
//     ordered: start + offset <= row end <= group end;
//   - the row's length (row end - row start) exactly what its mode, bitmap and masks imply.
// `out` may be partly written on failure; the ibp_decode op's CPU backend zero-fills it. Checks
// nothing else (no CRC, not the mask/value consistency): validate() does.
bool decode_row_checked(std::span<const std::byte> stream, const Layout& layout,
                        std::uint64_t row, std::byte* out);

// Encodes `data` with params.group_rows >= 1 into out, which must hold at least the stream
// (max_stream_bytes(params) is always enough); *written = the stream's length. Bytes of out past
// the stream are left as they were. Errors: invalid_argument (a parameter, naming it),
// out_of_range (data not elements x element_size bytes, out too small).
Status encode_into(std::span<const std::byte> data, const EncodeParams& params,
                   std::span<std::byte> out, std::uint64_t* written);

// The host threads to use for `requested` (0 = the hardware's).
unsigned thread_count(unsigned requested) noexcept;

}  // namespace ferry::ibp::detail
