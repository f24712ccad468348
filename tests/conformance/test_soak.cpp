// A soak: the kinds of work the suite tests one by one, over and over on a device opened and
// closed each round (chunked transfers, timeline chains over the three queues, an ingress and an
// egress pipeline), every result checked, and the process's resident memory checked flat once
// warmed up. A few seconds per backend by default; FERRY_SOAK_SECONDS=N soaks longer.
//
// Its devices are opened without the validation layer: the Khronos layer of Debian 12 (1.3.239)
// keeps ~3 KiB per command buffer ever allocated (heaptrack: all of it under
// vkAllocateCommandBuffers, freed or not), which would hide a leak of ferry's own. ctest runs
// it on its own, without FERRY_VALIDATION (tests/CMakeLists.txt); when FERRY_VALIDATION forces the
// layer on anyway, the memory check is skipped and says so.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "device_io.hpp"
#include "harness.hpp"
#include "ops/normalize_truth.hpp"
#include "pipeline_data.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::Device;
using ferry::HostBatch;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry::Status;
using ferry::Timeline;
using ferry::TimelinePoint;
using ferry_test::BackendUnderTest;
using Clock = std::chrono::steady_clock;

namespace {

// Sanitizers keep freed memory in quarantine and grow shadow memory: RSS says nothing there
// (LeakSanitizer checks leaks in the asan run instead).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kRssMeaningful = false;
#else
constexpr bool kRssMeaningful = true;
#endif

std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0;
  std::uint64_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

double soak_seconds() {
  const char* text = std::getenv("FERRY_SOAK_SECONDS");
  const double seconds = text != nullptr ? std::atof(text) : 0.0;
  return seconds > 0.0 ? seconds : 3.0;
}

bool validation_forced() {
  const char* value = std::getenv("FERRY_VALIDATION");
  return value != nullptr && value[0] != '\0' && std::string(value) != "0";
}

// One round of work on a fresh device; CHECKs every result.
void soak_round(BackendUnderTest& t, std::mt19937_64& rng) {
  ferry::DeviceOptions options = t.options;
  options.validation = false;  // see the top of this file
  Device device = REQUIRE_VALUE(Device::open(ferry::to_string(t.backend), 0, options));
  {
    // Chunked transfers through small pools.
    const ferry::StagingPool up = REQUIRE_VALUE(
        device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload, 1 << 16, 2)));
    const ferry::StagingPool down = REQUIRE_VALUE(device.create_staging_pool(
        ferry_test::small_pool(MemoryKind::host_readback, 1 << 16, 2)));
    const std::uint64_t size = ferry_test::log_uniform_size(rng, 1, 400000);
    const std::vector<std::byte> data = ferry_test::random_bytes(rng, size);
    Buffer target = REQUIRE_VALUE(device.create_buffer(size));
    const TimelinePoint uploaded = REQUIRE_VALUE(
        ferry::upload(device.queue(QueueKind::upload), up, data, target, 0));
    std::vector<std::byte> back(size);
    REQUIRE_OK(ferry::download(device.queue(QueueKind::download), down, target, 0, back,
                               {.wait = {uploaded}, .signal = {}}));
    ferry_test::check_bytes_equal(back, data, "soak transfer");

    // Timeline chains over the three queues, many small submissions.
    const Timeline chain = REQUIRE_VALUE(device.create_timeline());
    Buffer readback = REQUIRE_VALUE(device.create_buffer(size, MemoryKind::host_readback));
    std::uint64_t value = 0;
    for (int i = 0; i < 8; ++i) {
      CommandList fill;
      REQUIRE_OK(ferry::fill(fill, target, 0, size, 0x01010101u * static_cast<std::uint32_t>(i)));
      REQUIRE_OK(device.queue(QueueKind::compute)
                     .submit(std::move(fill), {.wait = {{chain, value}}, .signal = {{chain, value + 1}}}));
      CommandList copy;
      REQUIRE_OK(copy.copy(target, 0, readback, 0, size));
      REQUIRE_OK(device.queue(i % 2 == 0 ? QueueKind::download : QueueKind::upload)
                     .submit(std::move(copy), {.wait = {{chain, value + 1}}, .signal = {{chain, value + 2}}}));
      value += 2;
    }
    REQUIRE_OK(chain.wait(value, ferry_test::kLongWait));
    std::vector<std::byte> expected(size);
    ferry_test::apply_fill(expected, 0, size, 0x07070707u);
    ferry_test::check_bytes_equal(REQUIRE_VALUE(readback.host_span()), expected, "soak chain");

