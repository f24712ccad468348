// What an application does wrong, or what goes wrong under it, fails only the work concerned:
// limits known at record time, closing with work held back, pipelines whose callbacks throw or
// close their own pipeline, threads that cannot be started, empty handles, timeouts of any
// length, and error messages that print numbers.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "device_io.hpp"
#include "harness.hpp"
#include "pipeline_data.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::Device;
using ferry::EgressChunk;
using ferry::EgressClose;
using ferry::EgressOptions;
using ferry::EgressPipeline;
using ferry::ErrorCode;
using ferry::HostBatch;
using ferry::IngressBatch;
using ferry::IngressOptions;
using ferry::IngressPipeline;
using ferry::MemoryKind;
using ferry::NormalizeParams;
using ferry::QueueKind;
using ferry::Status;
using ferry::Timeline;
using ferry::TimelinePoint;
using ferry::Timeout;
using ferry_test::BackendUnderTest;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// One uint8 image, one channel, to float32: `height` x `width`.
NormalizeParams one_plane(std::uint32_t height, std::uint32_t width) {
  NormalizeParams p;
  p.input.batch = 1;
  p.input.channels = 1;
  p.input.height = height;
  p.input.width = width;
  p.output_type = ferry::ElementType::float32;
  return p;
}

// Records (never submits) `params` on buffers of its sizes; returns the recording's status.
// ok() with `allocated` false when the buffers could not be made.
Status record_normalize(const Device& device, const NormalizeParams& params, bool& allocated) {
  const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
  auto src = device.create_buffer(shape.input_bytes);
  auto dst = device.create_buffer(shape.output_bytes);
  allocated = src.ok() && dst.ok();
  if (!allocated) return Status();
  CommandList list;
  Status recorded = ferry::normalize(list, *src, 0, *dst, 0, params);
  CHECK(list.empty() == !recorded.ok());
  return recorded;
}

EgressOptions small_egress(const ferry::StagingPool& pool) {
  EgressOptions options;
  options.workers = 2;
  options.pool = pool;
  options.chunk_bytes = 4096;
  options.max_pending_steps = 4;
  return options;
}

// A device buffer of `size` bytes filled with `pattern`, and when the fill is done.
std::pair<Buffer, TimelinePoint> filled(const Device& device, std::uint64_t size,
                                        std::uint32_t pattern) {
  Buffer buffer = REQUIRE_VALUE(device.create_buffer(size));
  CommandList fill;
  REQUIRE_OK(ferry::fill(fill, buffer, 0, size, pattern));
  const TimelinePoint done = REQUIRE_VALUE(device.queue(QueueKind::compute).submit(std::move(fill)));
  return {std::move(buffer), done};
}

std::vector<std::byte> filled_bytes(std::uint64_t size, std::uint32_t pattern) {
  std::vector<std::byte> bytes(size);
  ferry_test::apply_fill(bytes, 0, size, pattern);
  return bytes;
}

}  // namespace

TEST_CASE("failures: a normalize over the device's limits is refused when recorded") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    // One image whose float32 output (131 MiB) exceeds a 128 MiB storage-buffer window
    // (lavapipe's); on a device with a larger window, one whose output exceeds 2 GiB, ferry's cap.
    NormalizeParams over = one_plane(4096, 8200);
    bool allocated = false;
    Status recorded = record_normalize(t.device, over, allocated);
    REQUIRE(allocated);
    if (t.backend != ferry::Backend::vulkan) {
      CHECK_OK(recorded);  // no window on this backend
      return;
    }
    if (recorded.ok()) {
      over = one_plane(16384, 32769);
      recorded = record_normalize(t.device, over, allocated);
      REQUIRE_MESSAGE(allocated, "could not allocate the 2.5 GiB this check needs");
    }
    CHECK_ERROR(recorded, ErrorCode::resource_exhausted);
    CHECK(recorded.message().find("maxStorageBufferRange") != std::string::npos);
    CHECK(recorded.message().find("ferry::normalize") != std::string::npos);

    // Nothing was submitted, so the compute queue and every timeline are as they were.
    CHECK_OK(ferry_test::fill_and_wait(t.device, REQUIRE_VALUE(t.device.create_buffer(256)), 0,
                                       256, 5));
    CHECK_OK(t.device.queue(QueueKind::compute).wait_idle(ferry_test::kLongWait));

    // A pipeline of that shape is refused when made, not at its first batch.
    IngressOptions options;
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(over));
    options.depth = 2;
    const auto pipeline = IngressPipeline::create(
        t.device, options, [](std::uint64_t) -> ferry::Result<std::optional<HostBatch>> {
          return std::optional<HostBatch>();
        });
    CHECK_ERROR(pipeline, ErrorCode::resource_exhausted);
    CHECK(pipeline.status().message().find("IngressPipeline::create") != std::string::npos);
  });
}

