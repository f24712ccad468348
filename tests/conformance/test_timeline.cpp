// Timelines: host signal and wait, timeouts, queue waits on values signalled later by the host,
// ordering across queues, and failed submissions waking their waiters with an error.
#include <chrono>
#include <cstring>
#include <thread>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::ErrorCode;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry::Timeline;
using ferry::TimelinePoint;
using ferry_test::BackendUnderTest;
using Clock = std::chrono::steady_clock;

TEST_CASE("timeline: host signal, value, waits and timeouts") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const Timeline timeline = REQUIRE_VALUE(t.device.create_timeline(5));
    CHECK(timeline.value() == 5);
    CHECK(timeline.submitted_value() >= 5);
    CHECK_OK(timeline.failure());
    CHECK_OK(timeline.wait(0, std::chrono::milliseconds(0)));
    CHECK_OK(timeline.wait(5, std::chrono::milliseconds(0)));

    // A value never signalled: a distinct timeout error, in about the time asked for.
    const auto timeout = std::chrono::milliseconds(100);
    auto start = Clock::now();
    CHECK_ERROR(timeline.wait(6, timeout), ErrorCode::timeout);
    const auto waited = Clock::now() - start;
    CHECK(waited >= timeout - std::chrono::milliseconds(5));
    CHECK(waited < timeout + std::chrono::seconds(3));
    start = Clock::now();
    CHECK_ERROR(timeline.wait(6, std::chrono::milliseconds(0)), ErrorCode::timeout);
    CHECK(Clock::now() - start < std::chrono::milliseconds(500));
    // A timeout does not poison the timeline.
    CHECK_OK(timeline.failure());

    REQUIRE_OK(timeline.signal(7));
    CHECK(timeline.value() == 7);
    CHECK(timeline.submitted_value() == 7);
    CHECK_OK(timeline.wait(6, std::chrono::milliseconds(0)));
    CHECK_OK(timeline.wait(7));
    // Values only go up.
    CHECK_FALSE(timeline.signal(7).ok());
    CHECK_FALSE(timeline.signal(3).ok());
    CHECK(timeline.value() == 7);

    // A host wait is woken by a signal from another thread.
    start = Clock::now();  // before the thread starts its sleep
    ferry::Status signalled;
    std::thread signaller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      signalled = timeline.signal(10);
    });
    CHECK_OK(timeline.wait(9, ferry_test::kLongWait));
    signaller.join();
    CHECK_OK(signalled);
    CHECK(Clock::now() - start >= std::chrono::milliseconds(45));
    CHECK(timeline.value() == 10);

    const TimelinePoint point{timeline, 10};
    CHECK(point.reached());
    CHECK_OK(point.wait());
  });
}

TEST_CASE("timeline: a queue wait on a value the host signals later holds the queue back") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const Timeline gate = REQUIRE_VALUE(t.device.create_timeline());
    const Timeline done = REQUIRE_VALUE(t.device.create_timeline());
    const std::uint64_t size = 123457;
    const std::vector<std::byte> first = ferry_test::random_bytes(t.rng, size);
    Buffer source = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, first));
    Buffer readback = REQUIRE_VALUE(t.device.create_buffer(size, MemoryKind::host_readback));
    const auto readback_bytes = REQUIRE_VALUE(readback.host_span());
    ferry_test::fill_poison(readback_bytes, 13);

    // Waits on gate=1, which nobody has submitted yet: ferry holds it back.
    CommandList held;
    REQUIRE_OK(held.copy(source, 0, readback, 0, size));
    const TimelinePoint held_done =
        REQUIRE_VALUE(t.device.queue(QueueKind::download)
                          .submit(std::move(held), {.wait = {{gate, 1}}, .signal = {{done, 1}}}));
    // A later submission on the same queue waits behind it (submissions on a queue start in
    // order), even though it has no wait of its own. It touches other buffers: start order is
    // all a queue promises, so sharing buffers would need a timeline wait.
    const std::vector<std::byte> second = ferry_test::random_bytes(t.rng, size);
    Buffer second_source = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, second));
    Buffer second_target = REQUIRE_VALUE(t.device.create_buffer(size));
    CommandList behind;
    REQUIRE_OK(behind.copy(second_source, 0, second_target, 0, size));
    const TimelinePoint behind_done =
        REQUIRE_VALUE(t.device.queue(QueueKind::download).submit(std::move(behind)));
    CHECK(done.submitted_value() == 1);

    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK_FALSE(held_done.reached());
    CHECK_FALSE(behind_done.reached());
    CHECK(done.value() == 0);
    CHECK_ERROR(done.wait(1, std::chrono::milliseconds(20)), ErrorCode::timeout);
    // Other queues are not blocked.
    CHECK_OK(
        ferry_test::fill_and_wait(t.device, REQUIRE_VALUE(t.device.create_buffer(64)), 0, 64, 1));

    REQUIRE_OK(gate.signal(1));
    CHECK_OK(done.wait(1, ferry_test::kLongWait));
    CHECK_OK(held_done.wait(ferry_test::kLongWait));
    CHECK_OK(behind_done.wait(ferry_test::kLongWait));
    ferry_test::check_bytes_equal(readback_bytes, first, "readback of the held-back copy");
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, second_target, 0, size)), second,
        "target of the copy behind it");
  });
}

