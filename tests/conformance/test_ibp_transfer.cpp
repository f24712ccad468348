// Compressed transfers (ferry/ibp_transfer.hpp) on every backend: a tensor encoded on the host
// arrives on the device bit exact through the staged upload (pageable and pinned, many small
// pieces), the zero-copy decode and an IngressPipeline of compressed batches; a tensor encoded on
// the device comes back as the host encoder's bytes; a corrupt stream is refused before anything
// is submitted. The truth is the original tensor and ferry::ibp::encode's bytes.
#include <cstring>
#include <optional>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::BufferRef;
using ferry::ErrorCode;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

namespace {

struct Tensor {
  ferry::ibp::EncodeParams params;
  std::vector<std::byte> bytes;
  std::vector<std::byte> stream;
};

// A tensor that compresses (small integers with a few outliers) of awkward shape: a short last
// row and a short last group.
Tensor make_tensor(std::mt19937_64& rng, std::uint8_t element_size) {
  Tensor t;
  t.params.element_size = element_size;
  t.params.row_elements = ferry_test::uniform(rng, 1, 300);
  const std::uint64_t rows = ferry_test::uniform(rng, 20, 160);
  t.params.elements = rows * t.params.row_elements - ferry_test::uniform(rng, 0, t.params.row_elements - 1);
  t.params.group_rows = static_cast<std::uint32_t>(ferry_test::uniform(rng, 1, 40));
  t.bytes.resize(t.params.elements * element_size);
  for (std::uint64_t i = 0; i < t.params.elements; ++i) {
    std::uint64_t value = rng() % 1000;
    if (rng() % 50 == 0) value = rng();  // an outlier: that element (or row) goes raw
    std::memcpy(t.bytes.data() + i * element_size, &value, element_size);
  }
  t.stream = REQUIRE_VALUE(ferry::ibp::encode(t.bytes, t.params));
  return t;
}

Buffer pinned_with(const ferry::Device& device, std::span<const std::byte> bytes,
                   std::uint64_t size) {
  Buffer buffer = REQUIRE_VALUE(device.create_buffer(size, MemoryKind::host_upload));
  std::span<std::byte> host = REQUIRE_VALUE(buffer.host_span());
  std::memcpy(host.data(), bytes.data(), bytes.size());
  return buffer;
}

void check_device(BackendUnderTest& t, const BufferRef& dst, std::uint64_t offset,
                  std::span<const std::byte> expected) {
  const std::vector<std::byte> back =
      REQUIRE_VALUE(ferry_test::read_bytes(t.device, dst, offset, expected.size()));
  CHECK(std::memcmp(back.data(), expected.data(), expected.size()) == 0);
}

}  // namespace

TEST_CASE("ibp transfer: staged and zero-copy compressed uploads decode bit exact") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    const auto upload_queue = t.device.queue(QueueKind::upload);
    const auto compute = t.device.queue(QueueKind::compute);
    const ferry::StagingPool pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload, 65536, 3)));
    for (std::uint8_t element_size : {1, 2, 4, 8}) {
      const Tensor tensor = make_tensor(t.rng, element_size);
      INFO("element size " << int(element_size) << ", " << tensor.params.elements
                           << " elements, rows of " << tensor.params.row_elements << ", G "
                           << tensor.params.group_rows);
      const std::uint64_t dst_offset = element_size * ferry_test::uniform(t.rng, 0, 7);
      const Buffer dst = REQUIRE_VALUE(t.device.create_buffer(dst_offset + tensor.bytes.size()));
      const Buffer stream_buffer = REQUIRE_VALUE(
          t.device.create_buffer(ferry::ibp::device_stream_bytes(tensor.stream.size())));
      ferry::ibp::CompressedTransferOptions options;
      options.piece_bytes = ferry_test::uniform(t.rng, 1, 600);  // many pieces, some one row
      options.transfer.chunk_bytes = 4096;

      // Pageable, through the pool.
      REQUIRE_OK(ferry_test::fill_and_wait(t.device, dst, 0, dst.size(), 0xA5A5A5A5));
      ferry::TimelinePoint done = REQUIRE_VALUE(ferry::ibp::upload_decoded(
          upload_queue, compute, pool, tensor.stream, stream_buffer, dst, dst_offset, {}, options));
      REQUIRE_OK(done.wait(ferry_test::kLongWait));
      check_device(t, dst, dst_offset, tensor.bytes);

      // Pinned: DMA'd piece by piece.
      const Buffer pinned = pinned_with(t.device, tensor.stream,
                                        ferry::ibp::device_stream_bytes(tensor.stream.size()));
      REQUIRE_OK(ferry_test::fill_and_wait(t.device, dst, 0, dst.size(), 0xA5A5A5A5));
      done = REQUIRE_VALUE(ferry::ibp::upload_decoded(upload_queue, compute, pinned, stream_buffer,
                                                      dst, dst_offset, {}, options));
      REQUIRE_OK(done.wait(ferry_test::kLongWait));
      check_device(t, dst, dst_offset, tensor.bytes);

      // Zero-copy: the decoder reads the pinned stream itself.
      REQUIRE_OK(ferry_test::fill_and_wait(t.device, dst, 0, dst.size(), 0xA5A5A5A5));
      done = REQUIRE_VALUE(ferry::ibp::decode_from_host(compute, pinned, dst, dst_offset));
      REQUIRE_OK(done.wait(ferry_test::kLongWait));
      check_device(t, dst, dst_offset, tensor.bytes);
    }
  });
}

