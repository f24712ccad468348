// The ingress pipeline: batches arrive in order and bit-exact (against normalize_truth), from
// pageable and pinned sources; a slow consumer holds the producer back without anything being
// overwritten; an error surfaces at its batch; closing with work in flight neither hangs nor
// leaks staging memory.
#include <atomic>
#include <chrono>
#include <thread>

#include "device_io.hpp"
#include "harness.hpp"
#include "ops/normalize_truth.hpp"
#include "pipeline_data.hpp"
#include "test_data.hpp"

using ferry::BufferRef;
using ferry::HostBatch;
using ferry::ImageLayout;
using ferry::IngressBatch;
using ferry::IngressOptions;
using ferry::IngressPipeline;
using ferry::NormalizeParams;
using ferry_test::BackendUnderTest;

using ferry_test::awkward_params;
using ferry_test::check_batch;
using ferry_test::eventually_equals;
using ferry_test::make_batches;

TEST_CASE("ingress: pageable batches arrive in order, bit exact, then the stream ends") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    for (std::uint32_t depth : {2u, 3u}) {
      INFO("depth " << depth);
      IngressOptions options;
      ferry::NormalizeParams params = awkward_params(t.rng);
      options.depth = depth;
      // A small pool and chunks, so batches cross several leases.
      options.pool = REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool(
          ferry::MemoryKind::host_upload, 4096, 3)));
      options.transfer.chunk_bytes = 1000;
      const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
      options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
      const auto batches = make_batches(t.rng, 9, shape.input_bytes);
      std::vector<std::byte> scratch(shape.input_bytes);
      IngressPipeline pipeline = REQUIRE_VALUE(IngressPipeline::create(
          t.device, options,
          [&](std::uint64_t index) -> ferry::Result<std::optional<HostBatch>> {
            if (index >= batches.size()) return std::optional<HostBatch>();
            // The same scratch memory every time: the pipeline must have copied it already.
            std::copy(batches[index].begin(), batches[index].end(), scratch.begin());
            return std::optional<HostBatch>(HostBatch::pageable(scratch));
          }));
      for (std::size_t i = 0; i < batches.size(); ++i) {
        std::optional<IngressBatch> batch = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
        REQUIRE(batch.has_value());
        CHECK(batch->index() == i);
        check_batch(t, *batch, params, batches[i]);
      }
      CHECK_FALSE(REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait)).has_value());
      CHECK_FALSE(REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait)).has_value());
      pipeline.close();
      REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
      CHECK(options.pool->stats().bytes_in_use == 0);
    }
  });
}

TEST_CASE("ingress: pinned batches are uploaded by DMA and consumers queue behind ready") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    IngressOptions options;
    ferry::NormalizeParams params = awkward_params(t.rng);
    params.output_type = ferry::ElementType::float32;
    params.output_layout = ImageLayout::nhwc;
    const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
    const auto batches = make_batches(t.rng, 6, shape.input_bytes);
    // Each batch in its own host buffer at an odd offset.
    std::vector<ferry::Buffer> pinned;
    for (const auto& bytes : batches) {
      pinned.push_back(REQUIRE_VALUE(
          t.device.create_buffer(shape.input_bytes + 3, ferry::MemoryKind::host_upload)));
      REQUIRE_OK(ferry_test::write_bytes(t.device, pinned.back(), 3, bytes));
    }
    IngressPipeline pipeline = REQUIRE_VALUE(IngressPipeline::create(
        t.device, options, [&](std::uint64_t index) -> ferry::Result<std::optional<HostBatch>> {
          if (index >= pinned.size()) return std::optional<HostBatch>();
          return std::optional<HostBatch>(HostBatch::pinned(pinned[index], 3));
        }));
    // The consumer copies each tensor on the compute queue, waiting on `ready` on the device, and
    // releases the batch with that copy's completion point; no host wait until the end.
    std::vector<ferry::Buffer> copies;
    std::vector<ferry::TimelinePoint> copied;
    for (std::size_t i = 0; i < batches.size(); ++i) {
      std::optional<IngressBatch> batch = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
      REQUIRE(batch.has_value());
      copies.push_back(REQUIRE_VALUE(t.device.create_buffer(shape.output_bytes)));
      ferry::CommandList commands;
      REQUIRE_OK(commands.copy(batch->tensor(), 0, copies.back(), 0, shape.output_bytes));
      ferry::SubmitSync sync;
      sync.wait.push_back(batch->ready());
      copied.push_back(REQUIRE_VALUE(
          t.device.queue(ferry::QueueKind::compute).submit(std::move(commands), sync)));
      REQUIRE_OK(batch->release(copied.back()));
    }
    CHECK_FALSE(REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait)).has_value());
    for (std::size_t i = 0; i < batches.size(); ++i) {
      INFO("batch " << i);
      REQUIRE_OK(copied[i].wait(ferry_test::kLongWait));
      ferry_test::check_bytes_equal(
          REQUIRE_VALUE(ferry_test::read_bytes(t.device, copies[i], 0, shape.output_bytes)),
          ferry_test::expected_output(params, batches[i]), "consumer's copy");
    }
  });
}

