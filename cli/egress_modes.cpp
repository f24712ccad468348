#include "egress_modes.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>

#include "baselines/cuda_naive_egress.hpp"
#include "bench_common.hpp"
#include "ingress_modes.hpp"

namespace ferry::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Long enough for a large output on a slow software device; a hang becomes an error instead.
constexpr Timeout kWaitTimeout = std::chrono::seconds(120);
constexpr std::uint64_t kSampleStride = 4096;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// A distinct 32-bit pattern per run and step (splitmix64 of both).
std::uint32_t step_pattern(std::uint32_t run, std::uint64_t step) {
  std::uint64_t z = (std::uint64_t{run} << 40) + step + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint32_t>(z ^ (z >> 31));
}

std::uint32_t load32(const std::byte* at) {
  std::uint32_t word = 0;
  std::memcpy(&word, at, 4);
  return word;
}
std::uint64_t load64(const std::byte* at) {
  std::uint64_t word = 0;
  std::memcpy(&word, at, 8);
  return word;
}

Status mismatch(std::string_view what, std::uint64_t step, std::uint64_t offset,
                std::uint32_t expected, std::uint32_t actual) {
  char detail[160];
  std::snprintf(detail, sizeof detail,
                " step %llu at byte %llu of the output: expected 0x%08x, got 0x%08x",
                static_cast<unsigned long long>(step), static_cast<unsigned long long>(offset),
                expected, actual);
  return Status(ErrorCode::internal, "data mismatch in " + std::string(what) + detail);
}

// `bytes` (at `offset` of the step's output, a multiple of 4) should hold `pattern` in every
// 32-bit word: checked in full, or sampled every kSampleStride bytes plus the last word.
Status check_bytes(std::span<const std::byte> bytes, std::uint64_t offset, std::uint32_t pattern,
                   bool full, std::string_view what, std::uint64_t step) {
  const std::uint64_t expected = pattern | (std::uint64_t{pattern} << 32);
  const std::size_t size = bytes.size();
  auto locate = [&](std::size_t from, std::size_t to) -> Status {
    for (std::size_t at = from; at + 4 <= to; at += 4) {
      const std::uint32_t word = load32(bytes.data() + at);
      if (word != pattern) return mismatch(what, step, offset + at, pattern, word);
    }
    return ok_status();
  };
  if (full) {
    // Blocks of 4 KiB compared without branches, so the loop runs at memory speed.
    for (std::size_t block = 0; block < size; block += kSampleStride) {
      const std::size_t end = std::min<std::size_t>(size, block + kSampleStride);
      std::uint64_t diff = 0;
      std::size_t at = block;
      for (; at + 8 <= end; at += 8) diff |= load64(bytes.data() + at) ^ expected;
      if (at < end && at + 4 <= end) diff |= load32(bytes.data() + at) ^ pattern;
      if (diff != 0) return locate(block, end);
    }
    return ok_status();
  }
  for (std::size_t at = 0; at + 8 <= size; at += kSampleStride) {
    if (load64(bytes.data() + at) != expected) return locate(at, at + 8);
  }
  if (size >= 4) return locate(size - 4, size);
  return ok_status();
}

// The consumer's work on one chunk: the check, then a busy wait until `share_seconds` have
// passed since the call began, so that the host cost is both real and chosen.
Status consume(std::span<const std::byte> bytes, std::uint64_t offset, std::uint32_t pattern,
               bool full, double share_seconds, std::string_view what, std::uint64_t step) {
  const Clock::time_point start = Clock::now();
  Status status = check_bytes(bytes, offset, pattern, full, what, step);
  const Clock::time_point until =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(share_seconds));
  while (Clock::now() < until) {
  }
  return status;
}

}  // namespace

std::string_view to_string(EgressMode mode) {
  switch (mode) {
    case EgressMode::naive: return "naive";
    case EgressMode::naive_cuda: return "naive-cudaMemcpy";
    case EgressMode::pooled: return "pooled-sequential";
    case EgressMode::ferry_egress: return "ferry-egress";
  }
  return "?";
}

