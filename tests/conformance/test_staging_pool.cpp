// Staging pool: leases, exact sizes (no power-of-two rounding), statistics, trim(), limits and
// timeouts, and leases held until the GPU work using them has completed.
#include <chrono>
#include <cstring>
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
using ferry::StagingPool;
using ferry_test::BackendUnderTest;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kKiB = 1ull << 10;
constexpr std::uint64_t kMiB = 1ull << 20;

std::uint64_t round_up(std::uint64_t value, std::uint64_t to) { return (value + to - 1) / to * to; }

}  // namespace

TEST_CASE("staging pool: acquire and release, exact sizes, statistics") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    for (const MemoryKind kind : {MemoryKind::host_upload, MemoryKind::host_readback}) {
      INFO("pool kind ", ferry::to_string(kind));
      const StagingPool pool =
          REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool(kind, 256 * kKiB, 3)));
      CHECK(pool.options().kind == kind);
      CHECK(pool.options().slab_bytes == 256 * kKiB);
      ferry::StagingPoolStats stats = pool.stats();
      CHECK(stats.capacity_bytes == 768 * kKiB);
      CHECK(stats.slabs == 1);  // reserved_slabs, allocated up front
      CHECK(stats.bytes_reserved == 256 * kKiB);
      CHECK(stats.bytes_in_use == 0);
      CHECK(stats.acquires == 0);
      CHECK(stats.waits == 0);

      // The analogue of a 129 MB tensor in a 256 MB slab: 129 KiB takes 129 KiB (rounded to the
      // staging alignment), not 256 KiB; a 127 KiB lease then fits in the same slab.
      Lease big = REQUIRE_VALUE(pool.acquire(129 * kKiB));
      CHECK(big.size() == 129 * kKiB);
      CHECK(big.data().size() == 129 * kKiB);
      stats = pool.stats();
      CHECK(stats.bytes_in_use == 129 * kKiB);
      Lease rest = REQUIRE_VALUE(pool.try_acquire(127 * kKiB));
      stats = pool.stats();
      CHECK(stats.slabs == 1);
      CHECK(stats.bytes_in_use == 256 * kKiB);
      CHECK(stats.high_water_bytes == 256 * kKiB);
      CHECK(stats.acquires == 2);

      // Odd sizes take their size rounded up to kStagingAlignment, no more.
      Lease odd = REQUIRE_VALUE(pool.acquire(1000));
      CHECK(odd.size() == 1000);
      stats = pool.stats();
      CHECK(stats.slabs == 2);
      CHECK(stats.bytes_in_use == 256 * kKiB + round_up(1000, ferry::kStagingAlignment));

      // Leases are writable host memory, distinct from each other.
      std::memset(big.data().data(), 0x11, big.size());
      std::memset(rest.data().data(), 0x22, rest.size());
      std::memset(odd.data().data(), 0x33, odd.size());
      CHECK(std::to_integer<int>(big.data()[big.size() - 1]) == 0x11);
      CHECK(std::to_integer<int>(rest.data()[0]) == 0x22);
      CHECK(std::to_integer<int>(odd.data()[0]) == 0x33);

      // Dropping leases (not used by the GPU) gives their bytes back at once.
      big.release();
      CHECK_FALSE(big.valid());
      rest = Lease();
      stats = pool.stats();
      CHECK(stats.bytes_in_use == round_up(1000, ferry::kStagingAlignment));
      CHECK(stats.high_water_bytes == 256 * kKiB + round_up(1000, ferry::kStagingAlignment));
      odd.release();
      CHECK(pool.stats().bytes_in_use == 0);

      // The freed space is reused: a whole-slab lease fits again.
      Lease whole = REQUIRE_VALUE(pool.try_acquire(256 * kKiB));
      CHECK(whole.size() == 256 * kKiB);
    }
  });
}

TEST_CASE("staging pool: trim gives empty slabs back, keeping the reserved ones") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    ferry::StagingPoolOptions options =
        ferry_test::small_pool(MemoryKind::host_upload, 128 * kKiB, 4);
    options.reserved_slabs = 2;
    const StagingPool pool = REQUIRE_VALUE(t.device.create_staging_pool(options));
    CHECK(pool.stats().slabs == 2);
    CHECK(pool.trim() == 0);  // nothing beyond the reserve

    std::vector<Lease> leases;
    for (int i = 0; i < 4; ++i) leases.push_back(REQUIRE_VALUE(pool.try_acquire(100 * kKiB)));
    CHECK(pool.stats().slabs == 4);
    CHECK(pool.stats().bytes_reserved == 512 * kKiB);
    CHECK(pool.trim() == 0);  // all slabs in use

    leases[3].release();
    CHECK(pool.trim() == 128 * kKiB);
    CHECK(pool.stats().slabs == 3);
    leases.clear();
    CHECK(pool.trim() == 128 * kKiB);
    const ferry::StagingPoolStats stats = pool.stats();
    CHECK(stats.slabs == 2);
    CHECK(stats.bytes_reserved == 256 * kKiB);
    CHECK(stats.bytes_in_use == 0);
    CHECK(pool.trim() == 0);

    // The pool grows again after a trim.
    for (int i = 0; i < 4; ++i) leases.push_back(REQUIRE_VALUE(pool.try_acquire(128 * kKiB)));
    CHECK(pool.stats().slabs == 4);
  });
}

