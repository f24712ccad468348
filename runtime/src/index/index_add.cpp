// BinaryIndex::add: rows go through the upload staging pool in steps of a slab, are quantized on
// the device into the code segments, and their kept vectors are copied to theirs. Two device
// input buffers alternate, so the upload of step i + 1 overlaps the quantization of step i; the
// queues' progress points order the reuse. Nothing is committed (row count, thresholds, scale)
// until every step has completed; an add that fails gives back the segments it allocated.
// BinaryIndex::add_codes puts the codes in place as they are (store_rows, which load shares).
#include <algorithm>
#include <cstring>
#include <deque>
#include <string>

#include "core/checked.hpp"
#include "core/host_workers.hpp"
#include "ferry/ops/binary_quantize.hpp"
#include "ferry/transfer.hpp"
#include "index/host_vectors.hpp"
#include "index/index_state.hpp"

namespace ferry {
namespace {

using index::SegmentPiece;

// Codes quantized into a work buffer for a host segment: downloaded into a readback lease, then
// copied to the segment once the download has completed.
struct PendingCodes {
  Lease lease;
  TimelinePoint done;
  std::byte* destination = nullptr;
};

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  detail::parallel_memcpy(dst, src, bytes, detail::host_worker_count() + 1);
}

Status finish_oldest(std::deque<PendingCodes>& pending) {
  PendingCodes& oldest = pending.front();
  FERRY_RETURN_IF_ERROR(oldest.done.wait());
  copy_to_host(oldest.destination, oldest.lease.data().data(), oldest.lease.size());
  pending.pop_front();
  return Status();
}

// A readback lease; while the pool is full of our own pending downloads, finish the oldest
// first (waiting for a lease we hold ourselves would never end).
Result<Lease> readback_lease(const StagingPool& pool, std::uint64_t bytes,
                             std::deque<PendingCodes>& pending) {
  Result<Lease> lease = pool.try_acquire(bytes);
  while (!lease.ok() && lease.status().code() == ErrorCode::timeout && !pending.empty()) {
    FERRY_RETURN_IF_ERROR(finish_oldest(pending));
    lease = pool.try_acquire(bytes);
  }
  if (!lease.ok() && lease.status().code() == ErrorCode::timeout) lease = pool.acquire(bytes);
  return lease;
}

}  // namespace

Result<std::uint64_t> BinaryIndex::State::add(std::span<const std::byte> rows_in,
                                              std::uint64_t count) {
  const std::uint64_t first = rows;
  if (!detail::checked_add(first, count)) {
    return Status(ErrorCode::invalid_argument, "the row count would pass 2^64");
  }
  const std::size_t code_segments = codes.segments().size();
  const std::size_t vector_segments = vectors.segments().size();

  // What the first add fixes: mean thresholds, the int8 scale. Committed only with the rows.
  std::vector<float> new_thresholds = thresholds;
  float scale = int8_scale;
  const bool need_mean = options.threshold == IndexThreshold::first_add_mean && thresholds.empty();
  const bool need_scale = options.keep == KeptVectors::int8 && scale == 0.0f;
  if (need_mean || need_scale) {
    index::FirstAddValues fixed =
        index::first_add_values(options, rows_in, count, need_mean, need_scale);
    if (need_mean) new_thresholds = std::move(fixed.thresholds);
    if (need_scale) scale = fixed.int8_scale;
  }

  index::SubmittedWork submitted;
  Status status;
  if (need_mean) status = upload_thresholds(new_thresholds);
  if (status.ok()) status = add_rows(rows_in, first, count, scale, submitted);
  submitted.settle();
  if (!status.ok()) {
    codes.truncate(code_segments);
    vectors.truncate(vector_segments);
    return status;
  }
  codes.commit();
  vectors.commit();
  rows = first + count;
  thresholds = std::move(new_thresholds);
  int8_scale = scale;
  return first;
}

