// Fault injection (ferry/faults.hpp) over workloads of the suite: with allocations, submissions,
// host waits or thread starts failing (the N-th call, or at random), every failure is reported to
// the caller that owns the failed work, unrelated work completes with correct data, no waiter
// hangs, every lease returns to its pool, and the device goes on working afterwards. (Leaks are
// checked by LeakSanitizer when the suite runs under the asan preset.)
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "device_io.hpp"
#include "harness.hpp"
#include "ops/normalize_truth.hpp"
#include "pipeline_data.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::ErrorCode;
using ferry::FaultPlan;
using ferry::FaultSite;
using ferry::HostBatch;
using ferry::IngressBatch;
using ferry::IngressOptions;
using ferry::IngressPipeline;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry::Result;
using ferry::StagingPool;
using ferry::Status;
using ferry::Timeline;
using ferry::TimelinePoint;
using ferry_test::BackendUnderTest;

namespace {

// A job owns its buffers, timelines and pools. It returns ok only when its work completed and
// its data was checked; a wrong byte with an ok status fails the test (CHECK) right there. Jobs
// run on threads of their own, so they CHECK (thread-safe in doctest) and never REQUIRE.
struct JobContext {
  const ferry::Device& device;
  std::mt19937_64 rng;
  std::vector<StagingPool>& pools;  // kept until the round ends, to see every lease returned
  std::mutex& pools_mutex;

  Result<StagingPool> pool(MemoryKind kind, std::uint64_t slab_bytes, std::uint32_t max_slabs) {
    FERRY_ASSIGN_OR_RETURN(StagingPool made,
                           device.create_staging_pool(ferry_test::small_pool(kind, slab_bytes,
                                                                             max_slabs)));
    std::lock_guard lock(pools_mutex);
    pools.push_back(made);
    return made;
  }
};

using Job = std::function<Status(JobContext&)>;

bool same_bytes(std::span<const std::byte> actual, std::span<const std::byte> expected,
                const char* what) {
  return ferry_test::check_bytes_equal(actual, expected, what);
}

// Pageable bytes up through a staging pool and back down through another, in chunks.
Status transfer_job(JobContext& job) {
  const std::uint64_t size = ferry_test::log_uniform_size(job.rng, 1000, 300000);
  const std::vector<std::byte> data = ferry_test::random_bytes(job.rng, size);
  FERRY_ASSIGN_OR_RETURN(StagingPool up, job.pool(MemoryKind::host_upload, 1 << 16, 3));
  FERRY_ASSIGN_OR_RETURN(StagingPool down, job.pool(MemoryKind::host_readback, 1 << 16, 3));
  FERRY_ASSIGN_OR_RETURN(Buffer target, job.device.create_buffer(size));
  const ferry::TransferOptions options{.chunk_bytes = 40000, .host_threads = 2,
                                       .acquire_timeout = ferry_test::kLongWait};
  FERRY_ASSIGN_OR_RETURN(const TimelinePoint uploaded,
                         ferry::upload(job.device.queue(QueueKind::upload), up, data, target, 0,
                                       {}, options));
  std::vector<std::byte> back = ferry_test::poison_bytes(size, 21);
  FERRY_RETURN_IF_ERROR(ferry::download(job.device.queue(QueueKind::download), down, target, 0,
                                        back, {.wait = {uploaded}, .signal = {}}, options));
  if (!same_bytes(back, data, "transfer job")) return Status(ErrorCode::internal, "wrong data");
  return Status();
}

// Upload, fill on the compute queue, download: three queues chained by timelines.
Status chain_job(JobContext& job) {
  const std::uint64_t size = ferry_test::log_uniform_size(job.rng, 100, 100000);
  const std::vector<std::byte> data = ferry_test::random_bytes(job.rng, size);
  const std::uint64_t fill_at = ferry_test::uniform(job.rng, 0, size - 1);
  const std::uint64_t fill_size = ferry_test::uniform(job.rng, 1, size - fill_at);
  FERRY_ASSIGN_OR_RETURN(Buffer staging, job.device.create_buffer(size, MemoryKind::host_upload));
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> staged, staging.host_span());
  std::memcpy(staged.data(), data.data(), size);
  FERRY_ASSIGN_OR_RETURN(Buffer middle, job.device.create_buffer(size));
  FERRY_ASSIGN_OR_RETURN(Buffer readback, job.device.create_buffer(size, MemoryKind::host_readback));
  FERRY_ASSIGN_OR_RETURN(const Timeline steps, job.device.create_timeline());
  CommandList up;
  FERRY_RETURN_IF_ERROR(up.copy(staging, 0, middle, 0, size));
  FERRY_RETURN_IF_ERROR(job.device.queue(QueueKind::upload)
                            .submit(std::move(up), {.wait = {}, .signal = {{steps, 1}}})
                            .status());
  CommandList fill;
  FERRY_RETURN_IF_ERROR(ferry::fill(fill, middle, fill_at, fill_size, 0xC0FFEE11u));
  FERRY_RETURN_IF_ERROR(job.device.queue(QueueKind::compute)
                            .submit(std::move(fill), {.wait = {{steps, 1}}, .signal = {{steps, 2}}})
                            .status());
  CommandList down;
  FERRY_RETURN_IF_ERROR(down.copy(middle, 0, readback, 0, size));
  FERRY_RETURN_IF_ERROR(job.device.queue(QueueKind::download)
                            .submit(std::move(down), {.wait = {{steps, 2}}, .signal = {{steps, 3}}})
                            .status());
  FERRY_RETURN_IF_ERROR(steps.wait(3, ferry_test::kLongWait));
  std::vector<std::byte> expected = data;
  ferry_test::apply_fill(expected, fill_at, fill_size, 0xC0FFEE11u);
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> result, readback.host_span());
  if (!same_bytes(result, expected, "chain job")) return Status(ErrorCode::internal, "wrong data");
  return Status();
}

