// ibp_decode: parameter validation, the public call (lowering to ops::IbpDecodeArgs) and the CPU
// reference (the host codec's row decoder).
#include "ferry/ops/ibp_decode.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "core/checked.hpp"
#include "core/crc32c.hpp"
#include "core/host_view.hpp"
#include "core/host_workers.hpp"
#include "core/op_record.hpp"
#include "ibp/stream.hpp"
#include "ops/ibp_decode.hpp"

namespace ferry {

namespace {

constexpr const char* kCall = "ferry::ibp_decode";

Status invalid(const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(kCall) + ": " + what);
}

template <typename T>
void put(std::array<std::byte, ibp::kHeaderBytes>& header, std::size_t at, T value) {
  std::memcpy(header.data() + at, &value, sizeof value);  // ferry hosts are little-endian
}

// The header bytes `layout`'s fields describe, with their CRC: read_layout of them gives back the
// layout that a stream with these fields has.
std::array<std::byte, ibp::kHeaderBytes> header_of(const ibp::Layout& layout) {
  std::array<std::byte, ibp::kHeaderBytes> header{};
  std::memcpy(header.data(), "FERRYIBP", 8);
  put(header, 8, ibp::kFormatVersion);
  put(header, 10, layout.element_size);
  put(header, 11, static_cast<std::uint8_t>(layout.dtype));
  put(header, 12, layout.ndim);
  put(header, 16, layout.group_rows);
  put(header, 24, layout.rows);
  put(header, 32, layout.row_elements);
  put(header, 40, layout.elements);
  put(header, 48, layout.data_bytes);
  put(header, 56, layout.checksums_crc);
  put(header, 60, detail::crc32c(std::span(header).first(60)));
  return header;
}

// invalid_argument unless `layout` is exactly what ferry::ibp::read_layout makes of a stream with
// its fields: the device trusts every offset in it.
Status check_layout(const ibp::Layout& layout) {
  const auto header = header_of(layout);
  Result<ibp::Layout> expected = ibp::read_layout(header);
  if (!expected.ok()) {
    return invalid("params.layout: " + expected.status().message());
  }
  const std::pair<const char*, std::pair<std::uint64_t, std::uint64_t>> fields[] = {
      {"group_count", {layout.group_count, expected->group_count}},
      {"group_table_offset", {layout.group_table_offset, expected->group_table_offset}},
      {"masks_offset", {layout.masks_offset, expected->masks_offset}},
      {"mask_block_bytes", {layout.mask_block_bytes, expected->mask_block_bytes}},
      {"row_table_offset", {layout.row_table_offset, expected->row_table_offset}},
      {"data_offset", {layout.data_offset, expected->data_offset}},
      {"checksum_offset", {layout.checksum_offset, expected->checksum_offset}},
      {"checksum_count", {layout.checksum_count, expected->checksum_count}},
      {"stream_bytes", {layout.stream_bytes, expected->stream_bytes}},
      {"header_crc", {layout.header_crc, expected->header_crc}}};
  for (const auto& [name, values] : fields) {
    if (values.first != values.second) {
      return invalid("params.layout." + std::string(name) + " " + std::to_string(values.first) +
                     " is not what ferry::ibp::read_layout computes from the header fields (" +
                     std::to_string(values.second) + ")");
    }
  }
  return Status();
}

// The lowered arguments of `params`, every field checked.
Result<ops::IbpDecodeArgs> lower(const IbpDecodeParams& params) {
  FERRY_RETURN_IF_ERROR(check_layout(params.layout));
  ops::IbpDecodeArgs args;
  args.layout = params.layout;
  args.rows = params.rows;
  const std::uint64_t rows = params.layout.rows;
  switch (params.rows) {
    case IbpDecodeRows::whole:
      args.first_row = 0;
      args.row_count = rows;
      break;
    case IbpDecodeRows::range: {
      const auto end = detail::checked_add(params.first_row, params.row_count);
      if (params.row_count == 0 || !end || *end > rows) {
        return Status(ErrorCode::out_of_range,
                      std::string(kCall) + ": params.first_row " + std::to_string(params.first_row) +
                          " and row_count " + std::to_string(params.row_count) +
                          " are not a range of 1 or more of the stream's " + std::to_string(rows) +
                          " rows");
      }
      args.first_row = params.first_row;
      args.row_count = params.row_count;
      break;
    }
    case IbpDecodeRows::gather:
      if (params.row_count == 0 || params.row_count > UINT32_MAX) {
        return invalid("params.row_count " + std::to_string(params.row_count) +
                       " (gather indices) is not from 1 to " + std::to_string(UINT32_MAX));
      }
      args.first_row = 0;
      args.row_count = params.row_count;
      if (!detail::checked_mul(args.row_count, args.slot_bytes())) {
        return invalid("params.row_count " + std::to_string(params.row_count) + " slots of " +
                       std::to_string(args.slot_bytes()) + " bytes overflow 64 bits");
      }
      break;
    default:
      return invalid("params.rows " + std::to_string(static_cast<int>(params.rows)) +
                     " is not whole, range or gather");
  }
  return args;
}

// invalid_argument unless `offset` from the start of `memory` (what the device sees) is a multiple
// of `unit`.
Status check_alignment(const BufferRef& memory, std::uint64_t offset, std::uint64_t unit,
                       const char* name) {
  if ((memory.base + offset) % unit == 0) return Status();
  return invalid(std::string(name) + " " + std::to_string(offset) + " (" +
                 std::to_string(memory.base + offset) + " from the start of its memory) is not a multiple of " +
                 std::to_string(unit) + " bytes");
}

}  // namespace