TEST_CASE("failures: a batch released with another device's point is an error for that call") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    const Device other = REQUIRE_VALUE(t.open_another());
    const Timeline foreign = REQUIRE_VALUE(other.create_timeline());
    IngressOptions options;
    const ferry::NormalizeParams params = ferry_test::awkward_params(t.rng);
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
    options.depth = 2;
    const auto shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    const auto batches = ferry_test::make_batches(t.rng, 12, shape.input_bytes);
    IngressPipeline pipeline = REQUIRE_VALUE(
        IngressPipeline::create(t.device, options, ferry_test::pageable_source(batches)));
    for (std::size_t i = 0; i < batches.size(); ++i) {
      std::optional<IngressBatch> batch = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
      REQUIRE(batch.has_value());
      CHECK(batch->index() == i);
      ferry_test::check_batch(t, *batch, params, batches[i]);
      if (i % 4 == 2) {
        CHECK_ERROR(batch->release(TimelinePoint{foreign, 1}), ErrorCode::invalid_argument);
        CHECK(static_cast<bool>(*batch));  // still held
      }
      REQUIRE_OK(batch->release(batch->ready()));
      CHECK_FALSE(static_cast<bool>(*batch));
      CHECK_OK(batch->release(TimelinePoint{foreign, 1}));  // releasing twice does nothing
    }
    CHECK_FALSE(REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait)).has_value());
  });
}

TEST_CASE("failures: closing a device fails held-back work and returns; work in flight ends") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    Device device = REQUIRE_VALUE(t.open_another());
    const Timeline gate = REQUIRE_VALUE(device.create_timeline());  // never signalled
    const Timeline after = REQUIRE_VALUE(device.create_timeline());
    const Timeline done = REQUIRE_VALUE(device.create_timeline());
    const std::uint64_t size = 1 << 20;
    Buffer source = REQUIRE_VALUE(
        ferry_test::device_buffer_with(device, ferry_test::random_bytes(t.rng, size)));
    Buffer target = REQUIRE_VALUE(device.create_buffer(size));
    Buffer readback = REQUIRE_VALUE(device.create_buffer(size, MemoryKind::host_readback));

    CommandList in_flight;
    REQUIRE_OK(in_flight.copy(source, 0, readback, 0, size));
    REQUIRE_OK(device.queue(QueueKind::download)
                   .submit(std::move(in_flight), {.wait = {}, .signal = {{done, 1}}}));
    CommandList held;
    REQUIRE_OK(held.copy(source, 0, target, 0, size));
    const TimelinePoint held_point = REQUIRE_VALUE(
        device.queue(QueueKind::compute)
            .submit(std::move(held), {.wait = {{gate, 1}}, .signal = {{after, 1}}}));

    // Waiters with no timeout: one on the held-back work, one on a value nobody submitted.
    auto on_held = std::async(std::launch::async, [&] { return after.wait(1); });
    auto on_unsubmitted = std::async(std::launch::async, [&] { return gate.wait(1); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));

    const ferry_test::Watchdog watchdog("Device::close with held-back work");
    const auto start = Clock::now();
    CHECK_OK(device.close());  // the default: no timeout
    CHECK(Clock::now() - start < std::chrono::seconds(30));
    // A value the close failed reports device_closed whenever its wait started: before the
    // close (the waiters above may or may not have started by then) or after it.
    const Status held_before = on_held.get();
    CHECK_ERROR(held_before, ErrorCode::device_closed);
    CHECK_ERROR(after.wait(1), ErrorCode::device_closed);
    CHECK_ERROR(on_unsubmitted.get(), ErrorCode::device_closed);
    CHECK(done.value() == 1);  // in flight: completed before close returned
    CHECK_ERROR(held_point.wait(), ErrorCode::device_closed);
    CHECK_ERROR(done.wait(1), ErrorCode::device_closed);  // every object of a closed device
    CHECK_FALSE(device.is_open());
    CHECK_OK(device.close());  // twice is harmless
  });
}

