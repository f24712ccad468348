// Sizes and offsets near 2^64 at every public entry point that takes one: always a clear error
// (or, where the value is only an upper bound, correct work), never a wrapped small size, a crash
// or a huge span.
#include <cstring>
#include <limits>
#include <vector>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::ErrorCode;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry::StagingPoolOptions;
using ferry::Status;
using ferry_test::BackendUnderTest;

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// Sizes that no device can hold, many of which wrap to small numbers when rounded up.
const std::vector<std::uint64_t> kHugeSizes = {
    kMax,         kMax - 1,          kMax - 100,        kMax - 255,       kMax - 256,
    kMax - 4095,  kMax - (1u << 20), kMax / 2 + 1,      1ull << 63,       (1ull << 62) + 1,
    1ull << 62};

bool refused_for_size(const Status& status) {
  return status.code() == ErrorCode::out_of_memory || status.code() == ErrorCode::out_of_range ||
         status.code() == ErrorCode::resource_exhausted ||
         status.code() == ErrorCode::invalid_argument;
}

}  // namespace

TEST_CASE("sizes near 2^64: buffers") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    for (const MemoryKind kind :
         {MemoryKind::device, MemoryKind::host_upload, MemoryKind::host_readback}) {
      for (const std::uint64_t size : kHugeSizes) {
        INFO("size " << size << ", " << ferry::to_string(kind));
        const auto buffer = t.device.create_buffer(size, kind);
        REQUIRE_FALSE(buffer.ok());  // never a small allocation posing as a huge one
        CHECK_MESSAGE(refused_for_size(buffer.status()), buffer.status().to_string());
        CHECK(buffer.status().message().find("bytes") != std::string::npos);
      }
    }
    CHECK_ERROR(t.device.create_buffer(16, static_cast<MemoryKind>(99)), ErrorCode::invalid_argument);
  });
}

TEST_CASE("sizes near 2^64: staging pools and leases") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, 3000);
    Buffer target = REQUIRE_VALUE(t.device.create_buffer(3000));
    for (const std::uint64_t slab : kHugeSizes) {
      for (const std::uint32_t max_slabs : {1u, 2u, 4u, 0xffffffffu}) {
        for (const std::uint32_t reserved : {0u, 1u}) {
          INFO("slab_bytes " << slab << ", max_slabs " << max_slabs << ", reserved " << reserved);
          StagingPoolOptions options;
          options.slab_bytes = slab;
          options.max_slabs = max_slabs;
          options.reserved_slabs = reserved;
          const auto pool = t.device.create_staging_pool(options);
          if (!pool.ok()) {
            CHECK_MESSAGE(refused_for_size(pool.status()), pool.status().to_string());
            continue;
          }
          // Accepted without reserving a slab: the capacity is real, and the first lease's slab
          // cannot be allocated: an error, never a crash.
          CHECK(reserved == 0);
          CHECK(pool->stats().capacity_bytes / max_slabs == pool->options().slab_bytes);
          CHECK(pool->options().slab_bytes >= slab);
          const auto lease = pool->acquire(64, std::chrono::milliseconds(50));
          REQUIRE_FALSE(lease.ok());
          CHECK_MESSAGE(refused_for_size(lease.status()), lease.status().to_string());
          const auto uploaded = ferry::upload(t.device.queue(QueueKind::upload), *pool, data,
                                              target, 0, {}, {.acquire_timeout = std::chrono::milliseconds(50)});
          CHECK_FALSE(uploaded.ok());
        }
      }
    }

    const ferry::StagingPool pool =
        REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));
    for (const std::uint64_t size : kHugeSizes) {
      INFO("lease of " << size);
      CHECK_ERROR(pool.acquire(size), ErrorCode::resource_exhausted);
      CHECK_ERROR(pool.try_acquire(size), ErrorCode::resource_exhausted);
    }
    CHECK(pool.stats().bytes_in_use == 0);
  });
}