std::string_view to_string(EgressCheck check) {
  return check == EgressCheck::full ? "full" : "sampled";
}

std::string_view to_string(DuplexMode mode) {
  switch (mode) {
    case DuplexMode::ingress_alone: return "ingress alone";
    case DuplexMode::egress_alone: return "egress alone";
    case DuplexMode::both: return "both";
  }
  return "?";
}

double EgressComponents::bound_seconds() const {
  return std::max({compute_seconds, copy_seconds, host_seconds});
}

std::string_view EgressComponents::bound_by() const {
  const double bound = bound_seconds();
  if (bound == copy_seconds) return "copy";
  if (bound == compute_seconds) return "compute";
  return "host";
}

EgressBench::~EgressBench() = default;

Result<std::unique_ptr<EgressBench>> EgressBench::create(const Device& device,
                                                         const EgressRunSettings& settings) {
  std::unique_ptr<EgressBench> bench(new EgressBench());
  bench->device_ = device;
  bench->compute_ = device.queue(QueueKind::compute);
  bench->download_ = device.queue(QueueKind::download);
  bench->settings_ = settings;
  const std::uint64_t bytes = settings.output_bytes;
  for (std::uint64_t offset = 0; offset < bytes; offset += settings.chunk_bytes) {
    bench->chunks_.push_back({offset, std::min(settings.chunk_bytes, bytes - offset)});
  }
  FERRY_ASSIGN_OR_RETURN(bench->outputs_,
                         create_buffers(device, settings.ring, bytes, MemoryKind::device));
  StagingPoolOptions pool;
  pool.kind = MemoryKind::host_readback;
  pool.slab_bytes = settings.pool_slab_bytes;
  pool.max_slabs = settings.pool_slabs;
  pool.reserved_slabs = settings.pool_slabs;  // allocated now, not while timing
  FERRY_ASSIGN_OR_RETURN(bench->pool_, device.create_staging_pool(pool));
  pool.slab_bytes = (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
  pool.max_slabs = 1;
  pool.reserved_slabs = 1;
  FERRY_ASSIGN_OR_RETURN(bench->step_pool_, device.create_staging_pool(pool));
  // Every page of the pools and of the pageable buffer written once, so that no first-touch
  // fault is timed (where the memory is not pinned already: the CPU device, some drivers).
  {
    std::vector<Lease> leases;
    for (std::uint64_t slab = 0; slab < settings.pool_slabs; ++slab) {
      FERRY_ASSIGN_OR_RETURN(Lease lease, bench->pool_.try_acquire(settings.pool_slab_bytes));
      leases.push_back(std::move(lease));
    }
    FERRY_ASSIGN_OR_RETURN(Lease lease, bench->step_pool_.try_acquire(bytes));
    leases.push_back(std::move(lease));
    for (const Lease& touched : leases) {
      std::memset(touched.data().data(), 0, touched.size());
    }
  }
  bench->pageable_.assign(bytes, std::byte{0x5a});
  bench->threads_ = std::make_unique<HostThreadPool>(settings.workers);
  return bench;
}

Result<CommandList> EgressBench::record_compute(std::uint32_t slot, std::uint32_t fills,
                                                std::uint32_t pattern) const {
  CommandList commands;
  for (std::uint32_t k = 0; k < fills; ++k) {
    FERRY_RETURN_IF_ERROR(ferry::fill(commands, outputs_[slot], 0, settings_.output_bytes,
                                        k + 1 == fills ? pattern : ~pattern));
  }
  return commands;
}

Status EgressBench::for_each_chunk(std::size_t items,
                                   const std::function<Status(std::size_t)>& work) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  Status first_error;
  // One part per thread; each takes the next item until none is left.
  threads_->parallel_for(settings_.workers, [&](std::size_t, std::size_t) {
    for (std::size_t i = next++; i < items && !failed; i = next++) {
      Status status = work(i);
      if (!status.ok()) {
        std::lock_guard lock(mutex);
        if (first_error.ok()) first_error = std::move(status);
        failed = true;
      }
    }
  });
  return first_error;
}

