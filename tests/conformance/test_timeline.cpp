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
    REQUIRE_OK(ferry::fill(compute, b, 1000, 777, 0x0BADF00Du));
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
    REQUIRE_OK(ferry::fill(first, buffer, 0, 64, 1));
    REQUIRE_OK(t.device.queue(QueueKind::compute)
                   .submit(std::move(first), {.wait = {}, .signal = {{timeline, 3}}}));
    CommandList lower;
    REQUIRE_OK(ferry::fill(lower, buffer, 0, 64, 2));
    CHECK_ERROR(t.device.queue(QueueKind::compute)
                    .submit(std::move(lower), {.wait = {}, .signal = {{timeline, 2}}}),
                ErrorCode::invalid_argument);
    CHECK_FALSE(timeline.signal(3).ok());
    // Value 3, submitted before the rejected call, is still reached.
    CHECK_OK(timeline.wait(3, ferry_test::kLongWait));
  });
}

TEST_CASE("timeline: a rejected submission changes nothing; its values stay free") {
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

    // Value 2: rejected (a fill is not allowed on the upload queue): nothing changes.
    CommandList bad;
    REQUIRE_OK(ferry::fill(bad, buffer, 0, 16, 0));
    CHECK_ERROR(t.device.queue(QueueKind::upload)
                    .submit(std::move(bad), {.wait = {}, .signal = {{timeline, 2}}}),
                ErrorCode::invalid_argument);
    CHECK_OK(timeline.wait(1, ferry_test::kLongWait));
    CHECK(timeline.submitted_value() == 1);
    CHECK_OK(timeline.failure());
    CHECK_ERROR(timeline.wait(2, std::chrono::milliseconds(20)), ErrorCode::timeout);

    // A submission waiting for value 2 is held back, not failed, and runs once a later
    // submission signals 2.
    Buffer target = REQUIRE_VALUE(t.device.create_buffer(size));
    CommandList waiting;
    REQUIRE_OK(waiting.copy(buffer, 0, target, 0, size));
    const TimelinePoint waited = REQUIRE_VALUE(
        t.device.queue(QueueKind::download).submit(std::move(waiting), {.wait = {{timeline, 2}}, .signal = {}}));
    CommandList second;
    REQUIRE_OK(ferry::fill(second, other, 0, 16, 0x01020304u));
    REQUIRE_OK(t.device.queue(QueueKind::compute)
                   .submit(std::move(second), {.wait = {}, .signal = {{timeline, 2}}}));
    CHECK_OK(timeline.wait(2, ferry_test::kLongWait));
    CHECK_OK(waited.wait(ferry_test::kLongWait));
    ferry_test::check_bytes_equal(REQUIRE_VALUE(ferry_test::read_bytes(t.device, target, 0, size)),
                                  data, "copy that waited for the re-signalled value");
  });
}

TEST_CASE("timeline: a submission the backend refuses fails its own values; the queue goes on") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const Timeline timeline = REQUIRE_VALUE(t.device.create_timeline());
    const std::uint64_t size = 4099;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    Buffer source = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, data));
    const auto queue = t.device.queue(QueueKind::upload);
    const Timeline progress = queue.progress();

    Buffer first = REQUIRE_VALUE(t.device.create_buffer(size));
    CommandList good;
    REQUIRE_OK(good.copy(source, 0, first, 0, size));
    REQUIRE_OK(queue.submit(std::move(good), {.wait = {}, .signal = {{timeline, 1}}}));

    // Value 4 (moving the timeline from 1 through 2 and 3): the backend refuses it.
    Buffer refused_target =
        REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, ferry_test::poison_bytes(size, 3)));
    const std::uint64_t refused_progress = progress.submitted_value() + 1;
    {
      const ferry_test::ScopedFaultPlan faults(
          ferry::FaultPlan{}.fail(ferry::FaultSite::submit, 1));
      CommandList refused;
      REQUIRE_OK(refused.copy(source, 0, refused_target, 0, size));
      const auto result = queue.submit(std::move(refused), {.wait = {}, .signal = {{timeline, 4}}});
      CHECK_ERROR(result, ErrorCode::backend_error);
      CHECK(result.status().message().find("injected fault") != std::string::npos);
    }
    // Its own values fail, promptly; the one before completes.
    CHECK_OK(timeline.wait(1, ferry_test::kLongWait));
    const auto start = Clock::now();
    for (const std::uint64_t value : {2, 3, 4}) {
      INFO("value ", value);
      CHECK_ERROR(timeline.wait(value, ferry_test::kLongWait), ErrorCode::timeline_failed);
    }
    CHECK_ERROR(progress.wait(refused_progress, ferry_test::kLongWait), ErrorCode::timeline_failed);
    CHECK(Clock::now() - start < std::chrono::seconds(5));
    CHECK_FALSE(timeline.failure().ok());

    // A submission waiting on a failed value is refused and never runs.
    Buffer untouched =
        REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, ferry_test::poison_bytes(size, 14)));
    CommandList dependent;
    REQUIRE_OK(dependent.copy(source, 0, untouched, 0, size));
    CHECK_ERROR(t.device.queue(QueueKind::download)
                    .submit(std::move(dependent), {.wait = {{timeline, 3}}, .signal = {}}),
                ErrorCode::timeline_failed);

    // Later values of the same timeline, and later work on the same queue, go on.
    Buffer later = REQUIRE_VALUE(t.device.create_buffer(size));
    CommandList after;
    REQUIRE_OK(after.copy(source, 0, later, 0, size));
    const TimelinePoint after_done =
        REQUIRE_VALUE(queue.submit(std::move(after), {.wait = {}, .signal = {{timeline, 5}}}));
    CHECK(after_done.value > refused_progress);
    CHECK_OK(timeline.wait(5, ferry_test::kLongWait));
    CHECK_OK(after_done.wait(ferry_test::kLongWait));
    REQUIRE_OK(timeline.signal(6));
    CHECK_OK(timeline.wait(6, ferry_test::kLongWait));
    for (const QueueKind kind : {QueueKind::upload, QueueKind::download, QueueKind::compute}) {
      CHECK_OK(t.device.queue(kind).wait_idle(ferry_test::kLongWait));
    }
    CHECK_OK(t.device.wait_idle(ferry_test::kLongWait));

    ferry_test::check_bytes_equal(REQUIRE_VALUE(ferry_test::read_bytes(t.device, first, 0, size)),
                                  data, "copy before the refused one");
    ferry_test::check_bytes_equal(REQUIRE_VALUE(ferry_test::read_bytes(t.device, later, 0, size)),
                                  data, "copy after the refused one");
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, refused_target, 0, size)),
        ferry_test::poison_bytes(size, 3), "target of the refused copy");
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, untouched, 0, size)),
        ferry_test::poison_bytes(size, 14), "target of the refused dependent copy");
  });
}

