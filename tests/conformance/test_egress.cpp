// The egress pipeline: every chunk of every step reaches the consumer exactly once with the bytes
// the device wrote (random sizes, chunking, both delivery orders); a slow consumer holds the
// producer back and nothing is overwritten; a failing consumer is reported with its step and
// stops or not as configured; closing with work in flight neither hangs nor leaks leases.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "device_io.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::EgressChunk;
using ferry::EgressOptions;
using ferry::EgressPipeline;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

namespace {

// What the consumer saw, assembled per step; checks order and exclusivity as it goes.
class Collector {
 public:
  explicit Collector(bool in_order) : in_order_(in_order) {}

  ferry::Status consume(const EgressChunk& chunk,
                        std::chrono::microseconds delay = std::chrono::microseconds(0)) {
    const int running = running_.fetch_add(1) + 1;
    max_running_ = std::max(max_running_.load(), running);
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    {
      std::lock_guard lock(mutex_);
      if (in_order_) {
        const std::pair<std::uint64_t, std::uint32_t> position{chunk.step, chunk.index};
        if (any_ && position <= last_) out_of_order_ = true;
        last_ = position;
        any_ = true;
      }
      auto& bytes = steps_[chunk.step];
      bytes.resize(chunk.step_bytes);
      std::copy(chunk.bytes.begin(), chunk.bytes.end(),
                bytes.begin() + static_cast<std::ptrdiff_t>(chunk.offset));
      chunks_[chunk.step] += 1;
      counts_[chunk.step] = chunk.count;
    }
    running_.fetch_sub(1);
    return ferry::Status();
  }

  std::map<std::uint64_t, std::vector<std::byte>> steps() const {
    std::lock_guard lock(mutex_);
    return steps_;
  }
  bool complete(std::uint64_t step) const {
    std::lock_guard lock(mutex_);
    auto it = chunks_.find(step);
    return it != chunks_.end() && it->second == counts_.at(step);
  }
  bool out_of_order() const { return out_of_order_; }
  int max_running() const { return max_running_.load(); }

 private:
  bool in_order_;
  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::vector<std::byte>> steps_;
  std::map<std::uint64_t, std::uint32_t> chunks_;
  std::map<std::uint64_t, std::uint32_t> counts_;
  std::pair<std::uint64_t, std::uint32_t> last_{0, 0};
  bool any_ = false;
  bool out_of_order_ = false;
  std::atomic<int> running_{0};
  std::atomic<int> max_running_{0};
};

EgressOptions small_options(BackendUnderTest& t) {
  EgressOptions options;
  options.pool = REQUIRE_VALUE(t.device.create_staging_pool(
      ferry_test::small_pool(ferry::MemoryKind::host_readback, 64 << 10, 4)));
  options.chunk_bytes = 10000;
  return options;
}

// A device output: random bytes, then a "compute" step on the compute queue (a fill of part of
// it) whose completion point the output is pushed with. Returns the expected bytes.
struct Produced {
  Buffer output;
  ferry::TimelinePoint ready;
  std::vector<std::byte> expected;
};

Produced produce(BackendUnderTest& t, std::uint64_t size) {
  Produced p;
  p.expected = ferry_test::random_bytes(t.rng, size);
  p.output = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, p.expected));
  const std::uint64_t fill_size = ferry_test::uniform(t.rng, 1, size);
  const std::uint64_t fill_offset = ferry_test::uniform(t.rng, 0, size - fill_size);
  const auto pattern = static_cast<std::uint32_t>(t.rng());
  CommandList commands;
  REQUIRE_OK(ferry::fill(commands, p.output, fill_offset, fill_size, pattern));
  p.ready = REQUIRE_VALUE(t.device.queue(QueueKind::compute).submit(std::move(commands)));
  ferry_test::apply_fill(p.expected, fill_offset, fill_size, pattern);
  return p;
}

}  // namespace