Result<std::uint64_t> BinaryIndex::State::add_codes(std::span<const std::byte> codes_in,
                                                    std::uint64_t count) {
  const std::uint64_t first = rows;
  if (!detail::checked_add(first, count)) {
    return Status(ErrorCode::invalid_argument, "the row count would pass 2^64");
  }
  const std::size_t code_segments = codes.segments().size();
  index::SubmittedWork submitted;
  std::uint64_t taken = 0;
  const RowSource next = [&](std::uint64_t bytes) -> Result<std::span<const std::byte>> {
    const std::span<const std::byte> step = codes_in.subspan(taken, bytes);
    taken += bytes;
    return step;
  };
  Status status = reserve_rows(first + count, false, submitted);
  if (status.ok()) status = store_rows(codes, first, count, next, submitted);
  if (status.ok()) {
    status = submitted.wait();
  } else {
    submitted.settle();
  }
  if (!status.ok()) {
    codes.truncate(code_segments);
    return status;
  }
  codes.commit();
  rows = first + count;
  return first;
}

Status BinaryIndex::State::reserve_rows(std::uint64_t end, bool keep,
                                        index::SubmittedWork& submitted) {
  CommandList regrown;
  FERRY_RETURN_IF_ERROR(codes.reserve(device, end, "codes", &regrown));
  if (keep) FERRY_RETURN_IF_ERROR(vectors.reserve(device, end, "kept vectors", &regrown));
  if (regrown.empty()) return Status();
  // The rows a segment held, copied into its larger buffer; the add writes only rows past them.
  FERRY_ASSIGN_OR_RETURN(const TimelinePoint copied, compute.submit(std::move(regrown)));
  submitted.note(QueueKind::compute, copied);
  return Status();
}

Status BinaryIndex::State::store_rows(const index::SegmentStore& store, std::uint64_t first,
                                      std::uint64_t count, const RowSource& next,
                                      index::SubmittedWork& submitted) {
  const std::uint64_t row_bytes = store.row_bytes();
  const std::uint64_t step = std::max<std::uint64_t>(1, options.memory.staging_slab_bytes / row_bytes);
  for (const SegmentPiece& piece : store.pieces(first, count)) {
    const index::Segment& segment = store.segments()[piece.segment];
    for (std::uint64_t done = 0; done < piece.rows; done += step) {
      const std::uint64_t n = std::min(step, piece.rows - done);
      const std::uint64_t offset = (piece.local_row + done) * row_bytes;
      FERRY_ASSIGN_OR_RETURN(const std::span<const std::byte> bytes, next(n * row_bytes));
      if (segment.on_device()) {
        // Returns once the bytes are in the pool: the source can take the next step.
        FERRY_ASSIGN_OR_RETURN(TimelinePoint uploaded,
                               ferry::upload(upload, upload_pool, bytes, segment.device, offset));
        submitted.note(QueueKind::upload, uploaded);
      } else {
        copy_to_host(segment.host_bytes(row_bytes).data() + offset, bytes.data(), bytes.size());
      }
    }
  }
  return Status();
}