    // Ingress: three batches.
    ferry::IngressOptions ingress_options;
    const ferry::NormalizeParams ingress_params = ferry_test::awkward_params(rng);
    ingress_options.transform = REQUIRE_VALUE(ferry::normalize_transform(ingress_params));
    const auto shape = REQUIRE_VALUE(ferry::resolve_normalize(ingress_params));
    const auto batches = ferry_test::make_batches(rng, 3, shape.input_bytes);
    ferry::IngressPipeline ingress = REQUIRE_VALUE(ferry::IngressPipeline::create(
        device, ingress_options, ferry_test::pageable_source(batches)));
    for (std::size_t i = 0; i < batches.size(); ++i) {
      std::optional<ferry::IngressBatch> batch = REQUIRE_VALUE(ingress.next(ferry_test::kLongWait));
      REQUIRE(batch.has_value());
      REQUIRE_OK(batch->ready().wait(ferry_test::kLongWait));
      ferry_test::check_bytes_equal(
          REQUIRE_VALUE(ferry_test::read_bytes(device, batch->tensor(), 0, shape.output_bytes)),
          ferry_test::expected_output(ingress_params, batches[i]), "soak ingress");
    }

    // Egress: three steps of the chain's last output.
    std::atomic<std::uint64_t> wrong{0};
    ferry::EgressOptions egress_options;
    egress_options.pool = down;
    ferry::EgressPipeline egress = REQUIRE_VALUE(ferry::EgressPipeline::create(
        device, egress_options, [&](const ferry::EgressChunk& chunk) {
          if (std::memcmp(chunk.bytes.data(), expected.data() + chunk.offset, chunk.bytes.size()) != 0) {
            wrong.fetch_add(1);
          }
          return Status();
        }));
    for (int step = 0; step < 3; ++step) {
      REQUIRE_VALUE(egress.push(target, 0, size, TimelinePoint{chain, value}));
    }
    REQUIRE_OK(egress.close());
    CHECK(wrong.load() == 0);
  }
  REQUIRE_OK(device.close());
}

}  // namespace

TEST_CASE("soak: transfers, chains, pipelines and device open/close with flat memory") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    const double seconds = soak_seconds();
    const auto start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    // Allocators (glibc's per-thread arenas, the driver's) grow for the first few dozen rounds,
    // then stay flat: compare the end with the RSS after the first 40% of the soak.
    constexpr int kMinWarmUpRounds = 10;
    const double warm_up_seconds = 0.4 * seconds;
    std::uint64_t rss_after_warm_up = 0;
    int warm_up_rounds = 0;
    int rounds = 0;
    std::string trace;  // RSS every tenth of the soak, for the report
    double next_sample = 0.0;
    while (rss_after_warm_up == 0 || rounds < warm_up_rounds + 5 || elapsed() < seconds) {
      soak_round(t, t.rng);
      ++rounds;
      if (rss_after_warm_up == 0 && rounds >= kMinWarmUpRounds && elapsed() >= warm_up_seconds) {
        rss_after_warm_up = resident_bytes();
        warm_up_rounds = rounds;
      }
      if (elapsed() >= next_sample) {
        trace += " " + std::to_string(rounds) + ":" + std::to_string(resident_bytes() >> 20) +
                 "MiB";
        next_sample += seconds / 10;
      }
    }
    const std::uint64_t rss_end = resident_bytes();
    const double mib = 1 << 20;
    MESSAGE("soak on " << ferry::to_string(t.backend) << ": " << rounds << " rounds in "
                       << elapsed() << " s; RSS after " << warm_up_rounds << " rounds "
                       << rss_after_warm_up / mib << " MiB, at the end " << rss_end / mib
                       << " MiB; rounds:RSS" << trace);
    if (!kRssMeaningful) {
      MESSAGE("RSS not checked: a sanitizer's quarantine and shadow memory change it");
    } else if (validation_forced()) {
      MESSAGE("RSS not checked: FERRY_VALIDATION forces the validation layer, which leaks");
    } else {
      // Flat: a leak of a round's buffers (hundreds of KiB) over tens of rounds is far above
      // this allowance for allocator slack.
      CHECK(rss_end <= rss_after_warm_up + rss_after_warm_up / 20 + (8ull << 20));
    }
  });
}
