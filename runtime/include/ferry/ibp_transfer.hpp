// Compressed transfers: IBP streams (ferry/ibp.hpp) cross the bus in their small form and are
// decoded (ibp_decode) or encoded (ibp_encode) on the device.
//
//   upload_decoded    host stream -> device tensor: the stream's tables, then its row data in
//                     pieces on the upload queue, each piece decoded on the compute queue as soon
//                     as it has landed, while the next one is on the bus. From pageable memory
//                     (through a staging pool) or from pinned memory (DMA, no staging copy).
//   decode_from_host  pinned stream -> device tensor, zero-copy: the decoder reads the stream
//                     over the bus itself; no device copy of the stream.
//   download_encoded  device tensor -> host stream: encoded on the device, only the stream's
//                     bytes downloaded.
//   decode_transform  an IngressTransform: every batch of an IngressPipeline is one stream.
//
// A stream from outside is checked on the host first (ferry::ibp::validate: O(size), host
// threads) unless the caller says it already did; a stream that fails is data_corrupt and nothing
// is submitted. Errors otherwise as upload()/download() (ferry/transfer.hpp): an argument error
// returns before anything is submitted; a failure after part of the work was submitted fails the
// caller's signals.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ferry/ibp.hpp"
#include "ferry/ingress.hpp"
#include "ferry/queue.hpp"
#include "ferry/status.hpp"
#include "ferry/transfer.hpp"

namespace ferry::ibp {

struct CompressedTransferOptions {
  // Row data per decode: pieces end at row boundaries (a longer row is a piece of its own).
  std::uint64_t piece_bytes = 8ull << 20;
  // The caller has validated these bytes (a stream it encoded, or checked once after reading).
  bool validated = false;
  TransferOptions transfer;  // pool chunking and host threads for pageable memory
};

// The device memory a stream needs to be decoded from or encoded into: its bytes rounded up to 8,
// then the decoder's status word (8 bytes).
std::uint64_t device_stream_bytes(std::uint64_t stream_bytes) noexcept;

// Host stream -> dst[dst_offset, + the tensor's raw bytes). stream_buffer: device memory of at
// least device_stream_bytes(stream.size()) bytes the stream lands in (reusable once the returned
// point is reached). The first piece waits for sync.wait; sync.signal is set when the tensor is
// decoded. Returns once everything is submitted (pageable `stream` may be reused then), with the
// point at which dst holds the tensor.
Result<TimelinePoint> upload_decoded(const Queue& upload_queue, const Queue& compute_queue,
                                     const StagingPool& pool, std::span<const std::byte> stream,
                                     const BufferRef& stream_buffer, const BufferRef& dst,
                                     std::uint64_t dst_offset, const SubmitSync& sync = {},
                                     const CompressedTransferOptions& options = {});
// The same from pinned memory: `pinned_stream` (a Lease or a host_upload Buffer) holds the stream
// from its start; it must stay unchanged until the returned point.
Result<TimelinePoint> upload_decoded(const Queue& upload_queue, const Queue& compute_queue,
                                     const BufferRef& pinned_stream,
                                     const BufferRef& stream_buffer, const BufferRef& dst,
                                     std::uint64_t dst_offset, const SubmitSync& sync = {},
                                     const CompressedTransferOptions& options = {});

// Zero-copy: the compute queue decodes `pinned_stream` (a Lease or host_upload Buffer holding the
// stream from its start, followed by 8 bytes for the status word: device_stream_bytes in all)
// reading it over the bus.
Result<TimelinePoint> decode_from_host(const Queue& compute_queue, const BufferRef& pinned_stream,
                                       const BufferRef& dst, std::uint64_t dst_offset,
                                       const SubmitSync& sync = {},
                                       const CompressedTransferOptions& options = {});

// src[src_offset, + the tensor's bytes) -> its stream, encoded on the compute queue into
// stream_buffer (device memory, device_stream_bytes(max_stream_bytes(params)) bytes) and
// downloaded through `pool` (a host_readback pool). params.group_rows must be >= 1. The first
// step waits for sync.wait; sync.signal is set when the stream is on the host.
Result<std::vector<std::byte>> download_encoded(const Queue& compute_queue,
                                                const Queue& download_queue,
                                                const StagingPool& pool, const BufferRef& src,
                                                std::uint64_t src_offset,
                                                const EncodeParams& params,
                                                const BufferRef& stream_buffer,
                                                const SubmitSync& sync = {},
                                                const TransferOptions& transfer = {});

// An IngressPipeline transform whose batches are IBP streams of tensors shaped like `shape`
// (element_size, row_elements, elements, group_rows >= 1): input_bytes is the largest such
// stream plus the status word, output_bytes the tensor's raw bytes. A batch may be shorter than
// input_bytes (only its stream is uploaded); one of another shape, or one that fails validation
// (unless `validated`), is that batch's error.
Result<IngressTransform> decode_transform(const EncodeParams& shape, bool validated = false);

}  // namespace ferry::ibp