Result<std::uint64_t> ibp_decode_output_bytes(const IbpDecodeParams& params) {
  FERRY_ASSIGN_OR_RETURN(const ops::IbpDecodeArgs args, lower(params));
  return args.output_bytes();
}

Status ibp_decode(CommandList& commands, const IbpDecodeBuffers& buffers,
                  const IbpDecodeParams& params) {
  FERRY_ASSIGN_OR_RETURN(const ops::IbpDecodeArgs args, lower(params));
  const std::uint64_t output_bytes = args.output_bytes();
  const std::uint64_t index_bytes = args.gather() ? args.row_count * 4 : 0;
  // Ranges first (they also catch released memory), so that the alignment checks read offsets
  // inside their memory.
  FERRY_RETURN_IF_ERROR(detail::check_range(buffers.stream, kCall, "stream", buffers.stream_offset,
                                            args.layout.stream_bytes));
  FERRY_RETURN_IF_ERROR(
      detail::check_range(buffers.output, kCall, "output", buffers.output_offset, output_bytes));
  FERRY_RETURN_IF_ERROR(
      detail::check_range(buffers.status, kCall, "status", buffers.status_offset, 4));
  if (args.gather()) {
    FERRY_RETURN_IF_ERROR(detail::check_range(buffers.indices, kCall, "indices",
                                              buffers.indices_offset, index_bytes));
  }
  // The stream's 64-bit tables are read as such, the output as whole elements, status and
  // indices as 32-bit words.
  FERRY_RETURN_IF_ERROR(check_alignment(buffers.stream, buffers.stream_offset, 8, "stream_offset"));
  FERRY_RETURN_IF_ERROR(check_alignment(buffers.output, buffers.output_offset,
                                        args.layout.element_size, "output_offset"));
  FERRY_RETURN_IF_ERROR(check_alignment(buffers.status, buffers.status_offset, 4, "status_offset"));
  if (args.gather()) {
    FERRY_RETURN_IF_ERROR(
        check_alignment(buffers.indices, buffers.indices_offset, 4, "indices_offset"));
  }
  const detail::BindingRequest bindings[] = {
      {&buffers.stream, buffers.stream_offset, args.layout.stream_bytes, backend::Access::read,
       "stream"},
      {&buffers.output, buffers.output_offset, output_bytes, backend::Access::write, "output"},
      {&buffers.status, buffers.status_offset, 4, backend::Access::write, "status"},
      {&buffers.indices, buffers.indices_offset, index_bytes, backend::Access::read, "indices"}};
  // A stream in host memory (read over the bus) gets device scratch for its tables where the
  // backend copies them there first, so that the bus carries each row once, not the group's masks
  // and values with every row.
  std::uint64_t scratch_bytes = 0;
  FERRY_ASSIGN_OR_RETURN(const bool tables_scratch,
                         detail::uses_optional_scratch(buffers.stream, ops::OpKind::ibp_decode, kCall));
  if (tables_scratch && ferry::detail::host_view(buffers.stream).ok()) {
    FERRY_ASSIGN_OR_RETURN(const std::uint64_t slab,
                           detail::scratch_slab_bytes(buffers.stream, kCall));
    if (ops::ibp_tables_copy_bytes(args) <= slab) scratch_bytes = ops::ibp_tables_copy_bytes(args);
  }
  return detail::OpRecorder::record(commands, kCall, args,
                                    std::span(bindings, args.gather() ? 4 : 3), scratch_bytes);
}

// ---- the CPU reference ----

namespace ops {

void run_on_cpu(const IbpDecodeArgs& args, std::span<const std::span<std::byte>> bindings) {
  const std::span<const std::byte> stream = bindings[0];
  std::byte* const output = bindings[1].data();
  const ibp::Layout& layout = args.layout;
  const std::uint64_t slot = args.slot_bytes();
  // Ranges of items spread over the host's threads when there is enough work (the results do not
  // depend on the split).
  const std::uint64_t items = args.item_count();
  const unsigned threads = args.output_bytes() < (std::uint64_t{1} << 22)
                               ? 1u
                               : std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t ranges = std::min<std::uint64_t>(items, 4 * std::uint64_t{threads});
  const std::uint64_t per = (items + ranges - 1) / ranges;
  std::atomic<std::uint32_t> status{0};
  detail::parallel_for(ranges, threads, [&](std::size_t range) {
    std::uint32_t flags = 0;
    const std::uint64_t last = std::min(items, (range + 1) * per);
    for (std::uint64_t i = range * per; i < last; ++i) {
      std::uint64_t row = args.first_row + i;
      if (args.gather()) {
        std::uint32_t index;
        std::memcpy(&index, bindings[3].data() + 4 * i, 4);
        row = index;
      }
      std::byte* out = output + i * slot;
      const std::uint64_t out_bytes =
          args.gather() ? slot : layout.row_elements_of(row) * layout.element_size;
      if (row >= layout.rows) {
        std::memset(out, 0, out_bytes);
        flags |= kIbpStatusIndexOutOfRange;
        continue;
      }
      const std::uint64_t row_bytes = layout.row_elements_of(row) * layout.element_size;
      if (!ibp::detail::decode_row_checked(stream, layout, row, out)) {
        std::memset(out, 0, row_bytes);
        flags |= kIbpStatusCorrupt;
      }
      std::memset(out + row_bytes, 0, out_bytes - row_bytes);
    }
    status.fetch_or(flags, std::memory_order_relaxed);
  });
  const std::uint32_t word = status.load();
  std::memcpy(bindings[2].data(), &word, 4);
}

}  // namespace ops
}  // namespace ferry