TEST_CASE("ibp transfer: a corrupt or mismatched stream is refused before anything is submitted") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    const auto upload_queue = t.device.queue(QueueKind::upload);
    const auto compute = t.device.queue(QueueKind::compute);
    const ferry::StagingPool pool =
        REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));
    const Tensor tensor = make_tensor(t.rng, 4);
    const Buffer dst = REQUIRE_VALUE(t.device.create_buffer(tensor.bytes.size()));
    const Buffer stream_buffer = REQUIRE_VALUE(
        t.device.create_buffer(ferry::ibp::device_stream_bytes(tensor.stream.size())));
    const ferry::Timeline timeline = REQUIRE_VALUE(t.device.create_timeline(0));
    ferry::SubmitSync sync;
    sync.signal.push_back({timeline, 1});

    std::vector<std::byte> flipped = tensor.stream;
    const std::uint64_t at = ferry_test::uniform(t.rng, 0, flipped.size() - 1);
    flipped[at] ^= std::byte{1} << ferry_test::uniform(t.rng, 0, 7);
    INFO("bit flipped in byte " << at << " of " << flipped.size());
    CHECK_ERROR(ferry::ibp::upload_decoded(upload_queue, compute, pool, flipped, stream_buffer,
                                           dst, 0, sync),
                ErrorCode::data_corrupt);
    const std::vector<std::byte> truncated(tensor.stream.begin(), tensor.stream.end() - 1);
    CHECK_ERROR(ferry::ibp::upload_decoded(upload_queue, compute, pool, truncated, stream_buffer,
                                           dst, 0, sync),
                ErrorCode::data_corrupt);
    // Too small an output or stream buffer, a misaligned output: argument errors.
    const Buffer small = REQUIRE_VALUE(t.device.create_buffer(tensor.bytes.size() - 1));
    CHECK_ERROR(ferry::ibp::upload_decoded(upload_queue, compute, pool, tensor.stream,
                                           stream_buffer, small, 0, sync),
                ErrorCode::out_of_range);
    const Buffer short_stream = REQUIRE_VALUE(
        t.device.create_buffer(ferry::ibp::device_stream_bytes(tensor.stream.size()) - 1));
    CHECK_ERROR(ferry::ibp::upload_decoded(upload_queue, compute, pool, tensor.stream,
                                           short_stream, dst, 0, sync),
                ErrorCode::out_of_range);
    CHECK_ERROR(ferry::ibp::upload_decoded(upload_queue, compute, pool, tensor.stream,
                                           stream_buffer, dst, 2, sync),
                ErrorCode::invalid_argument);
    // Device memory cannot be read by the host: no zero-copy from it.
    CHECK_ERROR(ferry::ibp::decode_from_host(compute, stream_buffer, dst, 0, sync),
                ErrorCode::invalid_argument);
    // Nothing was submitted: the timeline is free, and signalling it works.
    CHECK(timeline.submitted_value() == 0);
    REQUIRE_OK(timeline.signal(1));
  });
}