TEST_CASE("egress: random output sizes, chunked, delivered exactly and in the chosen order") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    for (ferry::EgressOrder order : {ferry::EgressOrder::in_order, ferry::EgressOrder::as_completed}) {
      const bool in_order = order == ferry::EgressOrder::in_order;
      INFO("order " << (in_order ? "in_order" : "as_completed"));
      EgressOptions options = small_options(t);
      options.order = order;
      options.workers = 3;
      Collector collector(in_order);
      EgressPipeline pipeline = REQUIRE_VALUE(EgressPipeline::create(
          t.device, options, [&](const EgressChunk& chunk) {
            return collector.consume(chunk, std::chrono::microseconds(200));
          }));
      std::vector<Produced> produced;
      std::vector<std::uint64_t> offsets;
      for (int i = 0; i < 10; ++i) {
        const std::uint64_t size = ferry_test::log_uniform_size(t.rng, 1, 150000);
        produced.push_back(produce(t, size + 7));
        const std::uint64_t offset = ferry_test::uniform(t.rng, 0, 7);
        offsets.push_back(offset);
        const ferry::EgressTicket ticket = REQUIRE_VALUE(
            pipeline.push(produced.back().output, offset, size, produced.back().ready));
        CHECK(ticket.step == static_cast<std::uint64_t>(i));
      }
      REQUIRE_OK(pipeline.drain(ferry_test::kLongWait));
      REQUIRE_OK(pipeline.close());
      const auto steps = collector.steps();
      REQUIRE(steps.size() == produced.size());
      for (std::size_t i = 0; i < produced.size(); ++i) {
        INFO("step " << i);
        CHECK(collector.complete(i));
        const auto& expected = produced[i].expected;
        const std::vector<std::byte> slice(
            expected.begin() + static_cast<std::ptrdiff_t>(offsets[i]),
            expected.begin() + static_cast<std::ptrdiff_t>(offsets[i] + steps.at(i).size()));
        CHECK(steps.at(i).size() == expected.size() - 7);
        ferry_test::check_bytes_equal(steps.at(i), slice, "consumed bytes");
      }
      const ferry::EgressStats stats = pipeline.stats();
      CHECK(stats.steps_pushed == produced.size());
      CHECK(stats.steps_consumed == produced.size());
      CHECK(stats.consumer_errors == 0);
      CHECK(stats.chunks_dropped == 0);
      if (in_order) {
        CHECK_FALSE(collector.out_of_order());
        CHECK(collector.max_running() == 1);
      }
      REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
      CHECK(options.pool->stats().bytes_in_use == 0);
    }
  });
}

TEST_CASE("egress: a slow consumer holds the producer back; reused outputs are never overwritten early") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    EgressOptions options = small_options(t);
    options.max_pending_steps = 2;
    options.workers = 2;
    options.order = ferry::EgressOrder::as_completed;
    Collector collector(false);
    EgressPipeline pipeline = REQUIRE_VALUE(EgressPipeline::create(
        t.device, options, [&](const EgressChunk& chunk) {
          return collector.consume(chunk, std::chrono::milliseconds(5));
        }));
    // Two device outputs used in turn: step i rewrites output i % 2 on the compute queue, after
    // the download of step i - 2 has read it (a device-side wait on its output_read point).
    constexpr std::uint64_t kSize = 30011;
    std::vector<Buffer> outputs;
    for (int i = 0; i < 2; ++i) outputs.push_back(REQUIRE_VALUE(t.device.create_buffer(kSize)));
    std::vector<ferry::TimelinePoint> read(2);
    std::vector<std::uint32_t> patterns;
    for (int step = 0; step < 8; ++step) {
      const auto pattern = static_cast<std::uint32_t>(t.rng());
      patterns.push_back(pattern);
      CommandList commands;
      REQUIRE_OK(ferry::fill(commands, outputs[step % 2], 0, kSize, pattern));
      ferry::SubmitSync sync;
      if (read[step % 2].timeline) sync.wait.push_back(read[step % 2]);
      const ferry::TimelinePoint ready = REQUIRE_VALUE(
          t.device.queue(QueueKind::compute).submit(std::move(commands), sync));
      const ferry::EgressTicket ticket =
          REQUIRE_VALUE(pipeline.push(outputs[step % 2], 0, kSize, ready));
      read[step % 2] = ticket.output_read;
      const ferry::EgressStats stats = pipeline.stats();
      CHECK(stats.steps_pushed - stats.steps_consumed <= options.max_pending_steps);
    }
    REQUIRE_OK(pipeline.close());
    const auto steps = collector.steps();
    REQUIRE(steps.size() == patterns.size());
    for (std::size_t step = 0; step < patterns.size(); ++step) {
      INFO("step " << step);
      std::vector<std::byte> expected(kSize);
      ferry_test::apply_fill(expected, 0, kSize, patterns[step]);
      ferry_test::check_bytes_equal(steps.at(step), expected, "step output");
    }
  });
}