TEST_CASE("staging pool: limits, try_acquire and acquire timeouts, bad options") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const StagingPool pool = REQUIRE_VALUE(t.device.create_staging_pool(
        ferry_test::small_pool(MemoryKind::host_upload, 64 * kKiB, 2)));

    // Larger than a slab: could never fit, so an error at once, whatever the timeout.
    auto start = Clock::now();
    CHECK_ERROR(pool.acquire(64 * kKiB + 1), ErrorCode::resource_exhausted);
    CHECK_ERROR(pool.acquire(1ull << 40, ferry::kInfinite), ErrorCode::resource_exhausted);
    CHECK_ERROR(pool.try_acquire(64 * kKiB + 1), ErrorCode::resource_exhausted);
    CHECK(Clock::now() - start < std::chrono::seconds(1));
    CHECK_ERROR(pool.acquire(0), ErrorCode::invalid_argument);
    CHECK_ERROR(pool.try_acquire(0), ErrorCode::invalid_argument);

    Lease a = REQUIRE_VALUE(pool.acquire(64 * kKiB));
    Lease b = REQUIRE_VALUE(pool.acquire(40 * kKiB));
    // Full (24 KiB free in one slab): try_acquire of more fails at once with timeout.
    start = Clock::now();
    CHECK_ERROR(pool.try_acquire(30 * kKiB), ErrorCode::timeout);
    CHECK(Clock::now() - start < std::chrono::milliseconds(500));
    Lease c = REQUIRE_VALUE(pool.try_acquire(24 * kKiB));  // but what fits still fits

    // acquire with a timeout waits about that long, then reports timeout.
    const auto timeout = std::chrono::milliseconds(150);
    start = Clock::now();
    CHECK_ERROR(pool.acquire(1, timeout), ErrorCode::timeout);
    const auto waited = Clock::now() - start;
    CHECK(waited >= timeout - std::chrono::milliseconds(5));
    CHECK(waited < timeout + std::chrono::seconds(3));
    const std::uint64_t waits_before = pool.stats().waits;
    CHECK(waits_before >= 1);

    // A blocked acquire is woken by a release from another thread.
    start = Clock::now();  // before the thread starts its sleep
    std::thread releaser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      b.release();
    });
    const ferry::Result<Lease> woken = pool.acquire(32 * kKiB, ferry_test::kLongWait);
    releaser.join();
    REQUIRE_OK(woken);
    CHECK(Clock::now() - start >= std::chrono::milliseconds(95));
    CHECK(pool.stats().waits > waits_before);

    // Bad options.
    ferry::StagingPoolOptions bad = ferry_test::small_pool();
    bad.kind = MemoryKind::device;
    CHECK_ERROR(t.device.create_staging_pool(bad), ErrorCode::invalid_argument);
    bad = ferry_test::small_pool();
    bad.slab_bytes = 0;
    CHECK_ERROR(t.device.create_staging_pool(bad), ErrorCode::invalid_argument);
    bad = ferry_test::small_pool();
    bad.max_slabs = 0;
    CHECK_ERROR(t.device.create_staging_pool(bad), ErrorCode::invalid_argument);
    bad = ferry_test::small_pool();
    bad.reserved_slabs = bad.max_slabs + 1;
    CHECK_ERROR(t.device.create_staging_pool(bad), ErrorCode::invalid_argument);
  });
}

TEST_CASE("staging pool: a lease used by a copy stays out of the pool until the copy is done") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const StagingPool pool = REQUIRE_VALUE(t.device.create_staging_pool(
        ferry_test::small_pool(MemoryKind::host_upload, 64 * kKiB, 1)));
    const ferry::Timeline gate = REQUIRE_VALUE(t.device.create_timeline());
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, 64 * kKiB);
    Buffer target = REQUIRE_VALUE(
        ferry_test::device_buffer_with(t.device, ferry_test::poison_bytes(data.size(), 12)));

    Lease lease = REQUIRE_VALUE(pool.acquire(data.size()));
    std::memcpy(lease.data().data(), data.data(), data.size());
    CommandList commands;
    REQUIRE_OK(commands.copy(lease, 0, target, 0, data.size()));
    // Held back behind a host signal, so the copy cannot have run yet.
    const ferry::TimelinePoint done =
        REQUIRE_VALUE(t.device.queue(QueueKind::upload)
                          .submit(std::move(commands), {.wait = {{gate, 1}}, .signal = {}}));
    lease.release();  // the user lets go; the submission still holds the range

    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(done.reached());
    CHECK(pool.stats().bytes_in_use == 64 * kKiB);
    CHECK_ERROR(pool.try_acquire(1), ErrorCode::timeout);
    CHECK_ERROR(pool.acquire(1, std::chrono::milliseconds(20)), ErrorCode::timeout);

    REQUIRE_OK(gate.signal(1));
    REQUIRE_OK(done.wait(ferry_test::kLongWait));
    // Back in the pool once the copy is done (possibly retired lazily: acquire may wait a bit).
    Lease again = REQUIRE_VALUE(pool.acquire(64 * kKiB, std::chrono::seconds(10)));
    again.release();
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
    CHECK(pool.stats().bytes_in_use == 0);
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, target, 0, data.size())), data,
        "target of the held-back copy");
  });
}