TEST_CASE("ibp transfer: a tensor encoded on the device comes back as the host encoder's bytes") {
  ferry_test::for_each_backend({"ibp_encode"}, [](BackendUnderTest& t) {
    const ferry::StagingPool readback = REQUIRE_VALUE(t.device.create_staging_pool(
        ferry_test::small_pool(MemoryKind::host_readback, 65536, 3)));
    for (std::uint8_t element_size : {2, 8}) {
      const Tensor tensor = make_tensor(t.rng, element_size);
      const Buffer src = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, tensor.bytes));
      const std::uint64_t largest = REQUIRE_VALUE(ferry::ibp::max_stream_bytes(tensor.params));
      const Buffer stream_buffer =
          REQUIRE_VALUE(t.device.create_buffer(ferry::ibp::device_stream_bytes(largest)));
      const std::vector<std::byte> stream = REQUIRE_VALUE(ferry::ibp::download_encoded(
          t.device.queue(QueueKind::compute), t.device.queue(QueueKind::download), readback, src,
          0, tensor.params, stream_buffer));
      CHECK(stream == tensor.stream);
      std::vector<std::byte> back(tensor.bytes.size());
      REQUIRE_OK(ferry::ibp::decode(stream, back));
      CHECK(back == tensor.bytes);
    }
  });
}

TEST_CASE("ibp transfer: an IngressPipeline of compressed batches") {
  ferry_test::for_each_backend({"ibp_decode"}, [](BackendUnderTest& t) {
    Tensor first = make_tensor(t.rng, 4);
    std::vector<Tensor> batches;
    for (int i = 0; i < 5; ++i) {
      Tensor batch;
      batch.params = first.params;
      batch.bytes.resize(first.bytes.size());
      for (std::size_t j = 0; j < batch.bytes.size(); j += 4) {
        const std::uint32_t value = static_cast<std::uint32_t>(t.rng() % (i == 3 ? ~0u : 500u));
        std::memcpy(batch.bytes.data() + j, &value, 4);
      }
      batch.stream = REQUIRE_VALUE(ferry::ibp::encode(batch.bytes, batch.params));
      batches.push_back(std::move(batch));
    }
    // Batch 2 is corrupt: its error surfaces at batch 2 and the stream goes on.
    batches[2].stream[batches[2].stream.size() / 2] ^= std::byte{0x10};
    ferry::IngressOptions options;
    options.transform = REQUIRE_VALUE(ferry::ibp::decode_transform(first.params));
    CHECK(options.transform.output_bytes == first.bytes.size());
    std::vector<std::byte> scratch;
    ferry::IngressPipeline pipeline = REQUIRE_VALUE(ferry::IngressPipeline::create(
        t.device, options,
        [&](std::uint64_t index) -> ferry::Result<std::optional<ferry::HostBatch>> {
          if (index >= batches.size()) return std::optional<ferry::HostBatch>();
          scratch = batches[index].stream;  // reused: the pipeline copies it before returning
          return std::optional<ferry::HostBatch>(ferry::HostBatch::pageable(scratch));
        }));
    for (std::size_t i = 0; i < batches.size(); ++i) {
      INFO("batch " << i);
      ferry::Result<std::optional<ferry::IngressBatch>> next =
          pipeline.next(ferry_test::kLongWait);
      if (i == 2) {
        CHECK_ERROR(next, ErrorCode::data_corrupt);
        continue;
      }
      REQUIRE_OK(next);
      REQUIRE(next->has_value());
      ferry::IngressBatch& batch = **next;
      REQUIRE_OK(batch.ready().wait(ferry_test::kLongWait));
      check_device(t, batch.tensor(), 0, batches[i].bytes);
    }
    CHECK_FALSE(REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait)).has_value());
    // A batch of another shape is refused by the transform's inspect.
    ferry::ibp::EncodeParams other = first.params;
    other.group_rows += 1;
    const std::vector<std::byte> wrong = REQUIRE_VALUE(ferry::ibp::encode(first.bytes, other));
    CHECK_ERROR(options.transform.inspect(wrong), ErrorCode::invalid_argument);
  });
}