TEST_CASE("egress: a failing consumer is reported with its step; stop or keep going") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    for (ferry::ConsumerErrorPolicy policy :
         {ferry::ConsumerErrorPolicy::stop, ferry::ConsumerErrorPolicy::keep_going}) {
      const bool stop = policy == ferry::ConsumerErrorPolicy::stop;
      INFO("policy " << (stop ? "stop" : "keep_going"));
      EgressOptions options = small_options(t);
      options.on_error = policy;
      options.max_pending_steps = 2;
      Collector collector(true);
      EgressPipeline pipeline = REQUIRE_VALUE(EgressPipeline::create(
          t.device, options, [&](const EgressChunk& chunk) -> ferry::Status {
            if (chunk.step == 1 || chunk.step == 3) {
              return ferry::Status(ferry::ErrorCode::internal, "disk full");
            }
            return collector.consume(chunk);
          }));
      std::vector<Produced> produced;
      ferry::Status push_error;
      for (int i = 0; i < 6 && push_error.ok(); ++i) {
        produced.push_back(produce(t, 25000));
        auto ticket = pipeline.push(produced.back().output, 0, 25000, produced.back().ready);
        if (!ticket.ok()) push_error = ticket.status();
      }
      const ferry::Status drained = pipeline.drain(ferry_test::kLongWait);
      INFO(drained.to_string());
      CHECK(drained.code() == ferry::ErrorCode::internal);
      CHECK(drained.message().find("egress step 1 ") != std::string::npos);
      if (stop) {
        // Step 1 fails; pushes after the failure was seen fail with it; nothing after is consumed.
        CHECK(pipeline.stats().consumer_errors == 1);
        const auto later = pipeline.push(produced.front().output, 0, 100, {});
        CHECK(later.status().code() == ferry::ErrorCode::internal);
        for (const auto& [step, bytes] : collector.steps()) CHECK(step < 1);
      } else {
        CHECK(push_error.ok());
        CHECK(pipeline.stats().consumer_errors >= 2);  // each chunk of steps 1 and 3
        const auto steps = collector.steps();
        for (std::uint64_t step : {0u, 2u, 4u, 5u}) {
          INFO("step " << step);
          REQUIRE(steps.count(step) == 1);
          ferry_test::check_bytes_equal(steps.at(step), produced[step].expected, "step output");
        }
      }
      CHECK(pipeline.close().code() == ferry::ErrorCode::internal);
      REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
      CHECK(options.pool->stats().bytes_in_use == 0);
    }
  });
}

TEST_CASE("egress: closing with work in flight drains or cancels cleanly; bad input") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    for (ferry::EgressClose mode : {ferry::EgressClose::drain, ferry::EgressClose::cancel}) {
      const bool cancel = mode == ferry::EgressClose::cancel;
      INFO("close " << (cancel ? "cancel" : "drain"));
      EgressOptions options = small_options(t);
      options.max_pending_steps = 8;
      Collector collector(true);
      EgressPipeline pipeline = REQUIRE_VALUE(EgressPipeline::create(
          t.device, options, [&](const EgressChunk& chunk) {
            return collector.consume(chunk, std::chrono::milliseconds(3));
          }));
      std::vector<Produced> produced;
      for (int i = 0; i < 6; ++i) {
        produced.push_back(produce(t, 40000));
        REQUIRE_OK(pipeline.push(produced.back().output, 0, 40000, produced.back().ready));
      }
      REQUIRE_OK(pipeline.close(mode));
      CHECK(pipeline.push(produced.front().output, 0, 10, {}).status().code() ==
            ferry::ErrorCode::failed_precondition);
      const ferry::EgressStats stats = pipeline.stats();
      CHECK(stats.steps_consumed == 6);
      CHECK(stats.chunks_consumed + stats.chunks_dropped == 6 * 4);  // 40000 B in 10000 B chunks
      if (!cancel) CHECK(stats.chunks_dropped == 0);
      // Whatever was delivered is right.
      for (const auto& [step, bytes] : collector.steps()) {
        if (!collector.complete(step)) continue;
        ferry_test::check_bytes_equal(bytes, produced[step].expected, "delivered step");
      }
      REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
      CHECK(options.pool->stats().bytes_in_use == 0);
    }

    EgressOptions options = small_options(t);
    auto consumer = [](const EgressChunk&) { return ferry::Status(); };
    EgressPipeline pipeline = REQUIRE_VALUE(EgressPipeline::create(t.device, options, consumer));
    const Buffer output = REQUIRE_VALUE(t.device.create_buffer(1000));
    CHECK_ERROR(pipeline.push(output, 0, 0, {}), ferry::ErrorCode::invalid_argument);
    CHECK_ERROR(pipeline.push(output, 10, 991, {}), ferry::ErrorCode::out_of_range);
    CHECK_OK(pipeline.push(output, 10, 990, {}));
    CHECK_OK(pipeline.close());
    EgressOptions bad = options;
    bad.workers = 0;
    CHECK_ERROR(EgressPipeline::create(t.device, bad, consumer), ferry::ErrorCode::invalid_argument);
    bad = options;
    bad.pool = REQUIRE_VALUE(t.device.create_staging_pool(ferry_test::small_pool()));  // upload kind
    CHECK_ERROR(EgressPipeline::create(t.device, bad, consumer), ferry::ErrorCode::invalid_argument);
    CHECK_ERROR(EgressPipeline::create(t.device, options, nullptr),
                ferry::ErrorCode::invalid_argument);
  });
}