TEST_CASE("timeline: a held-back submission whose wait fails fails in turn, and nothing else") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    // The held-back fill waits on gate=2; the submission that would signal gate=2 is refused by
    // the backend, so the held fill fails (its signal `after`=1 with it) instead of hanging.
    const Timeline gate = REQUIRE_VALUE(t.device.create_timeline());
    const Timeline after = REQUIRE_VALUE(t.device.create_timeline());
    const std::uint64_t size = 777;
    Buffer held_target =
        REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, ferry_test::poison_bytes(size, 9)));
    CommandList held;
    REQUIRE_OK(ferry::fill(held, held_target, 0, size, 7));
    const TimelinePoint held_point = REQUIRE_VALUE(
        t.device.queue(QueueKind::compute)
            .submit(std::move(held), {.wait = {{gate, 2}}, .signal = {{after, 1}}}));
    // Behind it on the same queue: held back by queue order, released with it, and run.
    Buffer behind_target = REQUIRE_VALUE(t.device.create_buffer(size));
    CommandList behind;
    REQUIRE_OK(ferry::fill(behind, behind_target, 0, size, 0xA1B2C3D4u));
    const TimelinePoint behind_point =
        REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(behind)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_FALSE(behind_point.reached());

    Buffer scratch = REQUIRE_VALUE(t.device.create_buffer(size));
    {
      const ferry_test::ScopedFaultPlan faults(
          ferry::FaultPlan{}.fail(ferry::FaultSite::submit, 1));
      CommandList refused;
      REQUIRE_OK(refused.copy(held_target, 0, scratch, 0, size));
      CHECK_ERROR(t.device.queue(QueueKind::download)
                      .submit(std::move(refused), {.wait = {}, .signal = {{gate, 2}}}),
                  ErrorCode::backend_error);
    }
    CHECK_ERROR(after.wait(1, ferry_test::kLongWait), ErrorCode::timeline_failed);
    CHECK_ERROR(held_point.wait(ferry_test::kLongWait), ErrorCode::timeline_failed);
    CHECK_OK(behind_point.wait(ferry_test::kLongWait));
    CHECK_OK(ferry_test::fill_and_wait(t.device, scratch, 0, 64, 9));
    CHECK_OK(t.device.wait_idle(ferry_test::kLongWait));

    // Both timelines take later values.
    REQUIRE_OK(gate.signal(3));
    CommandList next;
    REQUIRE_OK(ferry::fill(next, scratch, 0, 64, 1));
    REQUIRE_OK(t.device.queue(QueueKind::compute)
                   .submit(std::move(next), {.wait = {{gate, 3}}, .signal = {{after, 2}}}));
    CHECK_OK(after.wait(2, ferry_test::kLongWait));

    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, held_target, 0, size)),
        ferry_test::poison_bytes(size, 9), "target of the failed held-back fill");
    std::vector<std::byte> expected(size);
    ferry_test::apply_fill(expected, 0, size, 0xA1B2C3D4u);
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, behind_target, 0, size)), expected,
        "target of the fill behind it");
  });
}