Status EgressBench::host_step(std::span<const std::byte> bytes, std::uint64_t step,
                              std::uint32_t pattern, bool full_check, double host_seconds,
                              std::string_view what) {
  const auto total = static_cast<double>(settings_.output_bytes);
  return for_each_chunk(chunks_.size(), [&](std::size_t i) {
    const Chunk& chunk = chunks_[i];
    return consume(bytes.subspan(chunk.offset, chunk.size), chunk.offset, pattern, full_check,
                   host_seconds * static_cast<double>(chunk.size) / total, what, step);
  });
}

Result<double> EgressBench::calibrate_fill() {
  KernelSettings settings;
  settings.commands = 8;
  settings.min_time = settings_.calibration_time;
  auto record = [&]() -> Result<CommandList> {
    CommandList commands;
    for (std::uint32_t k = 0; k < settings.commands; ++k) {
      FERRY_RETURN_IF_ERROR(
          ferry::fill(commands, outputs_[k % outputs_.size()], 0, settings_.output_bytes, 0xC0FFEE00u + k));
    }
    return commands;
  };
  Result<KernelResult> result = time_lists(compute_, record, settings);
  if (!result.ok()) return result.status().with_context("calibrating the fill");
  return result->median_seconds / settings.commands;
}

Result<EgressComponents> EgressBench::measure_components(const EgressSetting& setting,
                                                         std::uint32_t fills) {
  EgressComponents components;
  components.fills = fills;
  const std::uint32_t steps = settings_.steps;
  const std::uint32_t run = next_run();

  // Compute: one untimed step, then the steps back to back on the compute queue.
  for (int timed = 0; timed < 2; ++timed) {
    const std::uint32_t count = timed != 0 ? steps : 1;
    const Clock::time_point start = Clock::now();
    TimelinePoint last;
    for (std::uint32_t step = 0; step < count; ++step) {
      FERRY_ASSIGN_OR_RETURN(CommandList commands,
                             record_compute(step % settings_.ring, fills, step_pattern(run, step)));
      FERRY_ASSIGN_OR_RETURN(last, compute_.submit(std::move(commands)));
    }
    FERRY_RETURN_IF_ERROR(last.wait(kWaitTimeout).with_context("compute alone"));
    components.compute_seconds = seconds_between(start, Clock::now()) / count;
  }

  // Copy: each step's output in chunks into leases of the pipeline's pool, as the pipeline
  // downloads it, back to back on the download queue.
  for (int timed = 0; timed < 2; ++timed) {
    const std::uint32_t count = timed != 0 ? steps : 1;
    const Clock::time_point start = Clock::now();
    TimelinePoint last;
    for (std::uint32_t step = 0; step < count; ++step) {
      for (const Chunk& chunk : chunks_) {
        FERRY_ASSIGN_OR_RETURN(Lease lease, pool_.acquire(chunk.size, kWaitTimeout));
        CommandList copy;
        FERRY_RETURN_IF_ERROR(
            copy.copy(outputs_[step % settings_.ring], chunk.offset, lease, 0, chunk.size));
        FERRY_ASSIGN_OR_RETURN(last, download_.submit(std::move(copy)));
        // Back to the pool once the copy has completed.
      }
    }
    FERRY_RETURN_IF_ERROR(last.wait(kWaitTimeout).with_context("copy alone"));
    components.copy_seconds = seconds_between(start, Clock::now()) / count;
  }

  // Host: the consumer on every chunk of `steps` steps, on `workers` threads taking the next
  // chunk as they become free (as the pipeline's as_completed workers do), from pinned memory
  // holding a pattern.
  FERRY_ASSIGN_OR_RETURN(Lease lease, step_pool_.acquire(settings_.output_bytes, kWaitTimeout));
  const std::uint32_t pattern = step_pattern(run, 0);
  {
    FERRY_ASSIGN_OR_RETURN(CommandList fill, record_compute(0, 1, pattern));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint filled, compute_.submit(std::move(fill)));
    CommandList copy;
    FERRY_RETURN_IF_ERROR(copy.copy(outputs_[0], 0, lease, 0, settings_.output_bytes));
    SubmitSync sync;
    sync.wait.push_back(filled);
    FERRY_ASSIGN_OR_RETURN(TimelinePoint copied, download_.submit(std::move(copy), sync));
    FERRY_RETURN_IF_ERROR(copied.wait(kWaitTimeout));
  }
  const std::span<const std::byte> bytes = lease.data();
  const double host_seconds = setting.host_ms / 1e3;
  const bool full = settings_.check == EgressCheck::full;
  FERRY_RETURN_IF_ERROR(host_step(bytes, 0, pattern, true, host_seconds, "host alone"));
  const auto total = static_cast<double>(settings_.output_bytes);
  const Clock::time_point start = Clock::now();
  FERRY_RETURN_IF_ERROR(for_each_chunk(std::size_t{steps} * chunks_.size(), [&](std::size_t i) {
    const Chunk& chunk = chunks_[i % chunks_.size()];
    return consume(bytes.subspan(chunk.offset, chunk.size), chunk.offset, pattern, full,
                   host_seconds * static_cast<double>(chunk.size) / total, "host alone",
                   i / chunks_.size());
  }));
  components.host_seconds = seconds_between(start, Clock::now()) / steps;
  lease.release();
  FERRY_RETURN_IF_ERROR(device_.wait_idle(kWaitTimeout));
  return components;
}