// Three batches through an ingress pipeline, each checked against the normalize truth.
Status ingress_job(JobContext& job) {
  IngressOptions options;
  const ferry::NormalizeParams params = ferry_test::awkward_params(job.rng);
  FERRY_ASSIGN_OR_RETURN(options.transform, ferry::normalize_transform(params));
  options.depth = 2;
  FERRY_ASSIGN_OR_RETURN(options.pool, job.pool(MemoryKind::host_upload, 1 << 14, 2));
  FERRY_ASSIGN_OR_RETURN(const ferry::NormalizeShape shape,
                         ferry::resolve_normalize(params));
  const auto batches = ferry_test::make_batches(job.rng, 3, shape.input_bytes);
  FERRY_ASSIGN_OR_RETURN(IngressPipeline pipeline,
                         IngressPipeline::create(job.device, options,
                                                 ferry_test::pageable_source(batches)));
  Status first_error;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    auto next = pipeline.next(ferry_test::kLongWait);
    if (!next.ok()) {
      // A batch's error: the stream goes on with the next one.
      if (first_error.ok()) first_error = next.status();
      continue;
    }
    if (!next->has_value()) return Status(ErrorCode::internal, "the stream ended early");
    IngressBatch& batch = **next;
    const std::uint64_t index = batch.index();
    // The tensor is read on the download queue, so the release names that copy (a release
    // without a point covers the compute queue only): when a wait below fails, the job ends
    // and the batch's slot may be reused, but not before the copy has read it.
    FERRY_ASSIGN_OR_RETURN(Buffer readback,
                           job.device.create_buffer(shape.output_bytes, MemoryKind::host_readback));
    CommandList read;
    FERRY_RETURN_IF_ERROR(read.copy(batch.tensor(), 0, readback, 0, shape.output_bytes));
    FERRY_ASSIGN_OR_RETURN(const TimelinePoint copied,
                           job.device.queue(QueueKind::download)
                               .submit(std::move(read), {.wait = {batch.ready()}, .signal = {}}));
    FERRY_RETURN_IF_ERROR(batch.release(copied));
    FERRY_RETURN_IF_ERROR(copied.wait(ferry_test::kLongWait));
    FERRY_ASSIGN_OR_RETURN(const std::span<std::byte> tensor, readback.host_span());
    if (!same_bytes(tensor, ferry_test::expected_output(params, batches[index]), "ingress job")) {
      return Status(ErrorCode::internal, "wrong data");
    }
  }
  return first_error;
}