TEST_CASE("failures: egress pipelines waiting on a point that never comes close without hanging") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::StagingPool pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback, 1 << 16)));
    const Timeline gate = REQUIRE_VALUE(t.device.create_timeline());  // signalled only at the end
    std::atomic<std::uint64_t> consumed{0};
    auto consumer = [&](const EgressChunk&) {
      consumed.fetch_add(1);
      return Status();
    };
    auto [output, written] = filled(t.device, 3 * 4096, 0x5A5A5A5Au);
    REQUIRE_OK(written.wait(ferry_test::kLongWait));
    {
      EgressPipeline cancelled =
          REQUIRE_VALUE(EgressPipeline::create(t.device, small_egress(pool), consumer));
      REQUIRE_VALUE(cancelled.push(output, 0, 3 * 4096, TimelinePoint{gate, 1}));
      const ferry_test::Watchdog watchdog("EgressPipeline::close(cancel)");
      CHECK_OK(cancelled.close(EgressClose::cancel));
      CHECK(cancelled.stats().chunks_dropped == 3);
    }
    {
      EgressPipeline destroyed =
          REQUIRE_VALUE(EgressPipeline::create(t.device, small_egress(pool), consumer));
      REQUIRE_VALUE(destroyed.push(output, 0, 4096, TimelinePoint{gate, 2}));
      // A second step behind it on the download queue: held back by queue order.
      REQUIRE_VALUE(destroyed.push(output, 4096, 4096, TimelinePoint{}));
      const ferry_test::Watchdog watchdog("~EgressPipeline with held-back downloads");
    }  // destroyed here
    CHECK(consumed.load() == 0);
    // The held-back downloads still own their leases; once they can run, the leases return.
    REQUIRE_OK(gate.signal(2));
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
    CHECK(pool.stats().bytes_in_use == 0);
  });
}

TEST_CASE("failures: several threads closing one egress pipeline at once all return") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::StagingPool pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback, 1 << 16)));
    auto [output, written] = filled(t.device, 10000, 0x01020304u);
    const std::vector<std::byte> expected = filled_bytes(10000, 0x01020304u);
    for (int round = 0; round < 12; ++round) {
      INFO("round " << round);
      std::atomic<std::uint64_t> bad_chunks{0};
      EgressOptions options = small_egress(pool);
      options.order = round % 2 == 0 ? ferry::EgressOrder::in_order : ferry::EgressOrder::as_completed;
      options.workers = 1 + round % 3;
      EgressPipeline pipeline = REQUIRE_VALUE(EgressPipeline::create(
          t.device, options, [&](const EgressChunk& chunk) {
            if (std::memcmp(chunk.bytes.data(), expected.data() + chunk.offset,
                            chunk.bytes.size()) != 0) {
              bad_chunks.fetch_add(1);
            }
            return Status();
          }));
      for (int step = 0; step < 3; ++step) REQUIRE_VALUE(pipeline.push(output, 0, 10000, written));
      const ferry_test::Watchdog watchdog("concurrent EgressPipeline::close");
      std::vector<std::future<Status>> closers;
      for (int i = 0; i < 3; ++i) {
        closers.push_back(std::async(std::launch::async, [&] { return pipeline.close(); }));
      }
      CHECK_OK(pipeline.close());
      for (auto& closer : closers) CHECK_OK(closer.get());
      CHECK(pipeline.stats().steps_consumed == 3);
      CHECK(bad_chunks.load() == 0);
    }
  });
}