Result<EgressModeResult> EgressBench::run_mode(EgressMode mode, const EgressSetting& setting,
                                               const EgressComponents& components,
                                               int cuda_device_index) {
  Result<EgressModeResult> result = Status(ErrorCode::invalid_argument, "unknown egress mode");
  switch (mode) {
    case EgressMode::naive: result = run_naive(setting, components.fills); break;
    case EgressMode::naive_cuda:
      result = run_naive_cuda(setting, components.compute_seconds, cuda_device_index);
      break;
    case EgressMode::pooled: result = run_pooled(setting, components.fills); break;
    case EgressMode::ferry_egress: result = run_pipeline(setting, components.fills); break;
  }
  const Status idle = device_.wait_idle(kWaitTimeout);
  if (!result.ok()) return result.status().with_context(to_string(mode));
  FERRY_RETURN_IF_ERROR(idle);
  result->mode = mode;
  result->steady_seconds_per_step = mode == EgressMode::ferry_egress
                                        ? result->steady_seconds_per_step
                                        : std::numeric_limits<double>::quiet_NaN();
  return result;
}

Result<EgressModeResult> EgressBench::run_naive(const EgressSetting& setting,
                                                std::uint32_t fills) {
  const std::uint32_t run = next_run();
  const std::uint32_t warmup = settings_.warmup_steps;
  TransferOptions transfer;
  transfer.chunk_bytes = settings_.chunk_bytes;
  transfer.acquire_timeout = kWaitTimeout;
  EgressModeResult result;
  Clock::time_point start = Clock::now();
  for (std::uint64_t step = 0; step < std::uint64_t{warmup} + settings_.steps; ++step) {
    if (step == warmup) start = Clock::now();
    const auto slot = static_cast<std::uint32_t>(step % settings_.ring);
    const std::uint32_t pattern = step_pattern(run, step);
    FERRY_ASSIGN_OR_RETURN(CommandList commands, record_compute(slot, fills, pattern));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute_.submit(std::move(commands)));
    FERRY_RETURN_IF_ERROR(done.wait(kWaitTimeout));
    FERRY_RETURN_IF_ERROR(download(download_, pool_, outputs_[slot], 0, pageable_, {}, transfer));
    FERRY_RETURN_IF_ERROR(host_step(pageable_, step, pattern,
                                    step < warmup || settings_.check == EgressCheck::full,
                                    setting.host_ms / 1e3, "naive"));
  }
  result.seconds = seconds_between(start, Clock::now());
  result.steps = settings_.steps;
  return result;
}