Status BinaryIndex::State::add_rows(std::span<const std::byte> rows_in, std::uint64_t first,
                                    std::uint64_t count, float scale,
                                    index::SubmittedWork& submitted) {
  const std::uint64_t end = first + count;
  const bool keep = options.keep != KeptVectors::none;
  FERRY_RETURN_IF_ERROR(reserve_rows(end, keep, submitted));

  const std::uint32_t dims = options.dims;
  const std::uint64_t raw_row = input_row_bytes();
  const std::uint64_t device_row = device_row_bytes();
  const bool float_rows = index::device_rows_are_float32(options);
  const bool host_values = float_rows || options.keep == KeptVectors::int8;
  const std::uint64_t step = step_rows();
  const bool any_host_codes = codes.device_capacity() < end;

  std::array<BufferRef, 2> input{BufferRef(Buffer()), BufferRef(Buffer())};
  std::array<BufferRef, 2> temp_codes{BufferRef(Buffer()), BufferRef(Buffer())};
  for (std::size_t slot = 0; slot < 2; ++slot) {
    FERRY_ASSIGN_OR_RETURN(input[slot], work.input[slot].at_least(device, step * device_row,
                                                                  "rows to quantize"));
    if (any_host_codes) {
      FERRY_ASSIGN_OR_RETURN(temp_codes[slot], work.codes[slot].at_least(device, step * code_bytes,
                                                                          "codes for the host"));
    }
  }
  const BufferRef thresholds_ref =
      thresholds_buffer ? BufferRef(thresholds_buffer) : BufferRef(Buffer());
  BinaryQuantizeParams quantize;
  quantize.dims = dims;
  quantize.input_type = index::device_row_type(options);
  if (thresholds_buffer) quantize.thresholds.buffer = &thresholds_ref;

  std::array<TimelinePoint, 2> input_read, codes_read;  // the last use of each slot
  std::deque<PendingCodes> pending;
  std::vector<float> values;
  std::vector<std::int8_t> int8_rows;
  std::uint64_t step_index = 0;

  for (std::uint64_t at = first; at < end; ++step_index) {
    // A step stays within one code segment and one vector segment.
    const SegmentPiece code_piece = codes.pieces(at, std::min(step, end - at)).front();
    std::uint64_t n = code_piece.rows;
    SegmentPiece vector_piece{};
    if (keep) {
      vector_piece = vectors.pieces(at, n).front();
      n = vector_piece.rows;
    }
    const std::size_t slot = step_index % 2;
    const std::byte* raw = rows_in.data() + (at - first) * raw_row;
    if (host_values) {
      values.resize(n * dims);
      for (std::uint64_t r = 0; r < n; ++r) {
        index::row_values(options, raw + r * raw_row, std::span(values).subspan(r * dims, dims));
      }
    }
    const std::byte* device_rows =
        float_rows ? reinterpret_cast<const std::byte*>(values.data()) : raw;

    // Upload: the rows into the slot's input buffer, once its last quantization has read it.
    FERRY_ASSIGN_OR_RETURN(Lease lease, upload_pool.acquire(n * device_row));
    copy_to_host(lease.data().data(), device_rows, n * device_row);
    CommandList upload_commands;
    FERRY_RETURN_IF_ERROR(upload_commands.copy(lease, 0, input[slot], 0, n * device_row));
    SubmitSync upload_sync;
    if (input_read[slot].timeline) upload_sync.wait.push_back(input_read[slot]);
    FERRY_ASSIGN_OR_RETURN(TimelinePoint uploaded,
                           upload.submit(std::move(upload_commands), upload_sync));
    submitted.note(QueueKind::upload, uploaded);
    lease.release();  // back to the pool once the copy has completed

    // Quantize into the code segment, or into the slot's work buffer for a host segment.
    const index::Segment& code_segment = codes.segments()[code_piece.segment];
    CommandList compute_commands;
    quantize.rows = static_cast<std::uint32_t>(n);
    if (code_segment.on_device()) {
      FERRY_RETURN_IF_ERROR(binary_quantize(compute_commands, input[slot], 0, code_segment.device,
                                            code_piece.local_row * code_bytes, quantize));
    } else {
      FERRY_RETURN_IF_ERROR(
          binary_quantize(compute_commands, input[slot], 0, temp_codes[slot], 0, quantize));
    }
    const index::Segment* vector_segment = keep ? &vectors.segments()[vector_piece.segment] : nullptr;
    const std::uint64_t vector_at = vector_piece.local_row * vector_bytes;
    if (options.keep == KeptVectors::float32 && vector_segment->on_device()) {
      // The float32 rows are already on the device: the slot's input.
      FERRY_RETURN_IF_ERROR(compute_commands.copy(input[slot], 0, vector_segment->device,
                                                  vector_at, n * vector_bytes));
    }
    SubmitSync compute_sync;
    compute_sync.wait.push_back(uploaded);
    if (!code_segment.on_device() && codes_read[slot].timeline) {
      compute_sync.wait.push_back(codes_read[slot]);
    }
    FERRY_ASSIGN_OR_RETURN(input_read[slot],
                           compute.submit(std::move(compute_commands), compute_sync));
    submitted.note(QueueKind::compute, input_read[slot]);

    if (!code_segment.on_device()) {
      FERRY_ASSIGN_OR_RETURN(Lease codes_lease, readback_lease(readback_pool, n * code_bytes, pending));
      CommandList download_commands;
      FERRY_RETURN_IF_ERROR(download_commands.copy(temp_codes[slot], 0, codes_lease, 0,
                                                   n * code_bytes));
      SubmitSync download_sync;
      download_sync.wait.push_back(input_read[slot]);
      FERRY_ASSIGN_OR_RETURN(codes_read[slot],
                             download.submit(std::move(download_commands), download_sync));
      submitted.note(QueueKind::download, codes_read[slot]);
      std::byte* destination =
          code_segment.host_bytes(code_bytes).data() + code_piece.local_row * code_bytes;
      pending.push_back({std::move(codes_lease), codes_read[slot], destination});
    }

    // Kept vectors that are not copied on the device above.
    if (keep) {
      std::byte* host = vector_segment->on_device()
                            ? nullptr
                            : vector_segment->host_bytes(vector_bytes).data() + vector_at;
      if (options.keep == KeptVectors::float32) {
        if (host != nullptr) copy_to_host(host, device_rows, n * vector_bytes);
      } else {
        int8_rows.resize(n * dims);
        for (std::uint64_t r = 0; r < n; ++r) {
          index::quantize_int8(std::span(values).subspan(r * dims, dims), scale,
                               int8_rows.data() + r * dims);
        }
        if (host != nullptr) {
          copy_to_host(host, int8_rows.data(), n * vector_bytes);
        } else {
          FERRY_ASSIGN_OR_RETURN(Lease int8_lease, upload_pool.acquire(n * vector_bytes));
          copy_to_host(int8_lease.data().data(), int8_rows.data(), n * vector_bytes);
          CommandList commands;
          FERRY_RETURN_IF_ERROR(commands.copy(int8_lease, 0, vector_segment->device, vector_at,
                                              n * vector_bytes));
          FERRY_ASSIGN_OR_RETURN(TimelinePoint copied, upload.submit(std::move(commands)));
          submitted.note(QueueKind::upload, copied);
        }
      }
    }
    at += n;
  }
  while (!pending.empty()) FERRY_RETURN_IF_ERROR(finish_oldest(pending));
  return submitted.wait();
}