TEST_CASE("sizes near 2^64: commands and transfers") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::uint64_t size = 5000;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    Buffer a = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, data));
    Buffer b = REQUIRE_VALUE(t.device.create_buffer(size));
    const ferry::StagingPool upload_pool =
        REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));
    const ferry::StagingPool readback_pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback)));
    ferry::Lease lease = REQUIRE_VALUE(upload_pool.acquire(100));
    const auto upload_queue = t.device.queue(QueueKind::upload);
    const auto download_queue = t.device.queue(QueueKind::download);
    std::vector<std::byte> host(size);

    for (const std::uint64_t big : kHugeSizes) {
      for (const std::uint64_t small : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4999},
                                        std::uint64_t{5000}, std::uint64_t{1} << 32}) {
        INFO("big " << big << ", small " << small);
        CommandList list;
        CHECK_ERROR(list.copy(a, big, b, small, 1), ErrorCode::out_of_range);
        CHECK_ERROR(list.copy(a, small, b, big, 1), ErrorCode::out_of_range);
        CHECK_ERROR(list.copy(a, small, b, 0, big), ErrorCode::out_of_range);
        CHECK_ERROR(list.copy(lease, big, a, 0, 4), ErrorCode::out_of_range);
        CHECK_ERROR(list.copy(a, 0, lease, small, big), ErrorCode::out_of_range);
        CHECK_ERROR(ferry::fill(list, a, big, small + 1, 7), ErrorCode::out_of_range);
        CHECK_ERROR(ferry::fill(list, a, small, big, 7), ErrorCode::out_of_range);
        CHECK(list.empty());
        CHECK_ERROR(ferry::upload(upload_queue, upload_pool, data, b, big), ErrorCode::out_of_range);
        CHECK_ERROR(ferry::download(download_queue, readback_pool, a, big, host),
                    ErrorCode::out_of_range);
      }
    }

    // A chunk size is an upper bound: any value works, clamped to the pool's slabs.
    for (const std::uint64_t chunk : {std::uint64_t{0}, std::uint64_t{1}, kMax, kMax - 255}) {
      INFO("chunk_bytes " << chunk);
      ferry::TransferOptions options;
      options.chunk_bytes = chunk;
      const ferry::TimelinePoint uploaded =
          REQUIRE_VALUE(ferry::upload(upload_queue, upload_pool, data, b, 0, {}, options));
      std::vector<std::byte> back = ferry_test::poison_bytes(size, 4);
      REQUIRE_OK(ferry::download(download_queue, readback_pool, b, 0, back,
                                 {.wait = {uploaded}, .signal = {}}, options));
      ferry_test::check_bytes_equal(back, data, "round trip with an extreme chunk size");
    }
    lease.release();
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
    CHECK(upload_pool.stats().bytes_in_use == 0);
  });
}

TEST_CASE("sizes near 2^64: normalize layouts and egress pushes") {
  // Two 8x8 images of 3 planes; one pitch at a time near 2^64. The truth, in 128 bits: a layout
  // whose span fits 64 bits is valid (a buffer that large is what cannot exist), any other is
  // invalid, with span_bytes() 0 and no exception (it is noexcept).
  __extension__ using Wide = unsigned __int128;
  ferry::NormalizeParams params;
  params.input = {2, 8, 8, 3, ferry::ImageLayout::nchw};
  for (const std::uint64_t big : kHugeSizes) {
    for (int which = 0; which < 3; ++which) {
      INFO("pitch " << which << " = " << big);
      ferry::NormalizeParams p = params;
      (which == 0 ? p.input.row_pitch : which == 1 ? p.input.plane_pitch : p.input.image_pitch) =
          big;
      const Wide row = which == 0 ? big : 8;
      const Wide plane_bytes = row * 7 + 8;
      const Wide plane = which == 1 ? big : row * 8;
      const Wide image_bytes = plane * 2 + plane_bytes;
      const Wide image = which == 2 ? big : image_bytes;
      const Wide span = image + image_bytes;
      const bool valid = plane >= plane_bytes && image >= image_bytes && span <= kMax;
      CHECK(p.input.span_bytes() == (valid ? static_cast<std::uint64_t>(span) : 0));
      const auto shape = ferry::resolve_normalize(p);
      CHECK(shape.ok() == valid);
      if (!valid) CHECK_ERROR(shape, ErrorCode::invalid_argument);
      if (valid) CHECK(shape->input_bytes == static_cast<std::uint64_t>(span));
    }
  }
  ferry::NormalizeParams wide = params;
  wide.input = {0xffffffffu, 0xffffffffu, 0xffffffffu, 4, ferry::ImageLayout::nhwc};
  CHECK_ERROR(ferry::resolve_normalize(wide), ErrorCode::invalid_argument);
  CHECK(wide.input.span_bytes() == 0);

  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::StagingPool pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback)));
    ferry::EgressOptions options;
    options.pool = pool;
    options.chunk_bytes = kMax;  // an upper bound: clamped to the slab
    ferry::EgressPipeline egress = REQUIRE_VALUE(ferry::EgressPipeline::create(
        t.device, options, [](const ferry::EgressChunk&) { return Status(); }));
    Buffer output = REQUIRE_VALUE(t.device.create_buffer(4096));
    for (const std::uint64_t big : kHugeSizes) {
      INFO("big " << big);
      CHECK_ERROR(egress.push(output, big, 1, {}), ErrorCode::out_of_range);
      CHECK_ERROR(egress.push(output, 1, big, {}), ErrorCode::out_of_range);
    }
    CHECK_OK(egress.push(output, 0, 4096, {}));
    CHECK_OK(egress.close());
    CHECK(egress.stats().chunks_consumed == 1);
  });
}