TEST_CASE("failures: a throwing ingress transform fails the call or only its own batch") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    const ferry::NormalizeParams params = ferry_test::awkward_params(t.rng);
    const ferry::IngressTransform normalize = REQUIRE_VALUE(ferry::normalize_transform(params));
    const auto shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    const auto batches = ferry_test::make_batches(t.rng, 4, shape.input_bytes);
    auto source = [&](std::uint64_t index) -> ferry::Result<std::optional<HostBatch>> {
      if (index >= batches.size()) return std::optional<HostBatch>();
      return std::optional<HostBatch>(HostBatch::pageable(batches[index]));
    };
    // Call 0 is create()'s probe, call k + 1 records batch k.
    auto throwing_on = [&](int bad_call) {
      auto calls = std::make_shared<int>(0);
      IngressOptions options;
      options.transform = normalize;
      options.transform.record = [normalize, calls, bad_call](ferry::CommandList& commands,
                                                               const ferry::BufferRef& in,
                                                               const ferry::BufferRef& out) {
        if ((*calls)++ == bad_call) throw std::runtime_error("transform bug");
        return normalize.record(commands, in, out);
      };
      return options;
    };

    const auto refused = IngressPipeline::create(t.device, throwing_on(0), source);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == ErrorCode::internal);
    CHECK(refused.status().message().find("transform bug") != std::string::npos);

    IngressPipeline ingress = REQUIRE_VALUE(IngressPipeline::create(t.device, throwing_on(2), source));
    for (std::uint64_t i = 0; i < batches.size(); ++i) {
      INFO("batch " << i);
      auto next = ingress.next(ferry_test::kLongWait);
      if (i == 1) {
        REQUIRE_FALSE(next.ok());
        CHECK(next.status().code() == ErrorCode::internal);
        CHECK(next.status().message().find("transform bug") != std::string::npos);
        continue;
      }
      std::optional<IngressBatch> batch = REQUIRE_VALUE(std::move(next));
      REQUIRE(batch.has_value());
      ferry_test::check_batch(t, *batch, params, batches[i]);
    }
    CHECK_FALSE(REQUIRE_VALUE(ingress.next(ferry_test::kLongWait)).has_value());
  });
}

