// Lifetimes: what a submission uses stays alive until it completes, whatever handles the user
// drops; a device lives on while any of its objects does.
#include <chrono>
#include <cstring>
#include <thread>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::Device;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry::Timeline;
using ferry_test::BackendUnderTest;

TEST_CASE("lifetime: buffers dropped right after submitting stay alive until the work is done") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::uint64_t size = 200003;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    const Timeline gate = REQUIRE_VALUE(t.device.create_timeline());
    Buffer readback = REQUIRE_VALUE(t.device.create_buffer(size, MemoryKind::host_readback));
    ferry_test::fill_poison(REQUIRE_VALUE(readback.host_span()), 17);
    ferry::TimelinePoint done;
    {
      Buffer staging = REQUIRE_VALUE(t.device.create_buffer(size, MemoryKind::host_upload));
      std::memcpy(REQUIRE_VALUE(staging.host_span()).data(), data.data(), size);
      Buffer middle = REQUIRE_VALUE(t.device.create_buffer(size));
      CommandList commands;
      REQUIRE_OK(commands.copy(staging, 0, middle, 0, size));
      REQUIRE_OK(commands.copy(middle, 0, readback, 0, size));
      // Held back, so nothing has run when the handles go.
      done = REQUIRE_VALUE(t.device.queue(QueueKind::download)
                               .submit(std::move(commands), {.wait = {{gate, 1}}, .signal = {}}));
      staging.release();
    }  // middle destroyed here
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_FALSE(done.reached());
    REQUIRE_OK(gate.signal(1));
    REQUIRE_OK(done.wait(ferry_test::kLongWait));
    ferry_test::check_bytes_equal(REQUIRE_VALUE(readback.host_span()), data, "readback");
  });
}

TEST_CASE("lifetime: dropping every device handle with work in flight loses nothing") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::uint64_t size = 1 << 20;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    Buffer readback;
    Timeline done;
    {
      Device device = REQUIRE_VALUE(ferry::Device::open(ferry::to_string(t.backend), 0, t.options));
      const ferry::StagingPool pool =
          REQUIRE_VALUE(device.create_staging_pool(ferry_test::small_pool()));
      Buffer target = REQUIRE_VALUE(device.create_buffer(size));
      readback = REQUIRE_VALUE(device.create_buffer(size, MemoryKind::host_readback));
      done = REQUIRE_VALUE(device.create_timeline());
      const ferry::TimelinePoint uploaded =
          REQUIRE_VALUE(ferry::upload(device.queue(QueueKind::upload), pool, data, target, 0));
      CommandList down;
      REQUIRE_OK(down.copy(target, 0, readback, 0, size));
      REQUIRE_OK(device.queue(QueueKind::download)
                     .submit(std::move(down), {.wait = {uploaded}, .signal = {{done, 1}}}));
    }  // the Device, its queues, the pool and the device buffer handles are gone
    // The timeline and the readback buffer keep what they need alive.
    REQUIRE_OK(done.wait(1, ferry_test::kLongWait));
    ferry_test::check_bytes_equal(REQUIRE_VALUE(readback.host_span()), data,
                                  "readback after the device handle went");
  });
}
