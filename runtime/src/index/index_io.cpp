// BinaryIndex::save and the payload half of BinaryIndex::load (index_file.hpp has the format).
// Rows move in steps of a staging slab: device segments through the readback pool (save) or the
// upload pool (load, store_rows), host segments straight from or into their memory.
#include <algorithm>
#include <string>
#include <vector>

#include "ferry/transfer.hpp"
#include "index/index_file.hpp"
#include "index/index_state.hpp"

namespace ferry {
namespace {

// Rows per step of a save or load: a staging slab's worth (at least one).
std::uint64_t io_rows(const BinaryIndexOptions& options, std::uint64_t row_bytes) {
  return std::max<std::uint64_t>(1, options.memory.staging_slab_bytes / row_bytes);
}

}  // namespace

Status BinaryIndex::State::save(const std::filesystem::path& path) {
  index::FileHeader header;
  header.dims = options.dims;
  header.metric = options.metric;
  header.input_type = options.input_type;
  header.threshold = options.threshold;
  header.keep = options.keep;
  header.rows = rows;
  header.int8_scale = int8_scale;
  header.thresholds_stored =
      options.threshold != IndexThreshold::zero && !thresholds.empty() ? options.dims : 0;
  header.code_bytes = code_bytes;
  header.vector_bytes = vector_bytes;
  header.payload_bytes = index::payload_size(header).value_or(0);  // fits: the rows are in memory

  index::AtomicFileWriter writer(path);
  FERRY_RETURN_IF_ERROR(writer.open());
  if (header.thresholds_stored != 0) {
    FERRY_RETURN_IF_ERROR(writer.write(std::as_bytes(std::span(thresholds))));
  }
  std::vector<std::byte> host;
  auto write_rows = [&](const index::SegmentStore& store) -> Status {
    const std::uint64_t row_bytes = store.row_bytes();
    const std::uint64_t step = io_rows(options, row_bytes);
    for (const index::SegmentPiece& piece : store.pieces(0, rows)) {
      const index::Segment& segment = store.segments()[piece.segment];
      for (std::uint64_t done = 0; done < piece.rows; done += step) {
        const std::uint64_t n = std::min(step, piece.rows - done);
        const std::uint64_t offset = (piece.local_row + done) * row_bytes;
        if (segment.on_device()) {
          host.resize(n * row_bytes);
          FERRY_RETURN_IF_ERROR(
              ferry::download(download, readback_pool, segment.device, offset, host));
          FERRY_RETURN_IF_ERROR(writer.write(host));
        } else {
          FERRY_RETURN_IF_ERROR(
              writer.write(segment.host_bytes(row_bytes).subspan(offset, n * row_bytes)));
        }
      }
    }
    return Status();
  };
  FERRY_RETURN_IF_ERROR(write_rows(codes));
  if (vector_bytes != 0) FERRY_RETURN_IF_ERROR(write_rows(vectors));
  header.payload_crc = writer.payload_crc();
  std::array<std::byte, index::kHeaderBytes> bytes{};
  index::encode_header(header, bytes);
  return writer.finish(bytes);
}

Status BinaryIndex::State::load_payload(index::FileReader& reader, const index::FileHeader& header) {
  FERRY_RETURN_IF_ERROR(codes.reserve(device, header.rows, "codes"));
  if (vector_bytes != 0) FERRY_RETURN_IF_ERROR(vectors.reserve(device, header.rows, "kept vectors"));
  index::SubmittedWork submitted;
  std::vector<std::byte> host;
  const RowSource read = [&](std::uint64_t bytes) -> Result<std::span<const std::byte>> {
    host.resize(bytes);
    FERRY_RETURN_IF_ERROR(reader.read(host, true));
    return std::span<const std::byte>(host);
  };
  auto read_rows = [&](const index::SegmentStore& store) {
    return store_rows(store, 0, header.rows, read, submitted);
  };
  Status status = read_rows(codes);
  if (status.ok() && vector_bytes != 0) status = read_rows(vectors);
  if (!status.ok()) {
    submitted.settle();
    return status;
  }
  FERRY_RETURN_IF_ERROR(submitted.wait());
  if (reader.payload_crc() != header.payload_crc) {
    return Status(ErrorCode::invalid_argument,
                  "corrupted payload: its CRC-32C is " + std::to_string(reader.payload_crc()) +
                      ", the header says " + std::to_string(header.payload_crc));
  }
  rows = header.rows;
  int8_scale = header.int8_scale;
  return Status();
}

}  // namespace ferry
