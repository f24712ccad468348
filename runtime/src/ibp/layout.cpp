// The IBP stream's layout, header and checksum table (docs/IBP_FORMAT.md, "Layout").
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "core/checked.hpp"
#include "core/crc32c.hpp"
#include "core/host_workers.hpp"
#include "ibp/bits.hpp"
#include "ibp/stream.hpp"

namespace ferry::ibp {
namespace detail {
namespace {

using ferry::detail::checked_add;
using ferry::detail::checked_mul;
using ferry::detail::checked_round_up;
using ferry::detail::pieces_of;

constexpr char kMagic[8] = {'F', 'E', 'R', 'R', 'Y', 'I', 'B', 'P'};
constexpr std::uint8_t kLastDType = static_cast<std::uint8_t>(DType::boolean);

bool valid_element_size(std::uint64_t size) {
  return size == 1 || size == 2 || size == 4 || size == 8;
}

}  // namespace

unsigned thread_count(unsigned requested) noexcept {
  if (requested != 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

std::optional<std::string> complete_layout(Layout& l) {
  const auto field = [](const char* name, std::uint64_t value) {
    return std::string(name) + " = " + std::to_string(value);
  };
  if (!valid_element_size(l.element_size)) {
    return field("element_size", l.element_size) + " (must be 1, 2, 4 or 8)";
  }
  if (static_cast<std::uint8_t>(l.dtype) > kLastDType) {
    return field("dtype", static_cast<std::uint8_t>(l.dtype)) + " (no such ferry::ibp::DType)";
  }
  if (l.ndim != 1 && l.ndim != 2) return field("ndim", l.ndim) + " (must be 1 or 2)";
  if (l.group_rows == 0) return std::string("group_rows = 0 (must be >= 1)");
  if (l.rows == 0) return std::string("rows = 0 (must be >= 1)");
  if (l.row_elements == 0) return std::string("row_elements = 0 (must be >= 1)");
  const auto before_last = checked_mul(l.rows - 1, l.row_elements);
  if (!before_last || l.elements <= *before_last || l.elements - *before_last > l.row_elements) {
    return field("elements", l.elements) + " (does not make " + std::to_string(l.rows) +
           " rows of " + std::to_string(l.row_elements) + " elements)";
  }
  if (!checked_mul(l.elements, l.element_size)) {
    return field("elements", l.elements) + " (its bytes overflow 64 bits)";
  }
  const auto row_raw = checked_mul(l.row_elements, l.element_size);
  const auto raw_row_padded = row_raw ? checked_round_up(*row_raw, 4) : std::nullopt;
  if (!raw_row_padded) return field("row_elements", l.row_elements) + " (its bytes overflow)";
  const std::uint64_t raw_row = *raw_row_padded;
  // The format's bound on G, which keeps every row offset within 32 bits.
  const auto group_raw = checked_mul(l.group_rows, raw_row);
  if (!group_raw || *group_raw >= (std::uint64_t{1} << 32)) {
    return field("group_rows", l.group_rows) + " (a group of raw rows of " +
           std::to_string(raw_row) + " bytes reaches 4 GiB)";
  }
  if (l.data_bytes % 4 != 0) return field("data_bytes", l.data_bytes) + " (not a multiple of 4)";
  if (l.data_bytes > max_data_bytes(l)) {
    return field("data_bytes", l.data_bytes) + " (more than every row raw, " +
           std::to_string(max_data_bytes(l)) + ")";
  }
  l.group_count = pieces_of(l.rows, l.group_rows);
  l.group_table_offset = kHeaderBytes;
  const auto masks_offset = checked_add(kHeaderBytes, (l.group_count + 1) * 8);
  const auto mask_block = checked_round_up(*row_raw * 2, 8);
  const auto masks_bytes = mask_block ? checked_mul(l.group_count, *mask_block) : std::nullopt;
  const auto row_table_offset =
      masks_offset && masks_bytes ? checked_add(*masks_offset, *masks_bytes) : std::nullopt;
  const auto row_table_bytes = checked_mul(l.rows, 4);
  const auto row_table_padded =
      row_table_bytes ? checked_round_up(*row_table_bytes, 8) : std::nullopt;
  const auto data_offset = row_table_offset && row_table_padded
                               ? checked_add(*row_table_offset, *row_table_padded)
                               : std::nullopt;
  const auto checksum_offset = data_offset ? checked_add(*data_offset, l.data_bytes) : std::nullopt;
  if (!checksum_offset) return std::string("the stream's size overflows 64 bits");
  const std::uint64_t checksum_count = pieces_of(*checksum_offset - kHeaderBytes,
                                                 kChecksumChunkBytes);
  const auto stream_bytes = checked_add(*checksum_offset, checksum_count * 4);
  if (!stream_bytes) return std::string("the stream's size overflows 64 bits");
  l.masks_offset = *masks_offset;
  l.mask_block_bytes = *mask_block;
  l.row_table_offset = *row_table_offset;
  l.data_offset = *data_offset;
  l.checksum_offset = *checksum_offset;
  l.checksum_count = checksum_count;
  l.stream_bytes = *stream_bytes;
  return std::nullopt;
}

std::uint64_t max_data_bytes(const Layout& l) noexcept {
  // On fields whose element count complete_layout checked; a sum past 64 bits is "unbounded".
  const std::uint64_t last = l.elements - (l.rows - 1) * l.row_elements;
  const auto full = checked_mul(l.rows - 1, raw_row_bytes(l.row_elements, l.element_size));
  const auto total = full ? checked_add(*full, raw_row_bytes(last, l.element_size)) : std::nullopt;
  return total ? *total : ~std::uint64_t{0};
}

Result<Layout> layout_for(const EncodeParams& params, std::uint64_t data_bytes) {
  Layout l;
  l.element_size = params.element_size;
  l.dtype = params.dtype;
  l.ndim = params.ndim;
  l.group_rows = params.group_rows;
  l.row_elements = params.row_elements;
  l.elements = params.elements;
  if (params.row_elements == 0) {
    return Status(ErrorCode::invalid_argument, "ibp: row_elements = 0 (must be >= 1)");
  }
  if (params.elements == 0) {
    return Status(ErrorCode::invalid_argument, "ibp: elements = 0 (must be >= 1)");
  }
  l.rows = pieces_of(params.elements, params.row_elements);
  l.data_bytes = data_bytes;
  if (auto problem = complete_layout(l)) {
    return Status(ErrorCode::invalid_argument, "ibp: " + *problem);
  }
  return l;
}

std::uint32_t write_header(const Layout& l, std::byte* out) noexcept {
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, kMagic, sizeof(kMagic));
  store<std::uint16_t>(out + 8, kFormatVersion);
  store<std::uint8_t>(out + 10, l.element_size);
  store<std::uint8_t>(out + 11, static_cast<std::uint8_t>(l.dtype));
  store<std::uint8_t>(out + 12, l.ndim);
  store<std::uint32_t>(out + 16, l.group_rows);
  store<std::uint64_t>(out + 24, l.rows);
  store<std::uint64_t>(out + 32, l.row_elements);
  store<std::uint64_t>(out + 40, l.elements);
  store<std::uint64_t>(out + 48, l.data_bytes);
  store<std::uint32_t>(out + kChecksumsCrcAt, l.checksums_crc);
  const std::uint32_t crc = ferry::detail::crc32c(std::span(out, kHeaderCrcAt));
  store<std::uint32_t>(out + kHeaderCrcAt, crc);
  return crc;
}

void stamp_checksums(Layout& l, std::span<std::byte> stream, unsigned threads) {
  const std::uint64_t payload = l.checksum_offset - kHeaderBytes;
  std::byte* table = stream.data() + l.checksum_offset;
  const unsigned workers = thread_count(threads);
  // A few chunks per task: one chunk (64 KiB) is ~5 us of CRC.
  constexpr std::uint64_t kChunksPerTask = 16;
  const std::uint64_t tasks = pieces_of(l.checksum_count, kChunksPerTask);
  ferry::detail::parallel_for(tasks, workers, [&](std::size_t task) {
    const std::uint64_t first = task * kChunksPerTask;
    const std::uint64_t last = std::min(l.checksum_count, first + kChunksPerTask);
    for (std::uint64_t chunk = first; chunk < last; ++chunk) {
      const std::uint64_t begin = chunk * kChecksumChunkBytes;
      const std::uint64_t size = std::min(kChecksumChunkBytes, payload - begin);
      store<std::uint32_t>(table + chunk * 4,
                           ferry::detail::crc32c(std::span<const std::byte>(
                               stream.data() + kHeaderBytes + begin, size)));
    }
  });
  l.checksums_crc = ferry::detail::crc32c(
      std::span<const std::byte>(table, l.checksum_count * 4));
  l.header_crc = write_header(l, stream.data());
}

}  // namespace detail

Result<Layout> read_layout(std::span<const std::byte> header) {
  using detail::load;
  if (header.size() < kHeaderBytes) {
    return Status(ErrorCode::data_corrupt,
                  "ibp::read_layout: the stream has " + std::to_string(header.size()) +
                      " bytes, fewer than its 64-byte header (truncated)");
  }
  const std::byte* h = header.data();
  if (std::memcmp(h, detail::kMagic, sizeof(detail::kMagic)) != 0) {
    return Status(ErrorCode::data_corrupt, "ibp::read_layout: no FERRYIBP magic (not an IBP stream)");
  }
  const auto version = load<std::uint16_t>(h + 8);
  if (version != kFormatVersion) {
    return Status(ErrorCode::data_corrupt, "ibp::read_layout: format version " +
                                               std::to_string(version) + " (this reader knows 1)");
  }
  const std::uint32_t crc = ferry::detail::crc32c(header.first(detail::kHeaderCrcAt));
  if (crc != load<std::uint32_t>(h + detail::kHeaderCrcAt)) {
    return Status(ErrorCode::data_corrupt, "ibp::read_layout: header CRC mismatch (bytes [0, 60))");
  }
  for (std::uint64_t at : {13u, 14u, 15u, 20u, 21u, 22u, 23u}) {
    if (h[at] != std::byte{0}) {
      return Status(ErrorCode::data_corrupt,
                    "ibp::read_layout: header byte " + std::to_string(at) + " is not zero");
    }
  }
  Layout l;
  l.element_size = load<std::uint8_t>(h + 10);
  l.dtype = static_cast<DType>(load<std::uint8_t>(h + 11));
  l.ndim = load<std::uint8_t>(h + 12);
  l.group_rows = load<std::uint32_t>(h + 16);
  l.rows = load<std::uint64_t>(h + 24);
  l.row_elements = load<std::uint64_t>(h + 32);
  l.elements = load<std::uint64_t>(h + 40);
  l.data_bytes = load<std::uint64_t>(h + 48);
  l.checksums_crc = load<std::uint32_t>(h + detail::kChecksumsCrcAt);
  l.header_crc = crc;
  if (auto problem = detail::complete_layout(l)) {
    return Status(ErrorCode::data_corrupt, "ibp::read_layout: " + *problem);
  }
  return l;
}

Result<std::uint64_t> max_stream_bytes(const EncodeParams& params) {
  if (params.group_rows == 0) {
    return Status(ErrorCode::invalid_argument,
                  "ibp::max_stream_bytes: group_rows = 0 (must be >= 1 here)");
  }
  FERRY_ASSIGN_OR_RETURN(Layout empty, detail::layout_for(params, 0));
  FERRY_ASSIGN_OR_RETURN(Layout full, detail::layout_for(params, detail::max_data_bytes(empty)));
  return full.stream_bytes;
}

}  // namespace ferry::ibp