TEST_CASE("ingress: a slow consumer holds the producer back and nothing it holds is overwritten") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    IngressOptions options;
    ferry::NormalizeParams params = awkward_params(t.rng);
    options.depth = 2;
    const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
    const auto batches = make_batches(t.rng, 6, shape.input_bytes);
    std::atomic<std::uint64_t> calls{0};
    IngressPipeline pipeline = REQUIRE_VALUE(IngressPipeline::create(
        t.device, options, [&](std::uint64_t index) -> ferry::Result<std::optional<HostBatch>> {
          calls.fetch_add(1);
          if (index >= batches.size()) return std::optional<HostBatch>();
          return std::optional<HostBatch>(HostBatch::pageable(batches[index]));
        }));
    // Hold both tensors: the producer has no free tensor, so it reads batch 2 from the source
    // (one ahead, to learn whether the stream goes on) and goes no further; next() says that
    // nothing can come instead of waiting.
    std::optional<IngressBatch> first = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
    std::optional<IngressBatch> second = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
    REQUIRE(first.has_value());
    REQUIRE(second.has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(calls.load() == 3);
    CHECK(pipeline.next(std::chrono::milliseconds(20)).status().code() ==
          ferry::ErrorCode::failed_precondition);
    check_batch(t, *first, params, batches[0]);
    check_batch(t, *second, params, batches[1]);

    // Release the first with a consumer point that is not reached yet: batch 2 may be produced
    // into its tensor but must not be written there until the point is reached.
    const ferry::Timeline consumer = REQUIRE_VALUE(t.device.create_timeline(0));
    const ferry::Buffer& first_tensor = first->tensor();
    const BufferRef held(first_tensor);  // keeps the tensor's memory reachable after release
    REQUIRE_OK(first->release(ferry::TimelinePoint{consumer, 1}));
    CHECK(eventually_equals(calls, 4));  // batch 2 took the tensor; batch 3 waits for one
    std::optional<IngressBatch> third = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
    REQUIRE(third.has_value());
    CHECK(third->index() == 2);
    CHECK(third->ready().wait(std::chrono::milliseconds(50)).code() == ferry::ErrorCode::timeout);
    ferry_test::check_bytes_equal(
        REQUIRE_VALUE(ferry_test::read_bytes(t.device, held, 0, shape.output_bytes)),
        ferry_test::expected_output(params, batches[0]),
        "released tensor before its consumer finished");
    REQUIRE_OK(consumer.signal(1));
    check_batch(t, *third, params, batches[2]);
    second.reset();
    third.reset();
    for (std::size_t i = 3; i < batches.size(); ++i) {
      std::optional<IngressBatch> batch = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
      REQUIRE(batch.has_value());
      check_batch(t, *batch, params, batches[i]);
    }
    CHECK_FALSE(REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait)).has_value());
  });
}

TEST_CASE("ingress: an application holding every batch still gets the end, or an error, never a hang") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    ferry::NormalizeParams params = awkward_params(t.rng);
    const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    for (const std::size_t count : {std::size_t{2}, std::size_t{3}}) {
      IngressOptions options;
      options.depth = 2;
      options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
      const auto batches = make_batches(t.rng, count, shape.input_bytes);
      IngressPipeline pipeline = REQUIRE_VALUE(IngressPipeline::create(
          t.device, options, [&](std::uint64_t index) -> ferry::Result<std::optional<HostBatch>> {
            if (index >= batches.size()) return std::optional<HostBatch>();
            return std::optional<HostBatch>(HostBatch::pageable(batches[index]));
          }));
      std::vector<IngressBatch> held;  // what `list(pipeline)` does in Python
      for (std::size_t i = 0; i < 2; ++i) {
        std::optional<IngressBatch> batch = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
        REQUIRE(batch.has_value());
        held.push_back(std::move(*batch));
      }
      const auto started = std::chrono::steady_clock::now();
      ferry::Result<std::optional<IngressBatch>> next = pipeline.next(ferry_test::kLongWait);
      if (count == 2) {
        // The end comes even though no tensor is free.
        CHECK(REQUIRE_VALUE(std::move(next)) == std::nullopt);
      } else {
        CHECK(next.status().code() == ferry::ErrorCode::failed_precondition);
        CHECK(next.status().message().find("holds all 2") != std::string::npos);
        CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
        held.front().release();
        std::optional<IngressBatch> third = REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait));
        REQUIRE(third.has_value());
        check_batch(t, *third, params, batches[2]);
      }
      for (std::size_t i = 0; i < 2 && i < held.size(); ++i) {
        if (held[i]) check_batch(t, held[i], params, batches[i]);
      }
    }
  });
}

