// Several devices at once (issue 17): each device's staging pools and pipelines are its own, so
// an ingress and an egress pipeline on every device, all running together, deliver exactly what
// each would alone. Devices: every device of the backend (up to 4), or the backend's device
// opened twice where it has one.
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "device_io.hpp"
#include "harness.hpp"
#include "pipeline_data.hpp"
#include "test_data.hpp"

using ferry::Device;
using ferry_test::BackendUnderTest;

TEST_CASE("several devices at once: an ingress and an egress pipeline per device, all together, deliver exactly") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    const std::vector<Device> devices = t.several_devices();
    INFO(devices.size() << " devices");
    const ferry::NormalizeParams params = ferry_test::awkward_params(t.rng);
    const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    constexpr std::size_t kBatches = 4, kSteps = 3;
    struct PerDevice {
      std::vector<std::vector<std::byte>> batches;  // ingress input
      std::vector<std::vector<std::byte>> outputs;  // egress truth
      std::vector<ferry::Buffer> output_buffers;
      std::vector<std::vector<std::byte>> received;  // what the egress consumer got
      std::mutex mutex;
    };
    std::vector<PerDevice> work(devices.size());
    for (std::size_t d = 0; d < devices.size(); ++d) {
      work[d].batches = ferry_test::make_batches(t.rng, kBatches, shape.input_bytes);
      for (std::size_t s = 0; s < kSteps; ++s) {
        const std::uint64_t size = ferry_test::uniform(t.rng, 1, 70000);
        work[d].outputs.push_back(ferry_test::random_bytes(t.rng, size));
        work[d].output_buffers.push_back(
            REQUIRE_VALUE(ferry_test::device_buffer_with(devices[d], work[d].outputs.back())));
        work[d].received.emplace_back(size);
      }
    }
    // Every pipeline made (and producing) before any is drained, then each device driven by a
    // thread of its own.
    std::vector<ferry::IngressPipeline> ingress;
    std::vector<ferry::EgressPipeline> egress;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      ferry::IngressOptions in;
      in.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
      in.depth = kBatches + 1;  // every batch held until checked below
      ingress.push_back(REQUIRE_VALUE(
          ferry::IngressPipeline::create(devices[d], in, ferry_test::pageable_source(work[d].batches))));
      ferry::EgressOptions out;
      out.chunk_bytes = 16384;
      out.workers = 2;
      PerDevice& w = work[d];
      egress.push_back(REQUIRE_VALUE(ferry::EgressPipeline::create(
          devices[d], out, [&w](const ferry::EgressChunk& chunk) {
            std::lock_guard lock(w.mutex);
            std::memcpy(w.received[chunk.step].data() + chunk.offset, chunk.bytes.data(), chunk.bytes.size());
            return ferry::Status();
          })));
    }
    std::vector<std::vector<ferry::IngressBatch>> arrived(devices.size());
    std::vector<ferry::Status> results(devices.size());
    std::vector<std::thread> threads;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      threads.emplace_back([&, d] {
        for (std::size_t s = 0; s < kSteps && results[d].ok(); ++s) {
          results[d] = egress[d].push(work[d].output_buffers[s], 0, work[d].outputs[s].size(), {}).status();
        }
        while (results[d].ok()) {
          ferry::Result<std::optional<ferry::IngressBatch>> next = ingress[d].next(ferry_test::kLongWait);
          if (!next.ok()) results[d] = next.status();
          if (!next.ok() || !next->has_value()) break;
          arrived[d].push_back(std::move(**next));
        }
        if (results[d].ok()) results[d] = egress[d].close();
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (std::size_t d = 0; d < devices.size(); ++d) {
      INFO("device " << d);
      CHECK_OK(results[d]);
      REQUIRE(arrived[d].size() == kBatches);
      for (std::size_t b = 0; b < kBatches; ++b) {
        CHECK(arrived[d][b].index() == b);
        ferry_test::check_batch(devices[d], arrived[d][b], params, work[d].batches[b]);
      }
      for (std::size_t s = 0; s < kSteps; ++s) {
        ferry_test::check_bytes_equal(work[d].received[s], work[d].outputs[s], "egress step");
      }
    }
  });
}