TEST_CASE("timeline: cross-queue chains run in timeline order, waits submitted before signals") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    // Upload writes A, compute copies A to B and fills part of B, download reads B; each step
    // waits on the one before through a timeline of its own.
    const Timeline uploaded = REQUIRE_VALUE(t.device.create_timeline());
    const Timeline computed = REQUIRE_VALUE(t.device.create_timeline());
    const Timeline downloaded = REQUIRE_VALUE(t.device.create_timeline());
    const std::uint64_t size = 1 << 18;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    Buffer staging = REQUIRE_VALUE(t.device.create_buffer(size, MemoryKind::host_upload));
    std::memcpy(REQUIRE_VALUE(staging.host_span()).data(), data.data(), size);
    Buffer a = REQUIRE_VALUE(t.device.create_buffer(size));
    Buffer b = REQUIRE_VALUE(t.device.create_buffer(size));
    Buffer readback = REQUIRE_VALUE(t.device.create_buffer(size, MemoryKind::host_readback));

    // Submit in reverse order: the later steps wait for values not yet submitted.
    CommandList down;
    REQUIRE_OK(down.copy(b, 0, readback, 0, size));
    const TimelinePoint read = REQUIRE_VALUE(
        t.device.queue(QueueKind::download)
            .submit(std::move(down), {.wait = {{computed, 1}}, .signal = {{downloaded, 1}}}));
    CommandList compute;
    REQUIRE_OK(compute.copy(a, 0, b, 0, size));
    REQUIRE_OK(compute.fill(b, 1000, 777, 0x0BADF00Du));
    REQUIRE_OK(
        t.device.queue(QueueKind::compute)
            .submit(std::move(compute), {.wait = {{uploaded, 1}}, .signal = {{computed, 1}}}));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_FALSE(read.reached());
    CHECK(downloaded.value() == 0);
    CommandList up;
    REQUIRE_OK(up.copy(staging, 0, a, 0, size));
    REQUIRE_OK(t.device.queue(QueueKind::upload)
                   .submit(std::move(up), {.wait = {}, .signal = {{uploaded, 1}}}));

    REQUIRE_OK(downloaded.wait(1, ferry_test::kLongWait));
    // The download waited for the other two, so their values are set. (Signals of one
    // submission need not land at the same instant: wait for the progress point itself.)
    CHECK(uploaded.value() == 1);
    CHECK(computed.value() == 1);
    CHECK_OK(read.wait(ferry_test::kLongWait));
    std::vector<std::byte> expected = data;
    ferry_test::apply_fill(expected, 1000, 777, 0x0BADF00Du);
    ferry_test::check_bytes_equal(REQUIRE_VALUE(readback.host_span()), expected,
                                  "end of the chain");
  });
}

TEST_CASE("timeline: signal values must increase in submission order") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const Timeline timeline = REQUIRE_VALUE(t.device.create_timeline());
    Buffer buffer = REQUIRE_VALUE(t.device.create_buffer(64));
    CommandList first;
    REQUIRE_OK(first.fill(buffer, 0, 64, 1));
    REQUIRE_OK(t.device.queue(QueueKind::compute)
                   .submit(std::move(first), {.wait = {}, .signal = {{timeline, 3}}}));
    CommandList lower;
    REQUIRE_OK(lower.fill(buffer, 0, 64, 2));
    CHECK_ERROR(t.device.queue(QueueKind::compute)
                    .submit(std::move(lower), {.wait = {}, .signal = {{timeline, 2}}}),
                ErrorCode::invalid_argument);
    CHECK_FALSE(timeline.signal(3).ok());
    // Value 3, submitted before the rejected call, is still reached.
    CHECK_OK(timeline.wait(3, ferry_test::kLongWait));
  });
}