// Two steps through an egress pipeline; the consumer checks every chunk.
Status egress_job(JobContext& job) {
  const std::uint64_t size = ferry_test::log_uniform_size(job.rng, 100, 50000);
  FERRY_ASSIGN_OR_RETURN(Buffer output, job.device.create_buffer(size));
  CommandList fill;
  FERRY_RETURN_IF_ERROR(ferry::fill(fill, output, 0, size, 0x5EED5EEDu));
  FERRY_ASSIGN_OR_RETURN(const TimelinePoint written,
                         job.device.queue(QueueKind::compute).submit(std::move(fill)));
  std::vector<std::byte> expected(size);
  ferry_test::apply_fill(expected, 0, size, 0x5EED5EEDu);
  ferry::EgressOptions options;
  FERRY_ASSIGN_OR_RETURN(options.pool, job.pool(MemoryKind::host_readback, 1 << 14, 3));
  options.chunk_bytes = 1 << 14;
  options.on_error = ferry::ConsumerErrorPolicy::keep_going;
  std::atomic<std::uint64_t> wrong{0};
  FERRY_ASSIGN_OR_RETURN(ferry::EgressPipeline pipeline,
                         ferry::EgressPipeline::create(
                             job.device, options, [&](const ferry::EgressChunk& chunk) {
                               if (std::memcmp(chunk.bytes.data(), expected.data() + chunk.offset,
                                               chunk.bytes.size()) != 0) {
                                 wrong.fetch_add(1);
                               }
                               return Status();
                             }));
  Status first_error;
  for (int step = 0; step < 2; ++step) {
    const auto pushed = pipeline.push(output, 0, size, written);
    if (!pushed.ok() && first_error.ok()) first_error = pushed.status();
  }
  const Status closed = pipeline.close();
  CHECK_MESSAGE(wrong.load() == 0, "egress job: a consumer saw wrong bytes");
  if (wrong.load() != 0) return Status(ErrorCode::internal, "wrong data");
  return first_error.ok() ? closed : first_error;
}

struct RoundResult {
  std::size_t failed_jobs = 0;
  std::uint64_t injected = 0;
  ferry::FaultCounts counts;
  std::vector<std::string> errors;
};

// Runs every job once, on two threads, with `plan` in force; then, without faults, drains the
// device and checks that every pool got every lease back.
RoundResult run_round(BackendUnderTest& t, const FaultPlan& plan, std::uint64_t seed) {
  const std::vector<Job> first_thread = {transfer_job, chain_job, transfer_job};
  const std::vector<Job> second_thread = {ingress_job, egress_job, chain_job};
  std::vector<StagingPool> pools;
  std::mutex pools_mutex;
  std::mutex results_mutex;
  RoundResult result;
  auto run_jobs = [&](const std::vector<Job>& jobs, std::uint64_t thread_seed) {
    JobContext context{t.device, std::mt19937_64(thread_seed), pools, pools_mutex};
    for (const Job& job : jobs) {
      const Status status = job(context);
      if (!status.ok()) {
        std::lock_guard lock(results_mutex);
        ++result.failed_jobs;
        result.errors.push_back(status.to_string());
      }
    }
  };
  {
    const ferry_test::Watchdog watchdog("a fault-injection round");
    const ferry_test::ScopedFaultPlan faults(plan);
    std::thread other(run_jobs, second_thread, seed + 1);
    run_jobs(first_thread, seed);
    other.join();
    result.counts = ferry::fault_counts();
    for (const std::uint64_t injected : result.counts.injected) result.injected += injected;
  }
  CHECK_OK(t.device.wait_idle(ferry_test::kLongWait));
  for (const StagingPool& pool : pools) CHECK(pool.stats().bytes_in_use == 0);
  return result;
}

