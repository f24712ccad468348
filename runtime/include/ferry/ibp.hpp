// ferry::ibp: lossless Invariant Bit Packing of 2-D tensors on the host -- encode, validate,
// decode (whole, a row range, a gather of rows), inspect. The stream format is
// docs/IBP_FORMAT.md; the device ops that read and write the same bytes are ferry/ops/ibp_decode.hpp
// and ferry/ops/ibp_encode.hpp.
//
// Errors: invalid_argument (a parameter, naming it), out_of_range (a row index or range past the
// tensor, an output span of the wrong size), data_corrupt (a stream that breaks the format: the
// message names the field, the row or the chunk). Nothing is read or written out of bounds
// whatever the stream holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::ibp {

inline constexpr std::uint16_t kFormatVersion = 1;
inline constexpr std::uint64_t kHeaderBytes = 64;
inline constexpr std::uint64_t kChecksumChunkBytes = 65536;

// What the elements were (informational: the codec works on element_size-byte integers).
enum class DType : std::uint8_t {
  unspecified = 0,
  u8, i8, u16, i16, f16, bf16, u32, i32, f32, u64, i64, f64, boolean,
};

// Row modes (the low 2 bits of a row table entry).
enum class RowMode : std::uint8_t { bitmap = 0, all_matched = 1, raw = 2 };

// The tensor to encode, and how.
struct EncodeParams {
  std::uint8_t element_size = 4;    // 1, 2, 4 or 8
  std::uint64_t row_elements = 0;   // R >= 1
  std::uint64_t elements = 0;       // >= 1; rows = ceil(elements / R), the last row may be short
  // Rows per group, >= 1; 0 = choose: the smallest stream among one group of every row and groups
  // of 65536, 8192, 1024 and 128 rows (those below the row count), equal sizes going to the
  // larger group. Groups whose data could reach 4 GiB are refused (invalid_argument).
  std::uint32_t group_rows = 0;
  DType dtype = DType::unspecified;
  std::uint8_t ndim = 2;            // 1 or 2
  unsigned threads = 0;             // host threads; 0 = the hardware's
};

// A stream's header, checked, with every section's place (docs/IBP_FORMAT.md, "Layout").
struct Layout {
  std::uint8_t element_size = 0;
  DType dtype = DType::unspecified;
  std::uint8_t ndim = 0;
  std::uint32_t group_rows = 0;
  std::uint64_t rows = 0;
  std::uint64_t row_elements = 0;
  std::uint64_t elements = 0;
  std::uint64_t group_count = 0;
  std::uint64_t group_table_offset = 0;  // group_count + 1 uint64
  std::uint64_t masks_offset = 0;
  std::uint64_t mask_block_bytes = 0;    // per group: R masks then R values
  std::uint64_t row_table_offset = 0;    // rows uint32
  std::uint64_t data_offset = 0;
  std::uint64_t data_bytes = 0;
  std::uint64_t checksum_offset = 0;     // checksum_count uint32
  std::uint64_t checksum_count = 0;
  std::uint64_t stream_bytes = 0;        // the whole stream
  std::uint32_t checksums_crc = 0;       // header fields, kept for writers
  std::uint32_t header_crc = 0;

  std::uint64_t raw_bytes() const noexcept { return elements * element_size; }
  std::uint64_t row_elements_of(std::uint64_t row) const noexcept {
    const std::uint64_t first = row * row_elements;
    return elements - first < row_elements ? elements - first : row_elements;
  }
};

// Reads and checks the header (the first kHeaderBytes of `header`; more bytes are ignored):
// magic, version, CRC, field ranges, sizes without overflow. Reads nothing else.
Result<Layout> read_layout(std::span<const std::byte> header);

// The largest stream `params` (with group_rows >= 1) can produce: every row raw.
Result<std::uint64_t> max_stream_bytes(const EncodeParams& params);

// Encodes `data` (elements x element_size bytes, row-major) by the format's exact rules.
Result<std::vector<std::byte>> encode(std::span<const std::byte> data, const EncodeParams& params);

// Checks a whole stream (docs/IBP_FORMAT.md, "What readers check"); O(size), host threads.
Status validate(std::span<const std::byte> stream, unsigned threads = 0);
// What to call on a stream from outside before allocating its tensor: validate(), then the
// tensor's size (raw_bytes()) against this host's memory (ErrorCode::out_of_memory when it could
// not be held: a small valid stream can describe a huge tensor). Returns the stream's layout;
// decode with `validated` = true after it.
Result<Layout> validate_for_decode(std::span<const std::byte> stream, unsigned threads = 0);

// Decoders; each validates the stream first unless `validated` says the caller just did.
// Whole tensor: out is elements x element_size bytes.
Status decode(std::span<const std::byte> stream, std::span<std::byte> out, bool validated = false,
              unsigned threads = 0);
// Rows [first_row, first_row + row_count) as one contiguous slice of the tensor: out is exactly
// the elements of those rows (the short last row only has its own).
Status decode_rows(std::span<const std::byte> stream, std::uint64_t first_row,
                   std::uint64_t row_count, std::span<std::byte> out, bool validated = false);
// Row rows[i] into out slot i of R x element_size bytes, in any order, duplicates allowed; the
// short last row's slot ends with zero bytes. An index >= rows is out_of_range.
Status decode_gather(std::span<const std::byte> stream, std::span<const std::uint32_t> rows,
                     std::span<std::byte> out, bool validated = false);

// What `ferry ibp inspect` prints.
struct GroupStats {
  std::uint64_t first_row = 0;
  std::uint64_t rows = 0;
  std::uint64_t data_bytes = 0;            // its rows' bytes
  std::uint64_t raw_bytes = 0;             // its elements' bytes
  std::uint64_t invariant_bits = 0;        // sum over columns of the mask's bits
  std::uint64_t rows_by_mode[3] = {0, 0, 0};
};
struct StreamStats {
  Layout layout;
  std::vector<GroupStats> groups;
  double ratio() const noexcept {
    return layout.stream_bytes == 0 ? 0.0
                                    : double(layout.raw_bytes()) / double(layout.stream_bytes);
  }
};
Result<StreamStats> inspect(std::span<const std::byte> stream);

}  // namespace ferry::ibp
