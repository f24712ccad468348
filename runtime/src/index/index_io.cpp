// Index files (index_file.hpp has the format) written from and read into one or more states:
// BinaryIndex's save and load, and ShardedIndex's, whose file is that of one index of every row.
// Rows move in steps of a staging slab: device segments through the state's readback pool
// (save) or upload pool (load, store_rows), host segments straight from or into their memory.
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "ferry/transfer.hpp"
#include "index/index_checks.hpp"
#include "index/index_file.hpp"
#include "index/index_state.hpp"

namespace ferry::index {
namespace {

// Rows per step of a save or load: a staging slab's worth (at least one).
std::uint64_t io_rows(const BinaryIndexOptions& options, std::uint64_t row_bytes) {
  return std::max<std::uint64_t>(1, options.memory.staging_slab_bytes / row_bytes);
}

// The file breaks the format: data_corrupt, as every reader of files says (core/input_file.hpp).
Status corrupt(const std::string& call, const std::string& what) {
  return Status(ErrorCode::data_corrupt, call + ": " + what);
}

// Which of a state's stores a pass over the rows reads or writes.
enum class StoreKind : std::uint8_t { codes, vectors };

const SegmentStore& store_of(const BinaryIndex::State& state, StoreKind which) {
  return which == StoreKind::codes ? state.codes : state.vectors;
}

}  // namespace

Status save_file(const std::filesystem::path& path, const BinaryIndex::State& lead,
                 std::span<const RowRun> runs) {
  const BinaryIndexOptions& options = lead.options;
  FileHeader header;
  header.dims = options.dims;
  header.metric = options.metric;
  header.input_type = options.input_type;
  header.threshold = options.threshold;
  header.keep = options.keep;
  for (const RowRun& run : runs) {
    const std::optional<std::uint64_t> rows = detail::checked_add(header.rows, run.count);
    if (!rows) return Status(ErrorCode::invalid_argument, "more than 2^64 rows");
    header.rows = *rows;
  }
  header.int8_scale = lead.int8_scale;
  header.thresholds_stored =
      options.threshold != IndexThreshold::zero && !lead.thresholds.empty() ? options.dims : 0;
  header.code_bytes = lead.code_bytes;
  header.vector_bytes = lead.vector_bytes;
  const std::optional<std::uint64_t> payload_bytes = payload_size(header);
  if (!payload_bytes) {
    return Status(ErrorCode::invalid_argument, "a payload of more than 2^64 bytes");
  }
  header.payload_bytes = *payload_bytes;

  AtomicFileWriter writer(path);
  FERRY_RETURN_IF_ERROR(writer.open());
  if (header.thresholds_stored != 0) {
    FERRY_RETURN_IF_ERROR(writer.write(std::as_bytes(std::span(lead.thresholds))));
  }
  std::vector<std::byte> host;
  auto write_rows = [&](const RowRun& run, StoreKind which) -> Status {
    const BinaryIndex::State& state = *run.state;
    const SegmentStore& store = store_of(state, which);
    const std::uint64_t row_bytes = store.row_bytes();
    const std::uint64_t step = io_rows(state.options, row_bytes);
    for (const SegmentPiece& piece : store.pieces(run.first, run.count)) {
      const Segment& segment = store.segments()[piece.segment];
      for (std::uint64_t done = 0; done < piece.rows; done += step) {
        const std::uint64_t n = std::min(step, piece.rows - done);
        const std::uint64_t offset = (piece.local_row + done) * row_bytes;
        if (segment.on_device()) {
          host.resize(n * row_bytes);
          FERRY_RETURN_IF_ERROR(
              ferry::download(state.download, state.readback_pool, segment.device, offset, host));
          FERRY_RETURN_IF_ERROR(writer.write(host));
        } else {
          FERRY_RETURN_IF_ERROR(
              writer.write(segment.host_bytes(row_bytes).subspan(offset, n * row_bytes)));
        }
      }
    }
    return Status();
  };
  // The format holds every row's code, then every row's kept vector.
  for (const RowRun& run : runs) FERRY_RETURN_IF_ERROR(write_rows(run, StoreKind::codes));
  if (header.vector_bytes != 0) {
    for (const RowRun& run : runs) FERRY_RETURN_IF_ERROR(write_rows(run, StoreKind::vectors));
  }
  header.payload_crc = writer.payload_crc();
  std::array<std::byte, kHeaderBytes> bytes{};
  encode_header(header, bytes);
  return writer.finish(bytes);
}

Result<FileStart> read_file_start(FileReader& reader, const std::string& call,
                                  const BinaryIndexMemory& memory) {
  FERRY_RETURN_IF_ERROR(reader.open().with_context(call));
  std::array<std::byte, kHeaderBytes> bytes{};
  const auto header_bytes =
      static_cast<std::size_t>(std::min<std::uint64_t>(reader.size(), kHeaderBytes));
  FERRY_RETURN_IF_ERROR(
      reader.read(std::span(bytes).first(header_bytes), false).with_context(call));
  Result<FileHeader> decoded = decode_header(bytes, reader.size());
  if (!decoded.ok()) return decoded.status().with_context(call);
  FileStart start;
  start.header = *decoded;
  const FileHeader& h = start.header;

  BinaryIndexOptions& options = start.options;
  options.dims = h.dims;
  options.metric = h.metric;
  options.input_type = h.input_type;
  options.threshold = h.threshold;
  options.keep = h.keep;
  options.int8_scale = h.keep == KeptVectors::int8 ? h.int8_scale : 0.0f;
  options.memory = memory;
  // Thresholds are stored exactly when the kind has some and they are known (first_add_mean:
  // after the first add).
  const bool thresholds_expected =
      h.threshold == IndexThreshold::given ||
      (h.threshold == IndexThreshold::first_add_mean && h.rows > 0);
  if ((h.thresholds_stored != 0) != thresholds_expected) {
    return corrupt(call, std::string("corrupted header: ") +
                             (h.thresholds_stored != 0 ? "thresholds stored" : "no thresholds") +
                             " for threshold " + std::string(to_string(h.threshold)) + " and " +
                             std::to_string(h.rows) + " rows");
  }
  if (h.keep == KeptVectors::int8 && h.rows > 0 && h.int8_scale == 0.0f) {
    return corrupt(call, "corrupted header: int8 vectors without their scale");
  }
  start.thresholds.resize(h.thresholds_stored);
  FERRY_RETURN_IF_ERROR(
      reader.read(std::as_writable_bytes(std::span(start.thresholds)), true).with_context(call));
  if (h.threshold == IndexThreshold::given) options.thresholds = start.thresholds;
  // Options a header with a matching CRC holds that create() would refuse (a NaN threshold):
  // the file is corrupt. Checked with the default placement, then with the caller's, whose
  // mistakes stay invalid_argument.
  BinaryIndexOptions from_file = options;
  from_file.memory = {};
  if (Status valid = validate_options((call + ": the file's options").c_str(), from_file);
      !valid.ok()) {
    return Status(ErrorCode::data_corrupt, valid.message());
  }
  FERRY_RETURN_IF_ERROR(validate_options(call.c_str(), options));
  return start;
}

Status load_file_rows(FileReader& reader, const FileStart& start,
                      std::span<BinaryIndex::State* const> states,
                      std::span<const std::uint64_t> rows) {
  const FileHeader& header = start.header;
  for (std::size_t i = 0; i < states.size(); ++i) {
    BinaryIndex::State& state = *states[i];
    FERRY_RETURN_IF_ERROR(state.codes.reserve(state.device, rows[i], "codes"));
    if (state.vector_bytes != 0) {
      FERRY_RETURN_IF_ERROR(state.vectors.reserve(state.device, rows[i], "kept vectors"));
    }
  }
  // Per state: its uploads go to its own queues.
  std::vector<SubmittedWork> submitted(states.size());
  std::vector<std::byte> host;
  using RowSource = BinaryIndex::State::RowSource;
  const RowSource read = [&](std::uint64_t bytes) -> Result<std::span<const std::byte>> {
    host.resize(bytes);
    FERRY_RETURN_IF_ERROR(reader.read(host, true));
    return std::span<const std::byte>(host);
  };
  // The file holds every row's code, then every row's kept vector, in the states' order.
  auto read_rows = [&](StoreKind which) -> Status {
    for (std::size_t i = 0; i < states.size(); ++i) {
      FERRY_RETURN_IF_ERROR(
          states[i]->store_rows(store_of(*states[i], which), 0, rows[i], read, submitted[i]));
    }
    return Status();
  };
  Status status = read_rows(StoreKind::codes);
  if (status.ok() && header.vector_bytes != 0) status = read_rows(StoreKind::vectors);
  if (!status.ok()) {
    for (const SubmittedWork& work : submitted) work.settle();
    return status;
  }
  for (std::size_t i = 0; i < states.size(); ++i) {
    Status waited = submitted[i].wait();
    if (!waited.ok()) {
      for (std::size_t j = i + 1; j < states.size(); ++j) submitted[j].settle();
      return waited;
    }
  }
  if (reader.payload_crc() != header.payload_crc) {
    return Status(ErrorCode::data_corrupt,
                  "corrupted payload: its CRC-32C is " + std::to_string(reader.payload_crc()) +
                      ", the header says " + std::to_string(header.payload_crc));
  }
  // Mean thresholds are the only ones State::make could not set (given ones come with the
  // options, zero ones are zeros).
  const bool mean_thresholds =
      header.threshold == IndexThreshold::first_add_mean && !start.thresholds.empty();
  for (std::size_t i = 0; i < states.size(); ++i) {
    BinaryIndex::State& state = *states[i];
    if (mean_thresholds) {
      FERRY_RETURN_IF_ERROR(state.upload_thresholds(start.thresholds));
      state.thresholds = start.thresholds;
    }
    state.rows = rows[i];
    state.int8_scale = header.int8_scale;
  }
  return Status();
}

}  // namespace ferry::index