Result<EgressModeResult> EgressBench::run_naive_cuda(const EgressSetting& setting,
                                                     double compute_seconds,
                                                     int cuda_device_index) {
  EgressModeResult result;
  if (device_.backend() != Backend::cuda) {
    result.available = false;
    result.reason = "not a CUDA device";
    return result;
  }
  const std::uint32_t warmup = settings_.warmup_steps;
  auto host_work = [&](std::uint64_t step, std::span<const std::byte> bytes,
                       std::uint32_t pattern) {
    return host_step(bytes, step, pattern, step < warmup || settings_.check == EgressCheck::full,
                     setting.host_ms / 1e3, "naive-cudaMemcpy");
  };
  const CudaNaiveEgress cuda =
      measure_cuda_naive_egress(cuda_device_index, settings_.output_bytes, compute_seconds * 1e3,
                                warmup, settings_.steps, host_work);
  FERRY_RETURN_IF_ERROR(cuda.host_error);
  result.available = cuda.available;
  result.reason = cuda.reason;
  result.steps = cuda.steps;
  result.seconds = cuda.seconds;
  result.memsets = cuda.memsets;
  return result;
}

Result<EgressModeResult> EgressBench::run_pooled(const EgressSetting& setting,
                                                 std::uint32_t fills) {
  const std::uint32_t run = next_run();
  const std::uint32_t warmup = settings_.warmup_steps;
  const std::uint64_t bytes = settings_.output_bytes;
  EgressModeResult result;
  Clock::time_point start = Clock::now();
  for (std::uint64_t step = 0; step < std::uint64_t{warmup} + settings_.steps; ++step) {
    if (step == warmup) start = Clock::now();
    const auto slot = static_cast<std::uint32_t>(step % settings_.ring);
    const std::uint32_t pattern = step_pattern(run, step);
    FERRY_ASSIGN_OR_RETURN(CommandList commands, record_compute(slot, fills, pattern));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute_.submit(std::move(commands)));
    FERRY_RETURN_IF_ERROR(done.wait(kWaitTimeout));
    FERRY_ASSIGN_OR_RETURN(Lease lease, step_pool_.acquire(bytes, kWaitTimeout));
    CommandList copy;
    FERRY_RETURN_IF_ERROR(copy.copy(outputs_[slot], 0, lease, 0, bytes));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint copied, download_.submit(std::move(copy)));
    FERRY_RETURN_IF_ERROR(copied.wait(kWaitTimeout));
    FERRY_RETURN_IF_ERROR(host_step(lease.data(), step, pattern,
                                    step < warmup || settings_.check == EgressCheck::full,
                                    setting.host_ms / 1e3, "pooled-sequential"));
  }
  result.seconds = seconds_between(start, Clock::now());
  result.steps = settings_.steps;
  return result;
}