TEST_CASE("failures: a throwing source or consumer fails only its own batch or step") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    IngressOptions options;
    const ferry::NormalizeParams params = ferry_test::awkward_params(t.rng);
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
    const auto shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    const auto batches = ferry_test::make_batches(t.rng, 6, shape.input_bytes);
    IngressPipeline ingress = REQUIRE_VALUE(IngressPipeline::create(
        t.device, options, [&](std::uint64_t index) -> ferry::Result<std::optional<HostBatch>> {
          if (index == 2) throw std::runtime_error("source failed to decode image 2");
          if (index == 4) throw 7;  // NOLINT: not a std::exception, on purpose
          if (index >= batches.size()) return std::optional<HostBatch>();
          return std::optional<HostBatch>(HostBatch::pageable(batches[index]));
        }));
    for (std::uint64_t i = 0; i < batches.size(); ++i) {
      INFO("batch " << i);
      auto next = ingress.next(ferry_test::kLongWait);
      if (i == 2 || i == 4) {
        REQUIRE_FALSE(next.ok());
        CHECK(next.status().code() == ErrorCode::internal);
        CHECK(next.status().message().find("ingress batch " + std::to_string(i)) !=
              std::string::npos);
        CHECK(next.status().message().find(i == 2 ? "failed to decode image 2"
                                                  : "not a std::exception") != std::string::npos);
        continue;
      }
      std::optional<IngressBatch> batch = REQUIRE_VALUE(std::move(next));
      REQUIRE(batch.has_value());
      ferry_test::check_batch(t, *batch, params, batches[i]);
    }
    CHECK_FALSE(REQUIRE_VALUE(ingress.next(ferry_test::kLongWait)).has_value());

    const ferry::StagingPool pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback, 1 << 16)));
    auto [output, written] = filled(t.device, 5000, 0x11223344u);
    for (const auto policy : {ferry::ConsumerErrorPolicy::keep_going, ferry::ConsumerErrorPolicy::stop}) {
      INFO("policy " << (policy == ferry::ConsumerErrorPolicy::stop ? "stop" : "keep_going"));
      EgressOptions egress_options = small_egress(pool);
      egress_options.on_error = policy;
      std::atomic<std::uint64_t> good_chunks{0};
      EgressPipeline egress = REQUIRE_VALUE(
          EgressPipeline::create(t.device, egress_options, [&](const EgressChunk& chunk) {
            if (chunk.step == 1 && chunk.index == 0) throw std::logic_error("consumer bug");
            good_chunks.fetch_add(1);
            return Status();
          }));
      REQUIRE_VALUE(egress.push(output, 0, 5000, written));
      REQUIRE_VALUE(egress.push(output, 0, 5000, written));
      const Status drained = egress.drain(ferry_test::kLongWait);
      CHECK_ERROR(drained, ErrorCode::internal);
      CHECK(drained.message().find("consumer bug") != std::string::npos);
      CHECK(drained.message().find("egress step 1") != std::string::npos);
      CHECK(egress.stats().consumer_errors == 1);
      const auto pushed = egress.push(output, 0, 5000, written);
      if (policy == ferry::ConsumerErrorPolicy::keep_going) {
        CHECK_OK(pushed);
        CHECK_ERROR(egress.close(), ErrorCode::internal);  // the first error, still
        CHECK(good_chunks.load() == 5);  // steps 0 and 2 whole, step 1's second chunk
      } else {
        CHECK_ERROR(pushed, ErrorCode::internal);
        CHECK_ERROR(egress.close(), ErrorCode::internal);
        CHECK(good_chunks.load() == 2);  // step 0 only
      }
    }
  });
}

