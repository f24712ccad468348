// Many submissions from several threads across the three queues, each a timeline chain
// upload -> compute (fill) -> download with no host round trip, checked only at the end.
#include <cstring>
#include <mutex>
#include <sstream>
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

constexpr int kThreads = 4;
constexpr int kIterations = 24;

// Errors seen on worker threads, reported on the test's thread (doctest's REQUIRE must not
// throw on another thread).
class ErrorList {
 public:
  void add(std::string text) {
    const std::lock_guard lock(mutex_);
    errors_.push_back(std::move(text));
  }
  std::string joined() const {
    const std::lock_guard lock(mutex_);
    std::ostringstream text;
    for (const std::string& error : errors_) text << error << "\n";
    return text.str();
  }
  bool empty() const {
    const std::lock_guard lock(mutex_);
    return errors_.empty();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> errors_;
};

struct Iteration {
  std::vector<std::byte> expected;
  Buffer device;
  Buffer readback;
};

// One timeline per stage: a timeline must reach its values in increasing order, and only
// signals from one queue (which complete in submission order) guarantee that. One shared
// timeline would let upload i+1 (value 3i+4) satisfy download i's wait for 3i+2 early.
struct Worker {
  Timeline uploaded;
  Timeline computed;
  Timeline downloaded;
  std::vector<Iteration> iterations;
};

#define WORKER_TRY(expr, what)                                           \
  do {                                                                   \
    const ferry::Status worker_status_ = ::ferry_test::status_of(expr);  \
    if (!worker_status_.ok()) {                                          \
      errors.add(std::string(what) + ": " + worker_status_.to_string()); \
      return;                                                            \
    }                                                                    \
  } while (0)

void run_worker(const ferry::Device& device, const StagingPool& pool, Worker& worker,
                std::uint64_t seed, ErrorList& errors) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < kIterations; ++i) {
    const std::uint64_t size = ferry_test::log_uniform_size(rng, 1, 256 << 10);
    Iteration it;
    it.expected = ferry_test::random_bytes(rng, size);
    auto device_buffer = device.create_buffer(size);
    WORKER_TRY(device_buffer, "create device buffer");
    it.device = std::move(device_buffer).value();
    auto readback = device.create_buffer(size, MemoryKind::host_readback);
    WORKER_TRY(readback, "create readback buffer");
    it.readback = std::move(readback).value();
    const auto value = static_cast<std::uint64_t>(i) + 1;

    // Upload: half the time from pageable memory through the pool, else from a lease.
    if (i % 2 == 0) {
      WORKER_TRY(ferry::upload(device.queue(QueueKind::upload), pool, it.expected, it.device, 0,
                               {.wait = {}, .signal = {{worker.uploaded, value}}}),
                 "pageable upload");
    } else {
      auto lease = pool.acquire(size, ferry_test::kLongWait);
      WORKER_TRY(lease, "acquire");
      std::memcpy(lease->data().data(), it.expected.data(), size);
      CommandList up;
      WORKER_TRY(up.copy(lease.value(), 0, it.device, 0, size), "record upload");
      WORKER_TRY(device.queue(QueueKind::upload)
                     .submit(std::move(up), {.wait = {}, .signal = {{worker.uploaded, value}}}),
                 "submit upload");
    }

    // Compute: fill a random part, after the upload.
    const std::uint64_t fill_offset = ferry_test::uniform(rng, 0, size - 1);
    const std::uint64_t fill_size = ferry_test::uniform(rng, 1, size - fill_offset);
    const auto pattern = static_cast<std::uint32_t>(rng());
    ferry_test::apply_fill(it.expected, fill_offset, fill_size, pattern);
    CommandList compute;
    WORKER_TRY(ferry::fill(compute, it.device, fill_offset, fill_size, pattern), "record fill");
    WORKER_TRY(device.queue(QueueKind::compute)
                   .submit(std::move(compute), {.wait = {{worker.uploaded, value}},
                                                .signal = {{worker.computed, value}}}),
               "submit fill");

    // Download, after the fill.
    CommandList down;
    WORKER_TRY(down.copy(it.device, 0, it.readback, 0, size), "record download");
    WORKER_TRY(device.queue(QueueKind::download)
                   .submit(std::move(down), {.wait = {{worker.computed, value}},
                                             .signal = {{worker.downloaded, value}}}),
               "submit download");
    worker.iterations.push_back(std::move(it));
  }
}

}  // namespace

TEST_CASE("concurrency: several threads, three queues, timeline chains, checked at the end") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const StagingPool pool = REQUIRE_VALUE(t.device.create_staging_pool(
        ferry_test::small_pool(MemoryKind::host_upload, 512 << 10, 4)));
    std::vector<Worker> workers(kThreads);
    for (Worker& worker : workers) {
      worker.uploaded = REQUIRE_VALUE(t.device.create_timeline());
      worker.computed = REQUIRE_VALUE(t.device.create_timeline());
      worker.downloaded = REQUIRE_VALUE(t.device.create_timeline());
    }

    ErrorList errors;
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      const std::uint64_t seed = t.rng();
      threads.emplace_back([&, i, seed] {
        run_worker(t.device, pool, workers[static_cast<std::size_t>(i)], seed, errors);
      });
    }
    for (std::thread& thread : threads) thread.join();
    REQUIRE_MESSAGE(errors.empty(), errors.joined());

    for (std::size_t w = 0; w < workers.size(); ++w) {
      INFO("worker ", w);
      REQUIRE_OK(workers[w].downloaded.wait(kIterations, ferry_test::kLongWait));
      for (std::size_t i = 0; i < workers[w].iterations.size(); ++i) {
        INFO("iteration ", i);
        const Iteration& it = workers[w].iterations[i];
        const auto bytes = REQUIRE_VALUE(it.readback.host_span());
        ferry_test::check_bytes_equal(bytes, it.expected, "downloaded result");
      }
    }
    REQUIRE_OK(t.device.wait_idle(ferry_test::kLongWait));
    CHECK(pool.stats().bytes_in_use == 0);
  });
}