Result<EgressModeResult> EgressBench::run_pipeline(const EgressSetting& setting,
                                                   std::uint32_t fills) {
  const std::uint32_t run = next_run();
  const std::uint32_t warmup = settings_.warmup_steps;
  const std::uint64_t total_steps = std::uint64_t{warmup} + settings_.steps;
  const std::uint64_t bytes = settings_.output_bytes;
  const double host_seconds = setting.host_ms / 1e3;
  const EgressCheck check = settings_.check;

  // Per step: chunks not yet consumed, and when the last one was. Each step's entry is written
  // by the consumer call that finishes it, and read after drain().
  std::unique_ptr<std::atomic<std::uint32_t>[]> remaining(
      new std::atomic<std::uint32_t>[total_steps]);
  for (std::uint64_t i = 0; i < total_steps; ++i) {
    remaining[i] = static_cast<std::uint32_t>(chunks_.size());
  }
  std::vector<Clock::time_point> consumed(total_steps);
  auto consumer = [&](const EgressChunk& chunk) -> Status {
    if (chunk.step >= total_steps) {
      return Status(ErrorCode::internal, "unexpected step " + std::to_string(chunk.step));
    }
    Status status = consume(chunk.bytes, chunk.offset, step_pattern(run, chunk.step),
                            chunk.step < warmup || check == EgressCheck::full,
                            host_seconds * static_cast<double>(chunk.bytes.size()) /
                                static_cast<double>(chunk.step_bytes),
                            "ferry-egress", chunk.step);
    if (remaining[chunk.step].fetch_sub(1) == 1) consumed[chunk.step] = Clock::now();
    return status;
  };
  EgressOptions options;
  options.workers = settings_.workers;
  options.max_pending_steps = settings_.max_pending_steps;
  options.order = EgressOrder::as_completed;
  options.pool = pool_;
  options.chunk_bytes = settings_.chunk_bytes;
  options.push_timeout = kWaitTimeout;
  FERRY_ASSIGN_OR_RETURN(EgressPipeline pipeline,
                         EgressPipeline::create(device_, options, consumer));

  // The application's loop: step i's compute overwrites the output of step i - ring once its
  // download has read it, a wait on the device; push() blocks only when the pipeline is full.
  std::vector<TimelinePoint> last_read(settings_.ring);
  Clock::time_point start = Clock::now();
  Status status;
  for (std::uint64_t step = 0; step < total_steps && status.ok(); ++step) {
    if (step == warmup) {
      status = pipeline.drain(kWaitTimeout);
      start = Clock::now();
      if (!status.ok()) break;
    }
    const auto slot = static_cast<std::uint32_t>(step % settings_.ring);
    auto submit_step = [&]() -> Status {
      FERRY_ASSIGN_OR_RETURN(CommandList commands,
                             record_compute(slot, fills, step_pattern(run, step)));
      SubmitSync sync;
      if (last_read[slot].timeline) sync.wait.push_back(last_read[slot]);
      FERRY_ASSIGN_OR_RETURN(TimelinePoint ready, compute_.submit(std::move(commands), sync));
      FERRY_ASSIGN_OR_RETURN(EgressTicket ticket, pipeline.push(outputs_[slot], 0, bytes, ready));
      last_read[slot] = ticket.output_read;
      return ok_status();
    };
    status = submit_step();
  }
  if (status.ok()) status = pipeline.drain(kWaitTimeout);
  const Clock::time_point end = Clock::now();
  // Delivers or drops whatever is left after an error, and joins the workers.
  const Status closed = pipeline.close(status.ok() ? EgressClose::drain : EgressClose::cancel);
  FERRY_RETURN_IF_ERROR(status);
  FERRY_RETURN_IF_ERROR(closed);

  EgressModeResult result;
  result.seconds = seconds_between(start, end);
  result.steps = settings_.steps;
  std::vector<Clock::time_point> timed(consumed.begin() + warmup, consumed.end());
  std::sort(timed.begin(), timed.end());
  result.steady_seconds_per_step =
      timed.size() >= 2 ? seconds_between(timed.front(), timed.back()) /
                              static_cast<double>(timed.size() - 1)
                        : std::numeric_limits<double>::quiet_NaN();
  return result;
}

