// More bytes in flight than the pool holds: acquire waits (backpressure), nothing is lost, every
// chunk lands where it belongs, and every lease is back in the pool afterwards.
#include <chrono>
#include <cstring>
#include <thread>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::Lease;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry::StagingPool;
using ferry::Timeline;
using ferry_test::BackendUnderTest;

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

// Signals gate=1 after a delay, so the queue it holds back runs only once the pool is full.
class DelayedSignal {
 public:
  DelayedSignal(Timeline gate, std::chrono::milliseconds delay)
      : thread_([gate = std::move(gate), delay, this] {
          std::this_thread::sleep_for(delay);
          status_ = gate.signal(1);
        }) {}
  ~DelayedSignal() {
    if (thread_.joinable()) thread_.join();
  }
  ferry::Status join() {
    thread_.join();
    return status_;
  }

 private:
  ferry::Status status_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("backpressure: 24 MiB of leases through a 2 MiB pool, in many submissions") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const StagingPool pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload, kMiB, 2)));
    const Timeline gate = REQUIRE_VALUE(t.device.create_timeline());

    // Chunks of more than half a slab, so each lease takes a slab of its own.
    std::vector<std::uint64_t> offsets;
    std::vector<std::uint64_t> sizes;
    std::uint64_t total = 0;
    while (total < 24 * kMiB) {
      offsets.push_back(total);
      sizes.push_back(ferry_test::uniform(t.rng, kMiB / 2 + 1, kMiB));
      total += sizes.back();
    }
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, total);
    Buffer target = REQUIRE_VALUE(t.device.create_buffer(total + 1));
    REQUIRE_OK(ferry_test::fill_and_wait(t.device, target, 0, total + 1, 0x5A5A5A5Au));
    // Every submission also writes its head here: submissions on a queue run in order, so the
    // last one's head is what stays.
    constexpr std::uint64_t kHead = 4096;
    Buffer last_head = REQUIRE_VALUE(t.device.create_buffer(kHead));

    DelayedSignal opener(gate, std::chrono::milliseconds(200));
    ferry::TimelinePoint last;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      Lease lease = REQUIRE_VALUE(pool.acquire(sizes[i], ferry_test::kLongWait));
      std::memcpy(lease.data().data(), data.data() + offsets[i], sizes[i]);
      CommandList commands;
      REQUIRE_OK(commands.copy(lease, 0, target, offsets[i], sizes[i]));
      REQUIRE_OK(commands.copy(lease, 0, last_head, 0, kHead));
      ferry::SubmitSync sync;
      if (i == 0) sync.wait.push_back({gate, 1});  // holds the whole queue back for a while
      last = REQUIRE_VALUE(t.device.queue(QueueKind::upload).submit(std::move(commands), sync));
    }
    REQUIRE_OK(opener.join());
    REQUIRE_OK(last.wait(ferry_test::kLongWait));
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));

    const ferry::StagingPoolStats stats = pool.stats();
    MESSAGE(sizes.size(), " submissions, ", stats.waits, " acquires waited");
    CHECK(stats.waits > 0);
    CHECK(stats.acquires == sizes.size());
    CHECK(stats.bytes_in_use == 0);
    CHECK(stats.high_water_bytes <= 2 * kMiB);
    CHECK(stats.slabs <= 2);

    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, last_head, 0, kHead)),
        std::span(data).subspan(offsets.back(), kHead), "head written by every submission");
    std::vector<std::byte> expected = data;
    expected.push_back(std::byte{0x5A});  // the byte after the last chunk is untouched
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, target, 0, total + 1)), expected,
        "target after the stream of leases");
  });
}

TEST_CASE("backpressure: pageable 24 MiB up and down through 2 MiB pools") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const StagingPool upload_pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload, kMiB, 2)));
    const StagingPool readback_pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback, kMiB, 2)));
    const Timeline gate = REQUIRE_VALUE(t.device.create_timeline());
    const std::uint64_t size = 24 * kMiB + 12345;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    Buffer target = REQUIRE_VALUE(t.device.create_buffer(size + 3));
    ferry::TransferOptions options;
    options.chunk_bytes = 16ull << 20;  // clamped to the 1 MiB slab
    options.acquire_timeout = ferry_test::kLongWait;

    DelayedSignal opener(gate, std::chrono::milliseconds(200));
    const ferry::TimelinePoint uploaded =
        REQUIRE_VALUE(ferry::upload(t.device.queue(QueueKind::upload), upload_pool, data, target, 3,
                                    {.wait = {{gate, 1}}, .signal = {}}, options));
    REQUIRE_OK(opener.join());
    CHECK(upload_pool.stats().waits > 0);
    CHECK(upload_pool.stats().high_water_bytes <= 2 * kMiB);

    std::vector<std::byte> back = ferry_test::poison_bytes(size, 15);
    REQUIRE_OK(ferry::download(t.device.queue(QueueKind::download), readback_pool, target, 3, back,
                               {.wait = {uploaded}, .signal = {}}, options));
    ferry_test::check_bytes_equal(back, data, "pageable round trip through small pools");
    CHECK(readback_pool.stats().high_water_bytes <= 2 * kMiB);

    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
    CHECK(upload_pool.stats().bytes_in_use == 0);
    CHECK(readback_pool.stats().bytes_in_use == 0);
  });
}