TEST_CASE("failures: callbacks may close their own pipeline; waiting calls from them are refused") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    const ferry::StagingPool pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback, 1 << 16)));
    auto [output, written] = filled(t.device, 4096, 0x0F0F0F0Fu);

    // A consumer calls push, drain and close on its own pipeline.
    std::optional<EgressPipeline> egress;
    std::promise<std::array<Status, 3>> from_consumer;
    std::atomic<bool> first{true};
    egress = REQUIRE_VALUE(EgressPipeline::create(t.device, small_egress(pool), [&](const EgressChunk&) {
      if (first.exchange(false)) {
        const auto pushed = egress->push(output, 0, 4096, written);
        from_consumer.set_value({pushed.status(), egress->drain(), egress->close()});
      }
      return Status();
    }));
    {
      const ferry_test::Watchdog watchdog("EgressPipeline::close from its consumer");
      REQUIRE_VALUE(egress->push(output, 0, 4096, written));
      const auto statuses = from_consumer.get_future().get();
      CHECK_ERROR(statuses[0], ErrorCode::failed_precondition);
      CHECK_ERROR(statuses[1], ErrorCode::failed_precondition);
      CHECK_OK(statuses[2]);  // deferred close
      CHECK_OK(egress->drain(ferry_test::kLongWait));
      CHECK_ERROR(egress->push(output, 0, 4096, written), ErrorCode::failed_precondition);
      CHECK_OK(egress->close());
      egress.reset();
    }

    // A consumer drops the last handle of its own pipeline.
    {
      auto holder = std::make_shared<std::optional<EgressPipeline>>();
      std::promise<void> dropped;
      *holder = REQUIRE_VALUE(EgressPipeline::create(t.device, small_egress(pool),
                                                     [holder, &dropped](const EgressChunk&) {
                                                       holder->reset();
                                                       dropped.set_value();
                                                       return Status();
                                                     }));
      const ferry_test::Watchdog watchdog("~EgressPipeline from its consumer");
      REQUIRE_VALUE((*holder)->push(output, 0, 4096, written));
      dropped.get_future().wait();
    }

    // A source calls next (refused) and close on its own pipeline.
    IngressOptions options;
    const ferry::NormalizeParams params = ferry_test::awkward_params(t.rng);
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
    const auto shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    const auto batches = ferry_test::make_batches(t.rng, 4, shape.input_bytes);
    std::promise<IngressPipeline*> made;
    std::shared_future<IngressPipeline*> pipeline_made = made.get_future().share();
    std::promise<Status> next_from_source;
    IngressPipeline ingress = REQUIRE_VALUE(IngressPipeline::create(
        t.device, options, [&](std::uint64_t index) -> ferry::Result<std::optional<HostBatch>> {
          if (index == 1) {
            IngressPipeline* self = pipeline_made.get();
            auto inner = self->next(std::chrono::milliseconds(1));
            next_from_source.set_value(inner.status());
            self->close();
          }
          return std::optional<HostBatch>(HostBatch::pageable(batches[index]));
        }));
    const ferry_test::Watchdog watchdog("IngressPipeline::close from its source");
    made.set_value(&ingress);
    CHECK_ERROR(next_from_source.get_future().get(), ErrorCode::failed_precondition);
    // Batch 0 may or may not have been taken before the close; after it, next() says closed.
    for (;;) {
      auto next = ingress.next(ferry_test::kLongWait);
      if (!next.ok()) {
        CHECK(next.status().code() == ErrorCode::failed_precondition);
        break;
      }
      REQUIRE(next->has_value());
      CHECK((*next)->index() == 0);
    }
    ingress.close();
  });
}

TEST_CASE("failures: threads that cannot be started are errors, and nothing is left running") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    const ferry::StagingPool pool = REQUIRE_VALUE(
        t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback, 1 << 16)));
    EgressOptions egress_options = small_egress(pool);
    egress_options.workers = 4;
    auto consumer = [](const EgressChunk&) { return Status(); };
    {
      const ferry_test::ScopedFaultPlan faults(ferry::FaultPlan{}.fail(ferry::FaultSite::thread, 3));
      const auto egress = EgressPipeline::create(t.device, egress_options, consumer);
      CHECK_ERROR(egress, ErrorCode::resource_exhausted);
      CHECK(egress.status().message().find("egress worker 3 of 4") != std::string::npos);
      CHECK(ferry::fault_counts().injected[static_cast<int>(ferry::FaultSite::thread)] == 1);
    }
    IngressOptions ingress_options;
    const ferry::NormalizeParams ingress_params = ferry_test::awkward_params(t.rng);
    ingress_options.transform = REQUIRE_VALUE(ferry::normalize_transform(ingress_params));
    auto source = [](std::uint64_t) -> ferry::Result<std::optional<HostBatch>> {
      return std::optional<HostBatch>();
    };
    {
      const ferry_test::ScopedFaultPlan faults(ferry::FaultPlan{}.fail(ferry::FaultSite::thread, 1));
      CHECK_ERROR(IngressPipeline::create(t.device, ingress_options, source),
                  ErrorCode::resource_exhausted);
    }
    if (t.backend == ferry::Backend::cpu) {
      // The CPU backend runs each queue on a thread of its own.
      const ferry_test::ScopedFaultPlan faults(ferry::FaultPlan{}.fail(ferry::FaultSite::thread, 2));
      CHECK_ERROR(Device::open("cpu", 0, t.options), ErrorCode::resource_exhausted);
    }
    // Without faults everything starts.
    EgressPipeline egress = REQUIRE_VALUE(EgressPipeline::create(t.device, egress_options, consumer));
    CHECK_OK(egress.close());
    IngressPipeline ingress =
        REQUIRE_VALUE(IngressPipeline::create(t.device, ingress_options, source));
    CHECK_FALSE(REQUIRE_VALUE(ingress.next(ferry_test::kLongWait)).has_value());
  });
}

