// Bad input gets a clear error, records nothing, and loses nothing already submitted.
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::ErrorCode;
using ferry::Lease;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry::Timeline;
using ferry::TimelinePoint;
using ferry_test::BackendUnderTest;

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

}  // namespace

TEST_CASE("bad copies: zero size, out of range, overflow, overlap; nothing recorded") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    Buffer a = REQUIRE_VALUE(t.device.create_buffer(1000));
    Buffer b = REQUIRE_VALUE(t.device.create_buffer(500));
    CommandList commands;

    CHECK_ERROR(commands.copy(a, 0, b, 0, 0), ErrorCode::invalid_argument);
    // Oversized: bigger than either side.
    CHECK_ERROR(commands.copy(a, 0, b, 0, 501), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(b, 0, a, 0, 501), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(a, 0, b, 0, kMax), ErrorCode::out_of_range);
    // Out-of-range offsets, by one and by far.
    CHECK_ERROR(commands.copy(a, 1, b, 0, 1000), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(a, 0, b, 1, 500), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(a, 1000, b, 0, 1), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(a, 0, b, 500, 1), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(a, kMax, b, 0, 1), ErrorCode::out_of_range);
    // offset + size wraps around 2^64 to a small number: must still be out of range.
    CHECK_ERROR(commands.copy(a, kMax - 1, b, 0, 4), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(a, 0, b, kMax - 1, 4), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(a, 2, b, 0, kMax), ErrorCode::out_of_range);
    // Overlap within one buffer (exact, partial either way, one byte); adjacent is fine.
    CHECK_ERROR(commands.copy(a, 0, a, 0, 100), ErrorCode::invalid_argument);
    CHECK_ERROR(commands.copy(a, 0, a, 50, 100), ErrorCode::invalid_argument);
    CHECK_ERROR(commands.copy(a, 50, a, 0, 100), ErrorCode::invalid_argument);
    CHECK_ERROR(commands.copy(a, 99, a, 0, 100), ErrorCode::invalid_argument);
    CHECK(commands.empty());
    CHECK(commands.size() == 0);
    CHECK_OK(commands.copy(a, 0, a, 100, 100));
    CHECK_OK(commands.copy(a, 999, b, 499, 1));
    CHECK(commands.size() == 2);

    // Fills: zero size, out of range, overflow.
    CommandList fills;
    CHECK_ERROR(ferry::fill(fills, a, 0, 0, 1), ErrorCode::invalid_argument);
    CHECK_ERROR(ferry::fill(fills, a, 0, 1001, 1), ErrorCode::out_of_range);
    CHECK_ERROR(ferry::fill(fills, a, 1000, 1, 1), ErrorCode::out_of_range);
    CHECK_ERROR(ferry::fill(fills, a, kMax, 2, 1), ErrorCode::out_of_range);
    CHECK_ERROR(ferry::fill(fills, a, 8, kMax - 4, 1), ErrorCode::out_of_range);
    CHECK(fills.empty());

    // Leases are bounded by their own size, not their slab's.
    const ferry::StagingPool pool =
        REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));
    Lease lease = REQUIRE_VALUE(pool.acquire(100));
    CHECK_ERROR(commands.copy(lease, 0, a, 0, 101), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(lease, 100, a, 0, 1), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(a, 0, lease, 1, 100), ErrorCode::out_of_range);
    CHECK_ERROR(commands.copy(lease, 0, lease, 10, 50), ErrorCode::invalid_argument);
    CHECK(commands.size() == 2);

    // Bad buffers.
    CHECK_ERROR(t.device.create_buffer(0), ErrorCode::invalid_argument);
    const auto huge = t.device.create_buffer(1ull << 62);
    REQUIRE_FALSE(huge.ok());
    const ErrorCode huge_code = huge.status().code();
    CHECK_MESSAGE((huge_code == ErrorCode::out_of_memory || huge_code == ErrorCode::out_of_range ||
                   huge_code == ErrorCode::resource_exhausted),
                  huge.status().to_string());
  });
}

TEST_CASE("released buffers and moved-from leases are refused with released") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    Buffer a = REQUIRE_VALUE(t.device.create_buffer(256));
    Buffer host = REQUIRE_VALUE(t.device.create_buffer(256, MemoryKind::host_readback));
    Buffer gone = REQUIRE_VALUE(t.device.create_buffer(256));
    gone.release();
    CHECK_FALSE(gone.valid());
    CHECK(gone.size() == 0);

    CommandList commands;
    CHECK_ERROR(commands.copy(gone, 0, a, 0, 16), ErrorCode::released);
    CHECK_ERROR(commands.copy(a, 0, gone, 0, 16), ErrorCode::released);
    CHECK_ERROR(ferry::fill(commands, gone, 0, 16, 0), ErrorCode::released);
    CHECK_ERROR(gone.host_span(), ErrorCode::released);

    Buffer taken = std::move(host);
    CHECK_ERROR(host.host_span(), ErrorCode::released);  // NOLINT(bugprone-use-after-move): tested
    CHECK_ERROR(commands.copy(a, 0, host, 0, 16), ErrorCode::released);
    CHECK_OK(taken.host_span());
    // Device memory has no host view.
    CHECK_FALSE(a.host_span().ok());

    const ferry::StagingPool pool =
        REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));
    Lease lease = REQUIRE_VALUE(pool.acquire(64));
    Lease moved = std::move(lease);
    CHECK_FALSE(lease.valid());  // NOLINT(bugprone-use-after-move): tested
    CHECK(lease.size() == 0);
    CHECK(lease.data().empty());
    CHECK_ERROR(commands.copy(lease, 0, a, 0, 16), ErrorCode::released);
    CHECK_ERROR(commands.copy(a, 0, lease, 0, 16), ErrorCode::released);
    CHECK_ERROR(ferry::fill(commands, lease, 0, 16, 0), ErrorCode::released);
    moved.release();
    CHECK_ERROR(commands.copy(moved, 0, a, 0, 16), ErrorCode::released);
    CHECK(commands.empty());

    // The pageable path refuses released memory too.
    std::vector<std::byte> bytes(16);
    CHECK_ERROR(ferry::upload(t.device.queue(QueueKind::upload),
                              REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool())),
                              bytes, gone, 0),
                ErrorCode::released);
  });
}