TEST_CASE("timeline: a failed submission fails its signals; waiters get timeline_failed") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const Timeline timeline = REQUIRE_VALUE(t.device.create_timeline());
    const std::uint64_t size = 4096;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    Buffer buffer = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, data));
    Buffer other = REQUIRE_VALUE(t.device.create_buffer(size));

    // Value 1: a good submission.
    CommandList good;
    REQUIRE_OK(good.copy(buffer, 0, other, 0, size));
    REQUIRE_OK(t.device.queue(QueueKind::upload)
                   .submit(std::move(good), {.wait = {}, .signal = {{timeline, 1}}}));

    // Value 2: rejected (a fill is not allowed on the upload queue).
    CommandList bad;
    REQUIRE_OK(bad.fill(buffer, 0, 16, 0));
    const auto rejected = t.device.queue(QueueKind::upload)
                              .submit(std::move(bad), {.wait = {}, .signal = {{timeline, 2}}});
    REQUIRE_FALSE(rejected.ok());
    MESSAGE("rejected submission: ", rejected.status().to_string());

    // Values before still complete; the failed value and later ones fail, promptly.
    CHECK_OK(timeline.wait(1, ferry_test::kLongWait));
    const auto start = Clock::now();
    CHECK_ERROR(timeline.wait(2, ferry_test::kLongWait), ErrorCode::timeline_failed);
    CHECK_ERROR(timeline.wait(3, ferry_test::kLongWait), ErrorCode::timeline_failed);
    CHECK(Clock::now() - start < std::chrono::seconds(5));
    CHECK_FALSE(timeline.failure().ok());
    // A failed timeline takes no new signals.
    CHECK_FALSE(timeline.signal(10).ok());

    // A submission waiting on the failed value fails too (at submit, or through its signals),
    // and does not run.
    Buffer untouched =
        REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, ferry_test::poison_bytes(size, 14)));
    const Timeline after = REQUIRE_VALUE(t.device.create_timeline());
    CommandList waiting;
    REQUIRE_OK(waiting.copy(buffer, 0, untouched, 0, size));
    const auto dependent =
        t.device.queue(QueueKind::download)
            .submit(std::move(waiting), {.wait = {{timeline, 2}}, .signal = {{after, 1}}});
    if (dependent.ok()) {
      CHECK_ERROR(after.wait(1, ferry_test::kLongWait), ErrorCode::timeline_failed);
    } else {
      CHECK_ERROR(after.wait(1, std::chrono::seconds(5)), ErrorCode::timeline_failed);
    }

    // The queues go on working after a failure.
    for (const QueueKind kind : {QueueKind::upload, QueueKind::download, QueueKind::compute}) {
      INFO("queue ", ferry::to_string(kind));
      CHECK_OK(ferry_test::copy_and_wait(t.device, kind, buffer, 0, other, 0, size));
      CHECK_OK(t.device.queue(kind).wait_idle(ferry_test::kLongWait));
    }
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, untouched, 0, size)),
        ferry_test::poison_bytes(size, 14), "target of the failed dependent copy");
    ferry_test::check_bytes_equal(REQUIRE_VALUE(ferry_test::read_bytes(t.device, other, 0, size)),
                                  data, "target of the good copy");
  });
}

TEST_CASE("timeline: a submission held back on a host value that then fails is released") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    // The held-back submission waits on gate=2; gate fails at 1 (a rejected submission that
    // would have signalled it), so the held submission must not hang forever.
    const Timeline gate = REQUIRE_VALUE(t.device.create_timeline());
    const Timeline after = REQUIRE_VALUE(t.device.create_timeline());
    Buffer buffer = REQUIRE_VALUE(t.device.create_buffer(256));
    CommandList held;
    REQUIRE_OK(held.fill(buffer, 0, 256, 7));
    const auto held_point =
        t.device.queue(QueueKind::compute)
            .submit(std::move(held), {.wait = {{gate, 2}}, .signal = {{after, 1}}});
    REQUIRE_OK(held_point);

    CommandList bad;
    REQUIRE_OK(bad.fill(buffer, 0, 16, 0));
    REQUIRE_FALSE(t.device.queue(QueueKind::download)
                      .submit(std::move(bad), {.wait = {}, .signal = {{gate, 1}}})
                      .ok());
    CHECK_ERROR(after.wait(1, std::chrono::seconds(10)), ErrorCode::timeline_failed);
    // The compute queue is not stuck behind it.
    CHECK_OK(ferry_test::fill_and_wait(t.device, buffer, 0, 256, 9));
    CHECK_OK(t.device.wait_idle(ferry_test::kLongWait));
  });
}