void check_round(const RoundResult& round) {
  std::string errors;
  for (const std::string& error : round.errors) errors += "\n  " + error;
  INFO("injected " << round.injected << ", failed jobs " << round.failed_jobs << errors);
  // Each injected failure is reported to at most one owner (some are absorbed: a failed poll
  // inside a pipeline is retried); nothing fails without one.
  CHECK(round.failed_jobs <= round.injected);
  for (const std::string& error : round.errors) {
    CHECK(error.find("injected fault") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("faults: every single allocation, submission, wait or thread start that fails fails its owner only") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    // A census first: a plan whose failing calls are never reached counts each site's calls.
    FaultPlan census_plan;
    for (int site = 0; site < ferry::kFaultSiteCount; ++site) {
      census_plan.fail(static_cast<FaultSite>(site), std::numeric_limits<std::uint64_t>::max());
    }
    const RoundResult census = run_round(t, census_plan, t.seed);
    REQUIRE(census.failed_jobs == 0);
    std::uint64_t rounds = 0;
    for (int site = 0; site < ferry::kFaultSiteCount; ++site) {
      const std::uint64_t calls = census.counts.calls[site];
      INFO("site " << ferry::to_string(static_cast<FaultSite>(site)) << ", " << calls << " calls");
      CHECK(calls > 0);
      // Each call in turn (a few past the census too: concurrency changes the count a little).
      for (std::uint64_t call = 1; call <= std::min<std::uint64_t>(calls + 3, 150); ++call) {
        INFO("fail call " << call);
        check_round(run_round(t, FaultPlan{}.fail(static_cast<FaultSite>(site), call), t.seed));
        ++rounds;
      }
    }
    MESSAGE(rounds << " rounds; calls per round: alloc " << census.counts.calls[0] << ", submit "
                   << census.counts.calls[1] << ", wait " << census.counts.calls[2]
                   << ", thread " << census.counts.calls[3]);
    // Afterwards, without faults, everything works.
    CHECK(run_round(t, FaultPlan{}, t.seed).failed_jobs == 0);
  });
}

TEST_CASE("faults: random failures at every site, seeded") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    for (int round_index = 0; round_index < 4; ++round_index) {
      FaultPlan plan;
      for (int site = 0; site < ferry::kFaultSiteCount; ++site) {
        plan.fail_randomly(static_cast<FaultSite>(site), 0.04);
      }
      plan.seed = t.seed + static_cast<std::uint64_t>(round_index);
      INFO("fault plan seed " << plan.seed);
      check_round(run_round(t, plan, plan.seed));
    }
    CHECK(run_round(t, FaultPlan{}, t.seed).failed_jobs == 0);
  });
}

TEST_CASE("faults: an ingress batch the backend refuses fails alone; the stream goes on") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    // Batch 3's upload (first submission) or normalize (second) is refused. Every batch fits the
    // ring (depth 8), so nothing but the producer submits while the faults are armed.
    for (const std::uint64_t failing_submit : {1, 2}) {
      INFO("batch 3's submission " << failing_submit << " fails");
      IngressOptions options;
      const ferry::NormalizeParams params = ferry_test::awkward_params(t.rng);
      options.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
      options.depth = 8;
      options.transfer.chunk_bytes = 1 << 20;  // one chunk per batch
      const auto shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
      const auto batches = ferry_test::make_batches(t.rng, 8, shape.input_bytes);
      std::optional<ferry_test::ScopedFaultPlan> faults;
      IngressPipeline pipeline = REQUIRE_VALUE(IngressPipeline::create(
          t.device, options, [&](std::uint64_t index) -> Result<std::optional<HostBatch>> {
            if (index == 3) faults.emplace(FaultPlan{}.fail(FaultSite::submit, failing_submit));
            if (index == 4) faults.reset();
            if (index >= batches.size()) return std::optional<HostBatch>();
            return std::optional<HostBatch>(HostBatch::pageable(batches[index]));
          }));
      std::vector<IngressBatch> held;
      for (std::uint64_t i = 0; i < batches.size(); ++i) {
        auto next = pipeline.next(ferry_test::kLongWait);
        if (i == 3) {
          CHECK_ERROR(next, ErrorCode::backend_error);
          CHECK(next.status().message().find("ingress batch 3") != std::string::npos);
          continue;
        }
        REQUIRE_OK(next);
        REQUIRE(next->has_value());
        held.push_back(std::move(**next));
      }
      CHECK_FALSE(REQUIRE_VALUE(pipeline.next(ferry_test::kLongWait)).has_value());
      for (const IngressBatch& batch : held) {
        ferry_test::check_batch(t, batch, params, batches[batch.index()]);
      }
      // The compute queue serves other work as before.
      CHECK_OK(ferry_test::fill_and_wait(t.device, REQUIRE_VALUE(t.device.create_buffer(64)), 0,
                                         64, 3));
      held.clear();
      pipeline.close();
      CHECK_OK(t.device.wait_idle(ferry_test::kLongWait));
    }
  });
}