TEST_CASE("bad submissions and transfers fail cleanly; earlier work still completes") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    constexpr std::uint64_t kSize = 3 << 20;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, kSize);
    const ferry::StagingPool upload_pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload)));
    const ferry::StagingPool readback_pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback)));
    Buffer target = REQUIRE_VALUE(t.device.create_buffer(kSize));

    // Good work first, held back on a host value so it is surely still in flight below.
    const Timeline gate = REQUIRE_VALUE(t.device.create_timeline());
    const TimelinePoint uploaded =
        REQUIRE_VALUE(ferry::upload(t.device.queue(QueueKind::upload), upload_pool, data, target, 0,
                                    {.wait = {{gate, 1}}, .signal = {}}));

    // A fill on the transfer queues is refused.
    for (const QueueKind kind : {QueueKind::upload, QueueKind::download}) {
      INFO("queue ", ferry::to_string(kind));
      Buffer scratch = REQUIRE_VALUE(t.device.create_buffer(64));
      CommandList fill;
      REQUIRE_OK(ferry::fill(fill, scratch, 0, 64, 0));
      const Timeline failed = REQUIRE_VALUE(t.device.create_timeline());
      const auto result =
          t.device.queue(kind).submit(std::move(fill), {.wait = {}, .signal = {{failed, 1}}});
      REQUIRE_FALSE(result.ok());
      CHECK_MESSAGE((result.status().code() == ErrorCode::invalid_argument ||
                     result.status().code() == ErrorCode::failed_precondition),
                    result.status().to_string());
      // Rejected: the timeline is untouched, value 1 is free for later work.
      CHECK_ERROR(failed.wait(1, std::chrono::milliseconds(20)), ErrorCode::timeout);
      CHECK_OK(failed.failure());
      CHECK(failed.submitted_value() == 0);
      CHECK_OK(failed.signal(1));
      CHECK_OK(failed.wait(1, ferry_test::kLongWait));
    }

    // Signalling a value not above the timeline's current value is refused.
    const Timeline at_five = REQUIRE_VALUE(t.device.create_timeline(5));
    CommandList stale;
    REQUIRE_OK(stale.copy(target, 0, target, kSize / 2, 16));
    CHECK_FALSE(t.device.queue(QueueKind::compute)
                    .submit(std::move(stale), {.wait = {}, .signal = {{at_five, 5}}})
                    .ok());
    // An empty (default) timeline in a sync is refused.
    CommandList empty_sync;
    REQUIRE_OK(empty_sync.copy(target, 0, target, kSize / 2, 16));
    CHECK_FALSE(t.device.queue(QueueKind::compute)
                    .submit(std::move(empty_sync), {.wait = {{Timeline(), 1}}, .signal = {}})
                    .ok());

    // Pageable transfers with bad arguments.
    std::vector<std::byte> host(kSize);
    const auto upload_queue = t.device.queue(QueueKind::upload);
    const auto download_queue = t.device.queue(QueueKind::download);
    CHECK_ERROR(ferry::upload(upload_queue, upload_pool, {}, target, 0),
                ErrorCode::invalid_argument);
    CHECK_ERROR(ferry::upload(upload_queue, upload_pool, host, target, 1), ErrorCode::out_of_range);
    CHECK_ERROR(ferry::upload(upload_queue, upload_pool, host, target, kMax),
                ErrorCode::out_of_range);
    CHECK_ERROR(ferry::upload(upload_queue, readback_pool, host, target, 0),
                ErrorCode::invalid_argument);
    CHECK_ERROR(ferry::download(download_queue, readback_pool, target, 0, {}),
                ErrorCode::invalid_argument);
    CHECK_ERROR(ferry::download(download_queue, readback_pool, target, 1, host),
                ErrorCode::out_of_range);
    CHECK_ERROR(
        ferry::download(download_queue, readback_pool, target, kMax, std::span(host).first(2)),
        ErrorCode::out_of_range);
    CHECK_ERROR(ferry::download(download_queue, upload_pool, target, 0, host),
                ErrorCode::invalid_argument);

    // Now let the good work run: it completes with the right data.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_FALSE(uploaded.reached());
    REQUIRE_OK(gate.signal(1));
    REQUIRE_OK(uploaded.wait(ferry_test::kLongWait));
    std::vector<std::byte> back = ferry_test::poison_bytes(kSize, 16);
    REQUIRE_OK(ferry::download(download_queue, readback_pool, target, 0, back));
    ferry_test::check_bytes_equal(back, data, "upload submitted before the bad calls");
  });
}