index::StateMark BinaryIndex::State::mark() const {
  return {rows, codes.segments().size(), vectors.segments().size(), thresholds, int8_scale};
}

void BinaryIndex::State::restore(const index::StateMark& mark) {
  // Rows past `rows` are never read, so dropping the segments made since is enough.
  rows = mark.rows;
  codes.truncate(mark.code_segments);
  vectors.truncate(mark.vector_segments);
  thresholds = mark.thresholds;
  int8_scale = mark.int8_scale;
}

index::FirstAddValues index::first_add_values(const BinaryIndexOptions& options,
                                              std::span<const std::byte> rows,
                                              std::uint64_t count, bool need_mean,
                                              bool need_scale) {
  const std::uint64_t row_bytes = std::uint64_t{options.dims} * element_size(options.input_type);
  MeanAccumulator mean(options.dims);
  double max_abs = 0.0;
  std::vector<float> values(options.dims);
  for (std::uint64_t r = 0; r < count; ++r) {
    row_values(options, rows.data() + r * row_bytes, values);
    if (need_mean) mean.add(values);
    if (need_scale) max_abs = max_abs_finite(values, max_abs);
  }
  FirstAddValues fixed;
  if (need_mean) fixed.thresholds = mean.means();
  if (need_scale) fixed.int8_scale = int8_scale_for(max_abs);
  return fixed;
}

}  // namespace ferry