TEST_CASE("failures: empty handles answer with errors or documented empty values") {
  IngressBatch empty;
  CHECK_FALSE(static_cast<bool>(empty));
  CHECK_FALSE(empty.tensor().valid());
  CHECK(empty.tensor_bytes() == 0);
  CHECK_FALSE(static_cast<bool>(empty.ready().timeline));
  CHECK_OK(empty.release(TimelinePoint{}));
  empty.release();
  CommandList list;
  CHECK_ERROR(ferry::fill(list, empty.tensor(), 0, 4, 0), ErrorCode::released);

  IngressPipeline no_pipeline;
  CHECK_ERROR(no_pipeline.next(std::chrono::milliseconds(1)), ErrorCode::released);
  CHECK(no_pipeline.tensor_bytes() == 0);
  no_pipeline.close();
  IngressPipeline moved_to = std::move(no_pipeline);
  CHECK_ERROR(moved_to.next(std::chrono::milliseconds(1)), ErrorCode::released);

  EgressPipeline no_egress;
  Buffer nothing;
  CHECK_ERROR(no_egress.push(nothing, 0, 1, TimelinePoint{}), ErrorCode::released);
  CHECK_ERROR(no_egress.drain(std::chrono::milliseconds(1)), ErrorCode::released);
  CHECK_OK(no_egress.close());
  CHECK(no_egress.stats().steps_pushed == 0);

  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    IngressOptions options;
    const ferry::NormalizeParams params = ferry_test::awkward_params(t.rng);
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
    const auto shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    const auto batches = ferry_test::make_batches(t.rng, 1, shape.input_bytes);
    IngressPipeline pipeline = REQUIRE_VALUE(
        IngressPipeline::create(t.device, options, ferry_test::pageable_source(batches)));
    std::optional<IngressBatch> batch = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
    REQUIRE(batch.has_value());
    IngressBatch taken = std::move(*batch);
    CHECK_FALSE(batch->tensor().valid());  // NOLINT(bugprone-use-after-move): tested
    CHECK(taken.tensor().valid());
    IngressPipeline moved = std::move(pipeline);
    CHECK(pipeline.tensor_bytes() == 0);  // NOLINT(bugprone-use-after-move): tested
    CHECK(moved.tensor_bytes() == shape.output_bytes);
    taken.release();
    CHECK_FALSE(taken.tensor().valid());
  });
}