TEST_CASE("ingress: a failing batch surfaces at that batch and the stream goes on") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    IngressOptions options;
    ferry::NormalizeParams params = awkward_params(t.rng);
    const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
    const auto batches = make_batches(t.rng, 7, shape.input_bytes);
    std::vector<std::byte> longer;
    IngressPipeline pipeline = REQUIRE_VALUE(IngressPipeline::create(
        t.device, options, [&](std::uint64_t index) -> ferry::Result<std::optional<HostBatch>> {
          if (index == 2) return ferry::Status(ferry::ErrorCode::internal, "decoder failed");
          if (index == 4) {  // too short for the layout
            return std::optional<HostBatch>(
                HostBatch::pageable(std::span(batches[index]).first(shape.input_bytes - 1)));
          }
          if (index == 5) {  // too long: never cut to size
            longer = batches[index];
            longer.push_back(std::byte{7});
            return std::optional<HostBatch>(HostBatch::pageable(longer));
          }
          if (index >= batches.size()) return std::optional<HostBatch>();
          return std::optional<HostBatch>(HostBatch::pageable(batches[index]));
        }));
    for (std::uint64_t i = 0; i < batches.size(); ++i) {
      auto next = pipeline.next(ferry_test::kLongWait);
      if (i == 2 || i == 4 || i == 5) {
        REQUIRE_FALSE(next.ok());
        INFO(next.status().to_string());
        CHECK(next.status().message().find("ingress batch " + std::to_string(i)) !=
              std::string::npos);
        CHECK(next.status().code() ==
              (i == 2 ? ferry::ErrorCode::internal : ferry::ErrorCode::out_of_range));
        continue;
      }
      std::optional<IngressBatch> batch = REQUIRE_VALUE(std::move(next));
      REQUIRE(batch.has_value());
      CHECK(batch->index() == i);
      check_batch(t, *batch, params, batches[i]);
    }
    CHECK_FALSE(REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait)).has_value());
  });
}

TEST_CASE("ingress: closing with work in flight, and bad options") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    IngressOptions options;
    ferry::NormalizeParams params = awkward_params(t.rng);
    options.pool = REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));
    const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
    options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
    const auto input = ferry_test::random_bytes(t.rng, shape.input_bytes);
    for (int held = 0; held <= 3; ++held) {
      INFO("batches held at close: " << held);
      // An endless stream; the application takes `held` batches and closes.
      IngressPipeline pipeline = REQUIRE_VALUE(IngressPipeline::create(
          t.device, options, [&](std::uint64_t) -> ferry::Result<std::optional<HostBatch>> {
            return std::optional<HostBatch>(HostBatch::pageable(input));
          }));
      std::vector<IngressBatch> taken;
      for (int i = 0; i < held; ++i) {
        taken.push_back(std::move(*REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait))));
      }
      pipeline.close();  // the producer may be blocked on a free tensor or mid-upload
      CHECK(pipeline.next().status().code() == ferry::ErrorCode::failed_precondition);
      for (const IngressBatch& batch : taken) check_batch(t, batch, params, input);
      taken.clear();
      REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
      CHECK(options.pool->stats().bytes_in_use == 0);
    }

    auto source = [](std::uint64_t) -> ferry::Result<std::optional<HostBatch>> {
      return std::optional<HostBatch>();
    };
    IngressOptions bad = options;
    bad.depth = 1;
    CHECK_ERROR(IngressPipeline::create(t.device, bad, source), ferry::ErrorCode::invalid_argument);
    ferry::NormalizeParams bad_params = params;
    bad_params.std[0] = 0;
    CHECK_ERROR(ferry::normalize_transform(bad_params), ferry::ErrorCode::invalid_argument);
    bad = options;
    bad.transform.record = nullptr;  // a transform that records nothing
    CHECK_ERROR(IngressPipeline::create(t.device, bad, source), ferry::ErrorCode::invalid_argument);
    bad = options;
    bad.transform.output_bytes = 0;
    CHECK_ERROR(IngressPipeline::create(t.device, bad, source), ferry::ErrorCode::invalid_argument);
    CHECK_ERROR(IngressPipeline::create(t.device, options, nullptr),
                ferry::ErrorCode::invalid_argument);
  });
}
