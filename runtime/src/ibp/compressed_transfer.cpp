// Compressed transfers (ferry/ibp_transfer.hpp): the stream's pieces, the uploads and downloads
// around the ibp_decode / ibp_encode ops.
#include "ferry/ibp_transfer.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "core/checked.hpp"
#include "core/host_view.hpp"
#include "core/state.hpp"
#include "ferry/ops/ibp_decode.hpp"
#include "ferry/ops/ibp_encode.hpp"
#include "ibp/bits.hpp"
#include "ibp/stream.hpp"

namespace ferry::ibp {

namespace {

// The stream's bytes a device needs to decode it: the tables and the row data, not the
// checksum table.
std::uint64_t decoded_prefix(const Layout& layout) { return layout.data_offset + layout.data_bytes; }

// The layout of `stream`, checked: the header always, the whole stream unless `validated`.
Result<Layout> checked_layout(std::span<const std::byte> stream, bool validated,
                              unsigned threads) {
  FERRY_ASSIGN_OR_RETURN(Layout layout, read_layout(stream));
  if (stream.size() < layout.stream_bytes) {
    return Status(ErrorCode::data_corrupt,
                  "the stream is truncated: " + std::to_string(stream.size()) +
                      " bytes, its header says " + std::to_string(layout.stream_bytes));
  }
  if (!validated) FERRY_RETURN_IF_ERROR(validate(stream.first(layout.stream_bytes), threads));
  return layout;
}

// Rows [first_row, first_row + rows) whose bytes are stream[begin, end).
struct Piece {
  std::uint64_t first_row = 0;
  std::uint64_t rows = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// Where row `row` (rows: the end of the row data) begins in the stream. Clamped into the row data
// so that a stream trusted without validation still yields ranges inside it (the device decoder
// checks the rows themselves).
std::uint64_t row_position(std::span<const std::byte> stream, const Layout& layout,
                           std::uint64_t row) {
  const std::uint64_t end = decoded_prefix(layout);
  if (row >= layout.rows) return end;
  const std::byte* tables = stream.data();
  const std::uint64_t group =
      detail::load<std::uint64_t>(tables + layout.group_table_offset + 8 * (row / layout.group_rows));
  const std::uint64_t entry =
      detail::load<std::uint32_t>(tables + layout.row_table_offset + 4 * row) & ~std::uint64_t{3};
  const std::uint64_t within = std::min(group, layout.data_bytes);
  return layout.data_offset + std::min(within + entry, layout.data_bytes);
}

// Pieces of about `piece_bytes` of row data each, ending at row boundaries, covering every row.
std::vector<Piece> plan_pieces(std::span<const std::byte> stream, const Layout& layout,
                               std::uint64_t piece_bytes) {
  std::vector<Piece> pieces;
  std::uint64_t row = 0;
  std::uint64_t begin = row_position(stream, layout, 0);
  while (row < layout.rows) {
    // The last row r in (row, rows] whose start is within piece_bytes of this piece's start.
    std::uint64_t low = row + 1, high = layout.rows;
    while (low < high) {
      const std::uint64_t mid = low + (high - low + 1) / 2;
      if (row_position(stream, layout, mid) - std::min(begin, row_position(stream, layout, mid)) <=
          piece_bytes) {
        low = mid;
      } else {
        high = mid - 1;
      }
    }
    const std::uint64_t end = std::max(begin, row_position(stream, layout, low));
    pieces.push_back({row, low - row, begin, end});
    row = low;
    begin = end;
  }
  pieces.front().begin = 0;  // the first piece carries the tables
  return pieces;
}

Status check_queue(const Queue& queue, const char* call, const char* name) {
  if (!queue) return Status(ErrorCode::released, std::string(call) + ": no " + name);
  return ok_status();
}

// One decode command for rows [first_row, + rows) of the stream in `stream_buffer`.
Status record_decode(CommandList& commands, const Layout& layout, const BufferRef& stream_buffer,
                     std::uint64_t first_row, std::uint64_t rows, const BufferRef& dst,
                     std::uint64_t dst_offset) {
  IbpDecodeParams params;
  params.layout = layout;
  params.rows = IbpDecodeRows::range;
  params.first_row = first_row;
  params.row_count = rows;
  IbpDecodeBuffers buffers;
  buffers.stream = stream_buffer;
  buffers.output = dst;
  // Within dst_offset + the tensor's raw bytes, which check_output found inside dst.
  buffers.output_offset = dst_offset + first_row * layout.row_elements * layout.element_size;
  buffers.status = stream_buffer;
  buffers.status_offset = device_stream_bytes(layout.stream_bytes) - 8;
  return ibp_decode(commands, buffers, params);
}

Status check_output(const Layout& layout, const BufferRef& dst, std::uint64_t dst_offset,
                    const char* call) {
  if (dst_offset % layout.element_size != 0) {
    return Status(ErrorCode::invalid_argument,
                  std::string(call) + ": dst_offset " + std::to_string(dst_offset) +
                      " is not a multiple of the element size " +
                      std::to_string(layout.element_size));
  }
  if (!ferry::detail::range_within(dst_offset, layout.raw_bytes(), dst.size)) {
    return Status(ErrorCode::out_of_range,
                  std::string(call) + ": the tensor's " + std::to_string(layout.raw_bytes()) +
                      " bytes from dst_offset " + std::to_string(dst_offset) +
                      " do not fit the " + std::to_string(dst.size) + "-byte " + dst.what);
  }
  return ok_status();
}

Status check_stream_buffer(const Layout& layout, const BufferRef& stream_buffer,
                           const char* call) {
  const std::uint64_t need = device_stream_bytes(layout.stream_bytes);
  if (stream_buffer.size < need) {
    return Status(ErrorCode::out_of_range,
                  std::string(call) + ": stream_buffer holds " +
                      std::to_string(stream_buffer.size) + " bytes; this stream needs " +
                      std::to_string(need) + " (device_stream_bytes)");
  }
  return ok_status();
}

// The staged upload once the stream's bytes are known: `send(piece, sync)` submits one piece's
// bytes to stream_buffer on the upload queue.
using SendPiece =
    std::function<Result<TimelinePoint>(const Piece& piece, const SubmitSync& piece_sync)>;

Result<TimelinePoint> upload_pieces(const Queue& upload_queue, const Queue& compute_queue,
                                    std::span<const std::byte> stream, const Layout& layout,
                                    const BufferRef& stream_buffer, const BufferRef& dst,
                                    std::uint64_t dst_offset, const SubmitSync& sync,
                                    const CompressedTransferOptions& options,
                                    const SendPiece& send, const char* call) {
  FERRY_RETURN_IF_ERROR(check_queue(upload_queue, call, "upload queue"));
  FERRY_RETURN_IF_ERROR(check_queue(compute_queue, call, "compute queue"));
  FERRY_RETURN_IF_ERROR(check_stream_buffer(layout, stream_buffer, call));
  FERRY_RETURN_IF_ERROR(check_output(layout, dst, dst_offset, call));
  if (options.piece_bytes == 0) {
    return Status(ErrorCode::invalid_argument, std::string(call) + ": piece_bytes must be > 0");
  }
  const std::vector<Piece> pieces = plan_pieces(stream, layout, options.piece_bytes);
  // Every decode is recorded before anything is submitted: an argument error leaves every
  // timeline as it was.
  std::vector<CommandList> decodes(pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    Status recorded = record_decode(decodes[i], layout, stream_buffer, pieces[i].first_row,
                                    pieces[i].rows, dst, dst_offset);
    if (!recorded.ok()) return recorded.with_context(call);
  }
  TimelinePoint decoded;
  TimelinePoint landed;  // the last piece's bytes on the device
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const bool last = i + 1 == pieces.size();
    auto step = [&]() -> Status {
      SubmitSync decode_sync;
      if (pieces[i].end > pieces[i].begin) {
        SubmitSync piece_sync;
        if (i == 0) piece_sync.wait = sync.wait;  // later pieces follow in queue order
        FERRY_ASSIGN_OR_RETURN(landed, send(pieces[i], piece_sync));
        decode_sync.wait.push_back(landed);
      } else if (landed.timeline) {
        decode_sync.wait.push_back(landed);  // rows of no bytes (every bit invariant)
      } else {
        decode_sync.wait = sync.wait;
      }
      if (last) decode_sync.signal = sync.signal;
      FERRY_ASSIGN_OR_RETURN(decoded, compute_queue.submit(std::move(decodes[i]), decode_sync));
      return ok_status();
    };
    if (Status status = step(); !status.ok()) {
      status.with_context(std::string(call) + ": piece " + std::to_string(i + 1) + " of " +
                          std::to_string(pieces.size()));
      if (i > 0) ferry::detail::fail_points(sync.signal, status);
      return status;
    }
  }
  return decoded;
}

}  // namespace

std::uint64_t device_stream_bytes(std::uint64_t stream_bytes) noexcept {
  return (stream_bytes + 7) / 8 * 8 + 8;
}

Result<TimelinePoint> upload_decoded(const Queue& upload_queue, const Queue& compute_queue,
                                     const StagingPool& pool, std::span<const std::byte> stream,
                                     const BufferRef& stream_buffer, const BufferRef& dst,
                                     std::uint64_t dst_offset, const SubmitSync& sync,
                                     const CompressedTransferOptions& options) {
  static constexpr const char* kCall = "ferry::ibp::upload_decoded";
  Result<Layout> layout = checked_layout(stream, options.validated, options.transfer.host_threads);
  if (!layout.ok()) return layout.status().with_context(kCall);
  auto send = [&](const Piece& piece, const SubmitSync& piece_sync) {
    return upload(upload_queue, pool, stream.subspan(piece.begin, piece.end - piece.begin),
                  stream_buffer, piece.begin, piece_sync, options.transfer);
  };
  return upload_pieces(upload_queue, compute_queue, stream, *layout, stream_buffer, dst,
                       dst_offset, sync, options, send, kCall);
}

Result<TimelinePoint> upload_decoded(const Queue& upload_queue, const Queue& compute_queue,
                                     const BufferRef& pinned_stream,
                                     const BufferRef& stream_buffer, const BufferRef& dst,
                                     std::uint64_t dst_offset, const SubmitSync& sync,
                                     const CompressedTransferOptions& options) {
  static constexpr const char* kCall = "ferry::ibp::upload_decoded (pinned)";
  Result<std::span<std::byte>> view = ferry::detail::host_view(pinned_stream);
  if (!view.ok()) return view.status().with_context(std::string(kCall) + ": pinned_stream");
  Result<Layout> layout = checked_layout(*view, options.validated, options.transfer.host_threads);
  if (!layout.ok()) return layout.status().with_context(kCall);
  auto send = [&](const Piece& piece, const SubmitSync& piece_sync) -> Result<TimelinePoint> {
    CommandList copy;
    FERRY_RETURN_IF_ERROR(copy.copy(pinned_stream, piece.begin, stream_buffer, piece.begin,
                                    piece.end - piece.begin));
    return upload_queue.submit(std::move(copy), piece_sync);
  };
  return upload_pieces(upload_queue, compute_queue, *view, *layout, stream_buffer, dst,
                       dst_offset, sync, options, send, kCall);
}

Result<TimelinePoint> decode_from_host(const Queue& compute_queue, const BufferRef& pinned_stream,
                                       const BufferRef& dst, std::uint64_t dst_offset,
                                       const SubmitSync& sync,
                                       const CompressedTransferOptions& options) {
  static constexpr const char* kCall = "ferry::ibp::decode_from_host";
  FERRY_RETURN_IF_ERROR(check_queue(compute_queue, kCall, "compute queue"));
  Result<std::span<std::byte>> view = ferry::detail::host_view(pinned_stream);
  if (!view.ok()) return view.status().with_context(std::string(kCall) + ": pinned_stream");
  Result<Layout> layout = checked_layout(*view, options.validated, options.transfer.host_threads);
  if (!layout.ok()) return layout.status().with_context(kCall);
  FERRY_RETURN_IF_ERROR(check_stream_buffer(*layout, pinned_stream, kCall));
  FERRY_RETURN_IF_ERROR(check_output(*layout, dst, dst_offset, kCall));
  CommandList commands;
  Status recorded =
      record_decode(commands, *layout, pinned_stream, 0, layout->rows, dst, dst_offset);
  if (!recorded.ok()) return recorded.with_context(kCall);
  return compute_queue.submit(std::move(commands), sync);
}

Result<std::vector<std::byte>> download_encoded(const Queue& compute_queue,
                                                const Queue& download_queue,
                                                const StagingPool& pool, const BufferRef& src,
                                                std::uint64_t src_offset,
                                                const EncodeParams& params,
                                                const BufferRef& stream_buffer,
                                                const SubmitSync& sync,
                                                const TransferOptions& transfer) {
  static constexpr const char* kCall = "ferry::ibp::download_encoded";
  FERRY_RETURN_IF_ERROR(check_queue(compute_queue, kCall, "compute queue"));
  FERRY_RETURN_IF_ERROR(check_queue(download_queue, kCall, "download queue"));
  CommandList encode;
  IbpEncodeBuffers buffers;
  buffers.input = src;
  buffers.input_offset = src_offset;
  buffers.stream = stream_buffer;
  if (Status recorded = ibp_encode(encode, buffers, params); !recorded.ok()) {
    return recorded.with_context(kCall);
  }
  SubmitSync encode_sync;
  encode_sync.wait = sync.wait;
  FERRY_ASSIGN_OR_RETURN(TimelinePoint encoded, compute_queue.submit(std::move(encode), encode_sync));
  // From here on the caller's signals must learn of a failure.
  auto rest = [&]() -> Result<std::vector<std::byte>> {
    std::vector<std::byte> stream(kHeaderBytes);
    SubmitSync header_sync;
    header_sync.wait.push_back(encoded);
    FERRY_RETURN_IF_ERROR(download(download_queue, pool, stream_buffer, 0, stream, header_sync,
                                   transfer));
    FERRY_ASSIGN_OR_RETURN(const Layout layout, read_layout(stream));
    stream.resize(layout.stream_bytes);
    SubmitSync body_sync;
    body_sync.signal = sync.signal;
    FERRY_RETURN_IF_ERROR(download(download_queue, pool, stream_buffer, kHeaderBytes,
                                   std::span(stream).subspan(kHeaderBytes), body_sync, transfer));
    return stream;
  };
  Result<std::vector<std::byte>> stream = rest();
  if (!stream.ok()) {
    ferry::detail::fail_points(sync.signal, stream.status());
    return stream.status().with_context(kCall);
  }
  return stream;
}

Result<IngressTransform> decode_transform(const EncodeParams& shape, bool validated) {
  static constexpr const char* kCall = "ferry::ibp::decode_transform";
  if (shape.group_rows == 0) {
    return Status(ErrorCode::invalid_argument,
                  std::string(kCall) + ": group_rows must be >= 1 (batches have one shape)");
  }
  Result<std::uint64_t> largest = max_stream_bytes(shape);
  if (!largest.ok()) return largest.status().with_context(kCall);
  // The largest layout of the shape (every row raw): what the pipeline's probe records at
  // creation.
  Result<Layout> worst = detail::layout_for(shape, 0);
  if (worst.ok()) worst = detail::layout_for(shape, detail::max_data_bytes(*worst));
  if (!worst.ok()) return worst.status().with_context(kCall);
  std::byte header[kHeaderBytes];
  worst->header_crc = detail::write_header(*worst, header);  // as read_layout would find it
  // The layout `inspect` read, for `record`, per producer thread (one per pipeline).
  struct Batches {
    std::mutex mutex;
    std::map<std::thread::id, Layout> current;
  };
  auto batches = std::make_shared<Batches>();
  IngressTransform transform;
  transform.name = "ibp_decode";
  transform.input_bytes = device_stream_bytes(*largest);
  transform.output_bytes = worst->raw_bytes();
  transform.inspect = [batches, shape, validated](
                          std::span<const std::byte> batch) -> Result<std::uint64_t> {
    FERRY_ASSIGN_OR_RETURN(const Layout layout,
                           checked_layout(batch, validated, shape.threads));
    if (layout.element_size != shape.element_size || layout.row_elements != shape.row_elements ||
        layout.elements != shape.elements || layout.group_rows != shape.group_rows) {
      return Status(ErrorCode::invalid_argument,
                    "the batch's stream has element_size " +
                        std::to_string(layout.element_size) + ", row_elements " +
                        std::to_string(layout.row_elements) + ", elements " +
                        std::to_string(layout.elements) + ", group_rows " +
                        std::to_string(layout.group_rows) + "; the transform's shape has " +
                        std::to_string(shape.element_size) + ", " +
                        std::to_string(shape.row_elements) + ", " +
                        std::to_string(shape.elements) + ", " + std::to_string(shape.group_rows));
    }
    std::lock_guard lock(batches->mutex);
    batches->current[std::this_thread::get_id()] = layout;
    return decoded_prefix(layout);
  };
  transform.record = [batches, worst = *worst](CommandList& commands, const BufferRef& input,
                                               const BufferRef& output) -> Status {
    Layout layout = worst;
    {
      std::lock_guard lock(batches->mutex);
      if (auto found = batches->current.find(std::this_thread::get_id());
          found != batches->current.end()) {
        layout = found->second;
      }
    }
    return record_decode(commands, layout, input, 0, layout.rows, output, 0);
  };
  return transform;
}

}  // namespace ferry::ibp