TEST_CASE("failures: timeouts of any length wait for the event; negative ones do not wait") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    const Timeout huge[] = {Timeout::max() - Timeout(1), Timeout::max() / 2,
                            std::chrono::duration_cast<Timeout>(std::chrono::hours(24 * 365 * 150))};
    constexpr auto kDelay = std::chrono::milliseconds(30);
    auto took_the_delay = [&](Clock::time_point start) {
      return Clock::now() - start >= kDelay - std::chrono::milliseconds(5);
    };
    for (const Timeout timeout : huge) {
      INFO("timeout " << timeout.count() << " ns");
      // Timeline::wait
      const Timeline timeline = REQUIRE_VALUE(t.device.create_timeline());
      auto start = Clock::now();
      std::thread signaller([&] {
        std::this_thread::sleep_for(kDelay);
        CHECK_OK(timeline.signal(1));
      });
      CHECK_OK(timeline.wait(1, timeout));
      CHECK(took_the_delay(start));
      signaller.join();

      // StagingPool::acquire
      const ferry::StagingPool pool = REQUIRE_VALUE(
          t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_upload, 4096, 1)));
      ferry::Lease held = REQUIRE_VALUE(pool.acquire(4096));
      start = Clock::now();
      std::thread releaser([&] {
        std::this_thread::sleep_for(kDelay);
        held.release();
      });
      CHECK_OK(pool.acquire(4096, timeout));
      CHECK(took_the_delay(start));
      releaser.join();

      // IngressPipeline::next
      IngressOptions options;
      const ferry::NormalizeParams params = ferry_test::awkward_params(t.rng);
      options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
      const auto shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
      const auto batches = ferry_test::make_batches(t.rng, 1, shape.input_bytes);
      start = Clock::now();
      IngressPipeline ingress = REQUIRE_VALUE(IngressPipeline::create(
          t.device, options, [&](std::uint64_t index) -> ferry::Result<std::optional<HostBatch>> {
            if (index > 0) return std::optional<HostBatch>();
            std::this_thread::sleep_for(kDelay);
            return std::optional<HostBatch>(HostBatch::pageable(batches[0]));
          }));
      CHECK(REQUIRE_VALUE(ingress.next(timeout)).has_value());
      CHECK(took_the_delay(start));

      // EgressPipeline::push (waiting for room) and drain
      const ferry::StagingPool readback = REQUIRE_VALUE(
          t.device.create_staging_pool(ferry_test::small_pool(MemoryKind::host_readback, 4096)));
      EgressOptions egress_options = small_egress(readback);
      egress_options.max_pending_steps = 1;
      egress_options.push_timeout = timeout;
      auto [output, written] = filled(t.device, 4096, 1);
      EgressPipeline egress = REQUIRE_VALUE(
          EgressPipeline::create(t.device, egress_options, [&](const EgressChunk&) {
            std::this_thread::sleep_for(kDelay);
            return Status();
          }));
      start = Clock::now();
      REQUIRE_VALUE(egress.push(output, 0, 4096, written));
      CHECK_OK(egress.push(output, 0, 4096, written));  // waits for the first step's consumer
      CHECK(took_the_delay(start));
      start = Clock::now();
      CHECK_OK(egress.drain(timeout));
      CHECK(took_the_delay(start));
    }
    // Negative and zero timeouts return at once.
    const Timeline never = REQUIRE_VALUE(t.device.create_timeline());
    for (const Timeout timeout : {Timeout(-1), Timeout::min(), Timeout::zero()}) {
      const auto start = Clock::now();
      CHECK_ERROR(never.wait(1, timeout), ErrorCode::timeout);
      CHECK(Clock::now() - start < std::chrono::seconds(2));
    }
  });
}

TEST_CASE("failures: error messages print numbers as numbers") {
  NormalizeParams params = one_plane(4, 4);
  params.std[0] = 1e-320;
  auto factors = ferry::normalize_factors(params);
  REQUIRE_FALSE(factors.ok());
  CHECK(factors.status().message().find("1e-320") != std::string::npos);
  params.std[0] = 1.0;
  params.mean[0] = std::numeric_limits<double>::quiet_NaN();
  factors = ferry::normalize_factors(params);
  REQUIRE_FALSE(factors.ok());
  CHECK(factors.status().message().find("nan") != std::string::npos);

  ferry_test::for_each_backend([](BackendUnderTest& t) {
    Buffer a = REQUIRE_VALUE(t.device.create_buffer(500));
    CommandList list;
    const Status outside = list.copy(a, 10, a, 0, 1000);
    CHECK(outside.message().find("[10, 1010)") != std::string::npos);
    const Status wrapping = list.copy(a, kMax - 1, a, 0, 4);
    CHECK(wrapping.message().find("past 2^64") != std::string::npos);
    const Status overlap = list.copy(a, 0, a, 50, 100);
    CHECK(overlap.message().find("[0, 100)") != std::string::npos);
    CHECK(overlap.message().find("[50, 150)") != std::string::npos);
  });
}