Result<DuplexResult> EgressBench::run_duplex(DuplexMode mode, const DuplexSettings& settings) {
  const bool ingress = mode != DuplexMode::egress_alone;
  const bool egress = mode != DuplexMode::ingress_alone;
  const std::uint32_t run = next_run();
  const std::uint32_t warmup = settings.warmup_steps;
  const std::uint64_t total_steps = std::uint64_t{warmup} + settings.steps;
  std::uint64_t out_bytes = 4;
  for (std::uint32_t dim : settings.output) out_bytes *= dim;

  // Ingress: pinned uint8 batches, cycled, normalized to float32 by the pipeline.
  const NormalizeParams params = imagenet_normalize_params(settings.input, ElementType::float32);
  FERRY_ASSIGN_OR_RETURN(NormalizeShape shape, resolve_normalize(params));
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> sources,
                         create_buffers(device_, kSourceBatches, shape.input_bytes,
                                        MemoryKind::host_upload));
  for (std::uint32_t i = 0; i < kSourceBatches; ++i) {
    FERRY_ASSIGN_OR_RETURN(std::span<std::byte> source, sources[i].host_span());
    fill_random(source, 0xD0 + i);
  }
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> outputs,
                         create_buffers(device_, settings_.ring, out_bytes, MemoryKind::device));

  IngressPipeline in;
  if (ingress) {
    IngressOptions options;
    FERRY_ASSIGN_OR_RETURN(options.transform, normalize_transform(params));
    IngressSource source = [&sources](std::uint64_t index) -> Result<std::optional<HostBatch>> {
      return std::optional<HostBatch>(HostBatch::pinned(sources[index % kSourceBatches]));
    };
    FERRY_ASSIGN_OR_RETURN(in, IngressPipeline::create(device_, options, std::move(source)));
  }
  EgressPipeline out;
  if (egress) {
    EgressOptions options;
    options.workers = settings_.workers;
    options.max_pending_steps = settings_.max_pending_steps;
    options.order = EgressOrder::as_completed;
    options.pool = pool_;
    // One download per step where the pool's slabs allow it.
    options.chunk_bytes =
        std::min(settings_.pool_slab_bytes, std::max(out_bytes, settings_.chunk_bytes));
    options.push_timeout = kWaitTimeout;
    const EgressCheck check = settings_.check;
    auto consumer = [run, warmup, check](const EgressChunk& chunk) -> Status {
      return check_bytes(chunk.bytes, chunk.offset, step_pattern(run, chunk.step),
                         chunk.step < warmup || check == EgressCheck::full, "ingress+egress",
                         chunk.step);
    };
    FERRY_ASSIGN_OR_RETURN(out, EgressPipeline::create(device_, options, consumer));
  }

  // Step i: the compute (one fill of the output) waits on the device for batch i's tensor and
  // for the download of the step that last used its output; the batch is released behind it.
  std::vector<TimelinePoint> last_read(settings_.ring);
  TimelinePoint last_done;
  Clock::time_point start = Clock::now();
  auto one_step = [&](std::uint64_t step) -> Status {
    const auto slot = static_cast<std::uint32_t>(step % settings_.ring);
    SubmitSync sync;
    std::optional<IngressBatch> batch;
    if (ingress) {
      FERRY_ASSIGN_OR_RETURN(batch, in.next(kWaitTimeout));
      if (!batch) return Status(ErrorCode::internal, "the ingress pipeline ended early");
      sync.wait.push_back(batch->ready());
    }
    if (last_read[slot].timeline) sync.wait.push_back(last_read[slot]);
    CommandList commands;
    FERRY_RETURN_IF_ERROR(ferry::fill(commands, outputs[slot], 0, out_bytes, step_pattern(run, step)));
    FERRY_ASSIGN_OR_RETURN(last_done, compute_.submit(std::move(commands), sync));
    if (batch) FERRY_RETURN_IF_ERROR(batch->release(last_done));
    if (egress) {
      FERRY_ASSIGN_OR_RETURN(EgressTicket ticket, out.push(outputs[slot], 0, out_bytes, last_done));
      last_read[slot] = ticket.output_read;
    }
    return ok_status();
  };
  auto finish = [&]() -> Status {
    if (egress) FERRY_RETURN_IF_ERROR(out.drain(kWaitTimeout));
    return last_done.wait(kWaitTimeout);
  };
  Status status;
  for (std::uint64_t step = 0; step < total_steps && status.ok(); ++step) {
    if (step == warmup) {
      status = finish();
      start = Clock::now();
      if (!status.ok()) break;
    }
    status = one_step(step);
  }
  if (status.ok()) status = finish();
  const Clock::time_point end = Clock::now();
  in.close();
  const Status closed = out.close(status.ok() ? EgressClose::drain : EgressClose::cancel);
  const Status idle = device_.wait_idle(kWaitTimeout);
  const std::string what = "ingress and egress together (" + std::string(to_string(mode)) + ")";
  FERRY_RETURN_IF_ERROR(Status(status).with_context(what));
  FERRY_RETURN_IF_ERROR(Status(closed).with_context(what));
  FERRY_RETURN_IF_ERROR(idle);

  DuplexResult result;
  result.mode = mode;
  result.steps = settings.steps;
  result.seconds = seconds_between(start, end);
  return result;
}

}  // namespace ferry::cli
