// `ferry bench egress`: device results to host work, step after step: in sequence (the naive way,
// or with a pinned buffer) and through ferry's EgressPipeline, in one run, against the bound that
// each component alone sets; then ingress and egress together against each direction alone.
// Every step's output has its own pattern, which the consumer checks.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "baselines/cpu_convert.hpp"
#include "baselines/cuda_memcpy.hpp"
#include "bench_common.hpp"
#include "ops/op_case.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kOptions[] = {
    {.name = "--output-shape", .kind = OptionKind::dims, .metavar = "DIMS",
     .help = "float32 output per step (336 MiB by default)", .fallback = "16x21x512x512",
     .quick = "1x2x512x512", .excludes = "--mib"},
    {.name = "--mib", .kind = OptionKind::count, .metavar = "M", .help = "or an output of M MiB",
     .min = 1, .max = 1u << 20},
    {.name = "--settings", .kind = OptionKind::choices, .metavar = "LIST",
     .help = "comma-separated settings to run", .fallback = "copy,compute,host",
     .choices = "copy,compute,host"},
    {.name = "--compute-ms", .kind = OptionKind::millis, .metavar = "X",
     .help = "compute time per step for every setting chosen", .excludes = "--compute-fills"},
    {.name = "--compute-fills", .kind = OptionKind::count, .metavar = "R",
     .help = "or R fills per step (no calibration)", .min = 1, .max = 1'000'000},
    {.name = "--host-ms", .kind = OptionKind::millis, .metavar = "X",
     .help = "host CPU time per step (summed over chunks) for every setting chosen"},
    {.name = "--workers", .kind = OptionKind::count, .metavar = "N",
     .help = "consumer threads, also used by the other modes", .fallback = "4", .min = 1,
     .max = 256},
    {.name = "--chunk", .kind = OptionKind::size, .metavar = "SIZE",
     .help = "download and consumer unit", .fallback = "16M", .quick = "256K",
     .multiple = kStagingAlignment},
    {.name = "--steps", .kind = OptionKind::count, .metavar = "N", .help = "timed steps per mode",
     .fallback = "40", .quick = "4", .min = 1, .max = 1'000'000},
    {.name = "--check", .kind = OptionKind::choice, .metavar = "MODE",
     .help = "timed steps: sampled (a word every 4 KiB) or full (every word, a pass over the "
             "output that adds to the host work)",
     .fallback = "sampled", .choices = "sampled,full"},
    {.name = "--no-duplex", .help = "skip ingress and egress together"},
};

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kSampleStride = 4096;

enum class Mode : std::uint8_t { naive, naive_cuda, pooled, ferry_egress };
constexpr Mode kModes[] = {Mode::naive, Mode::naive_cuda, Mode::pooled, Mode::ferry_egress};
constexpr const char* kModeNames[] = {"naive", "naive-cudaMemcpy", "pooled-sequential",
                                      "ferry-egress"};
enum class Duplex : std::uint8_t { ingress_alone, egress_alone, both };
constexpr const char* kDuplexNames[] = {"ingress alone", "egress alone", "both"};

// The defaults are those of a full run; plan() sets them from the options.
struct Settings {
  std::uint64_t output_bytes = 0;  // per step; a multiple of 4
  std::uint64_t chunk_bytes = 16 * kMiB;
  std::uint32_t workers = 4;  // consumer threads, and the host threads of the other modes
  std::uint32_t ring = 3;     // device outputs in rotation
  std::uint32_t max_pending_steps = 4;
  std::uint64_t pool_slab_bytes = 64 * kMiB;  // the pipeline's readback pool
  std::uint32_t pool_slabs = 8;
  std::uint32_t warmup_steps = 4;  // per mode, untimed, checked in full
  std::uint32_t steps = 40;        // per mode, timed
  bool full_check = false;         // timed steps: every word, or one every kSampleStride bytes
  std::chrono::milliseconds calibration_time{200};
  // Ingress and egress together: uint8 NHWC batches up, a float32 output written by a fill, down.
  BatchShape duplex_input{64, 224, 224, 3}, duplex_output{64, 21, 56, 56};
  std::uint32_t duplex_warmup = 8, duplex_steps = 400;
};

// A setting: how long the compute and the host work of a step take; what was measured.
struct Case {
  std::string name = {};  // "copy-bound", ...
  double compute_ms = 0;  // asked for; converted to a number of fills
  double host_ms = 0;     // CPU time of the host work per step, summed over chunks
  std::optional<std::uint32_t> fills = {};  // given directly (--compute-fills)
  std::uint32_t fills_used = 0;
  double compute_seconds = 0, copy_seconds = 0, host_seconds = 0;  // per step, each alone
  struct ModeResult {
    double seconds = kNaN;  // per step, first timed submission to the last host work
    std::uint64_t steps = 0;
    double steady_seconds = kNaN;  // ferry-egress: first to last timed step's end of host work
    std::uint32_t memsets = 0;     // naive-cudaMemcpy: its compute, calibrated on its own
  };
  std::map<Mode, ModeResult> modes = {};  // those measured
  std::string unavailable = {};           // why naive-cudaMemcpy was not measured

  double bound() const { return std::max({compute_seconds, copy_seconds, host_seconds}); }
  std::string bound_by() const {
    return bound() == copy_seconds ? "copy" : bound() == compute_seconds ? "compute" : "host";
  }
  ModeResult mode(Mode mode) const { return modes.contains(mode) ? modes.at(mode) : ModeResult{}; }
};

// A distinct 32-bit pattern per run and step.
std::uint32_t step_pattern(std::uint32_t run, std::uint64_t step) {
  return static_cast<std::uint32_t>(mix64((std::uint64_t{run} << 40) + step));
}

template <typename Word>
Word load(const std::byte* at) {
  Word word = 0;
  std::memcpy(&word, at, sizeof word);
  return word;
}

// `bytes` (at `offset` of the step's output, a multiple of 4) should hold `pattern` in every
// 32-bit word: checked in full, in blocks of 4 KiB compared without branches so that the loop
// runs at memory speed, or sampled: the first word of each block, and the last word.
Status check_bytes(std::span<const std::byte> bytes, std::uint64_t offset, std::uint32_t pattern,
                   bool full, std::string_view what, std::uint64_t step) {
  const std::uint64_t expected = pattern | (std::uint64_t{pattern} << 32);
  const std::size_t size = bytes.size();
  auto locate = [&](std::size_t from, std::size_t to) -> Status {  // the first wrong word
    for (std::size_t at = from; at + 4 <= to; at += 4) {
      const auto word = load<std::uint32_t>(bytes.data() + at);
      if (word == pattern) continue;
      char detail[160];
      std::snprintf(detail, sizeof detail,
                    " step %llu at byte %llu of the output: expected 0x%08x, got 0x%08x",
                    static_cast<unsigned long long>(step),
                    static_cast<unsigned long long>(offset + at), pattern, word);
      return Status(ErrorCode::internal, "data mismatch in " + std::string(what) + detail);
    }
    return ok_status();
  };
  for (std::size_t block = 0; block < size; block += kSampleStride) {
    const std::size_t end = std::min<std::size_t>(size, block + (full ? kSampleStride : 8));
    std::uint64_t diff = 0;
    std::size_t at = block;
    for (; at + 8 <= end; at += 8) diff |= load<std::uint64_t>(bytes.data() + at) ^ expected;
    if (at + 4 <= end) diff |= load<std::uint32_t>(bytes.data() + at) ^ pattern;
    if (diff != 0) return locate(block, end);
  }
  return full || size < 4 ? ok_status() : locate(size - 4, size);
}

// The consumer's work on `bytes` of an output of `of` bytes: the check, then a busy wait until
// its share of `host_ms` has passed since the call began, so that the host cost is both real and
// chosen.
Status consume(std::span<const std::byte> bytes, std::uint64_t offset, std::uint64_t of,
               std::uint32_t pattern, bool full, double host_ms, std::string_view what,
               std::uint64_t step) {
  const double share = host_ms / 1e3 * static_cast<double>(bytes.size()) / static_cast<double>(of);
  const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(share));
  Status status = check_bytes(bytes, offset, pattern, full, what, step);
  while (Clock::now() < until) {
  }
  return status;
}

// The compute of a step: `fills` fills of `output`, the last one with `pattern`.
Result<CommandList> record_fills(const Buffer& output, std::uint64_t bytes, std::uint32_t fills,
                                 std::uint32_t pattern) {
  CommandList commands;
  for (std::uint32_t k = 0; k < fills; ++k)
    FERRY_RETURN_IF_ERROR(
        ferry::fill(commands, output, 0, bytes, k + 1 == fills ? pattern : ~pattern));
  return commands;
}

// One run of the application's loop around an EgressPipeline: step i's compute overwrites the
// output of step i - ring once its download has read it, a wait on the device; push() blocks
// only when the pipeline is full. An IngressPipeline may feed the compute: batch i's tensor is
// waited for on the device and released behind the compute.
struct PipelineRun {
  const std::vector<Buffer>& outputs;  // the ring
  std::uint64_t bytes;                 // per output
  std::uint32_t fills;                 // the compute of a step
  double host_ms;                      // the consumer's CPU time per step
  std::uint64_t chunk_bytes;
  std::uint32_t warmup, steps;
  std::string_view what;
  IngressPipeline* ingress = nullptr;
  bool egress = true;  // false: no download (ingress alone)
};

// The buffers, pools and threads of one output size on one device.
class EgressBench {
 public:
  EgressBench(const Device& device, const Settings& settings)
      : device_(device), s_(settings), threads_(settings.workers) {
    for (std::uint64_t offset = 0; offset < s_.output_bytes; offset += s_.chunk_bytes)
      chunks_.push_back({offset, std::min(s_.chunk_bytes, s_.output_bytes - offset)});
  }

  Status create() {
    const MemoryKind readback = MemoryKind::host_readback;
    const std::uint64_t step_bytes = round_up(s_.output_bytes, kStagingAlignment);
    FERRY_ASSIGN_OR_RETURN(outputs_,
                           create_buffers(device_, s_.ring, s_.output_bytes, MemoryKind::device));
    FERRY_ASSIGN_OR_RETURN(pool_,
                           reserved_pool(device_, readback, s_.pool_slab_bytes, s_.pool_slabs));
    FERRY_ASSIGN_OR_RETURN(step_pool_, reserved_pool(device_, readback, step_bytes, 1));
    // Every page of the pools and of the pageable buffer written once: no first-touch fault is
    // timed (where the memory is not pinned already: the CPU device, some drivers).
    std::vector<Lease> leases;
    for (std::uint64_t slab = 0; slab <= s_.pool_slabs; ++slab) {
      FERRY_ASSIGN_OR_RETURN(Lease lease, slab < s_.pool_slabs
                                              ? pool_.try_acquire(s_.pool_slab_bytes)
                                              : step_pool_.try_acquire(s_.output_bytes));
      std::memset(lease.data().data(), 0, lease.size());
      leases.push_back(std::move(lease));
    }
    pageable_.assign(s_.output_bytes, std::byte{0x5a});
    return ok_status();
  }

  // Seconds per full-output fill: the median of CommandLists of several fills.
  Result<double> calibrate_fill() {
    const ListSettings settings{.commands = 8, .min_time = s_.calibration_time};
    Result<ListTiming> timing = time_lists(
        compute_,
        [&]() -> Result<CommandList> {
          CommandList commands;
          for (std::uint32_t k = 0; k < settings.commands; ++k)
            FERRY_RETURN_IF_ERROR(
                ferry::fill(commands, outputs_[k % s_.ring], 0, s_.output_bytes, 0xC0FFEE00u + k));
          return commands;
        },
        settings);
    if (!timing.ok()) return timing.status().with_context("calibrating the fill");
    return timing->lists.median_seconds / settings.commands;
  }

  // Each component of a step alone: the compute, then the copy (one untimed step, then the
  // steps back to back on their queue), then the host work.
  Status measure_components(Case& c) {
    const std::uint32_t run = ++runs_;
    TimelinePoint last;
    auto wait_last = [&] { return last.wait(kWaitTimeout); };
    auto back_to_back = [&](const char* what,
                            const std::function<Status(std::uint64_t)>& step) -> Result<double> {
      Result<Timing> timing = repeat_steps(exactly(1, s_.steps), step, wait_last, wait_last);
      if (!timing.ok()) return timing.status().with_context(what);
      return timing->window_per_rep();
    };
    FERRY_ASSIGN_OR_RETURN(
        c.compute_seconds, back_to_back("compute alone", [&](std::uint64_t step) -> Status {
          FERRY_ASSIGN_OR_RETURN(CommandList commands, record_compute(step, run, c.fills_used));
          FERRY_ASSIGN_OR_RETURN(last, compute_.submit(std::move(commands)));
          return ok_status();
        }));
    // The output in chunks into leases of the pipeline's pool, as the pipeline downloads it;
    // each lease goes back to the pool once its copy has completed.
    FERRY_ASSIGN_OR_RETURN(
        c.copy_seconds, back_to_back("copy alone", [&](std::uint64_t step) -> Status {
          for (const Chunk& chunk : chunks_) {
            FERRY_ASSIGN_OR_RETURN(Lease lease, pool_.acquire(chunk.size, kWaitTimeout));
            CommandList commands;
            FERRY_RETURN_IF_ERROR(
                commands.copy(outputs_[step % s_.ring], chunk.offset, lease, 0, chunk.size));
            FERRY_ASSIGN_OR_RETURN(last, download_.submit(std::move(commands)));
          }
          return ok_status();
        }));
    // The consumer on every chunk of the steps, from pinned memory, as host_step() runs it.
    FERRY_ASSIGN_OR_RETURN(Lease lease, step_pool_.acquire(s_.output_bytes, kWaitTimeout));
    FERRY_ASSIGN_OR_RETURN(CommandList fill, record_compute(0, run, 1));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint filled, compute_.submit(std::move(fill)));
    FERRY_RETURN_IF_ERROR(copy_and_wait(download_, outputs_[0], lease, s_.output_bytes, filled));
    const std::uint32_t pattern = step_pattern(run, 0);
    FERRY_RETURN_IF_ERROR(host_step(lease.data(), 0, pattern, c.host_ms, "host alone"));
    FERRY_ASSIGN_OR_RETURN(const double host_seconds, wall_time([&] {
      return for_each_chunk(s_.steps * chunks_.size(), [&](std::size_t i) {
        const Chunk& chunk = chunks_[i % chunks_.size()];
        return consume(lease.data().subspan(chunk.offset, chunk.size), chunk.offset,
                       s_.output_bytes, pattern, s_.full_check, c.host_ms, "host alone",
                       i / chunks_.size());
      });
    }));
    c.host_seconds = host_seconds / s_.steps;
    lease.release();
    return device_.wait_idle(kWaitTimeout);
  }

  // Warm-up steps (checked in full), then the timed steps.
  Status run_mode(Mode mode, Case& c, int cuda_device_index) {
    Result<Case::ModeResult> result =
        mode == Mode::naive_cuda ? naive_cuda(c, cuda_device_index)
        : mode == Mode::ferry_egress
            ? pipeline({outputs_, s_.output_bytes, c.fills_used, c.host_ms, s_.chunk_bytes,
                        s_.warmup_steps, s_.steps, "ferry-egress"})
            : sequential(c, mode);
    const Status idle = device_.wait_idle(kWaitTimeout);
    FERRY_RETURN_IF_ERROR(result.status().with_context(kModeNames[int(mode)]));
    FERRY_RETURN_IF_ERROR(idle);
    if (result->steps != 0) c.modes[mode] = *result;
    return ok_status();
  }

  // Ingress and egress together, or either alone: per step a batch up and normalized, one fill
  // of an output that waits for its tensor on the device, that output down. Returns steps/s.
  Result<double> run_duplex(Duplex mode) {
    const auto& d = s_.duplex_output;
    const std::uint64_t out_bytes = std::uint64_t{4} * d[0] * d[1] * d[2] * d[3];  // float32
    const NormalizeParams params = imagenet_normalize_params(s_.duplex_input, ElementType::float32);
    FERRY_ASSIGN_OR_RETURN(NormalizeShape shape, resolve_normalize(params));
    std::vector<Buffer> sources;
    std::vector<std::byte> random(shape.input_bytes);
    for (std::uint64_t seed = 0xD0; seed < 0xD3; ++seed) {
      fill_random(random, seed);
      FERRY_ASSIGN_OR_RETURN(sources.emplace_back(), pinned_copy(device_, random));
    }
    FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> outputs,
                           create_buffers(device_, s_.ring, out_bytes, MemoryKind::device));
    IngressPipeline ingress;
    if (mode != Duplex::egress_alone) {
      FERRY_ASSIGN_OR_RETURN(IngressOptions options, normalize_ingress_options(params, 3));
      FERRY_ASSIGN_OR_RETURN(
          ingress, IngressPipeline::create(
                       device_, options,
                       [&sources](std::uint64_t index) -> Result<std::optional<HostBatch>> {
                         return std::optional(HostBatch::pinned(sources[index % 3]));
                       }));
    }
    // One download per step where the pool's slabs allow it.
    const std::uint64_t chunk = std::min(s_.pool_slab_bytes, std::max(out_bytes, s_.chunk_bytes));
    Result<Case::ModeResult> result = pipeline(
        {outputs, out_bytes, 1, 0.0, chunk, s_.duplex_warmup, s_.duplex_steps, "ingress+egress",
         mode == Duplex::egress_alone ? nullptr : &ingress, mode != Duplex::ingress_alone});
    ingress.close();
    const Status idle = device_.wait_idle(kWaitTimeout);
    FERRY_RETURN_IF_ERROR(result.status().with_context(
        std::string("ingress and egress together (") + kDuplexNames[int(mode)] + ")"));
    FERRY_RETURN_IF_ERROR(idle);
    return 1 / result->seconds;
  }

  StagingPoolStats pool_stats() const { return pool_.stats(); }

 private:
  struct Chunk {
    std::uint64_t offset = 0, size = 0;
  };

  // Step `step`'s compute on its output of the ring.
  Result<CommandList> record_compute(std::uint64_t step, std::uint32_t run, std::uint32_t fills) {
    return record_fills(outputs_[step % s_.ring], s_.output_bytes, fills, step_pattern(run, step));
  }
  // work(i) for i in [0, items) on the `workers` threads, each taking the next index when free
  // (as the pipeline's as_completed workers do); stops after the first error, which it returns.
  Status for_each_chunk(std::size_t items, const std::function<Status(std::size_t)>& work) {
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mutex;
    Status first_error;
    threads_.parallel_for(s_.workers, [&](std::size_t, std::size_t) {
      for (std::size_t i = next++; i < items && !failed; i = next++) {
        Status status = work(i);
        if (status.ok()) continue;
        std::lock_guard lock(mutex);
        if (first_error.ok()) first_error = std::move(status);
        failed = true;
      }
    });
    return first_error;
  }
  // The host work of one step, chunk by chunk on the worker threads (as the pipeline's consumer
  // sees it); warm-up steps are checked in full.
  Status host_step(std::span<const std::byte> bytes, std::uint64_t step, std::uint32_t pattern,
                   double host_ms, std::string_view what) {
    const bool full = step < s_.warmup_steps || s_.full_check;
    return for_each_chunk(chunks_.size(), [&](std::size_t i) {
      return consume(bytes.subspan(chunks_[i].offset, chunks_[i].size), chunks_[i].offset,
                     s_.output_bytes, pattern, full, host_ms, what, step);
    });
  }

  // naive: download() into pageable memory; pooled-sequential: one copy into a pinned lease.
  Result<Case::ModeResult> sequential(const Case& c, Mode mode) {
    const std::uint32_t run = ++runs_;
    const TransferOptions transfer{.chunk_bytes = s_.chunk_bytes, .acquire_timeout = kWaitTimeout};
    auto step = [&](std::uint64_t index) -> Status {
      const Buffer& output = outputs_[index % s_.ring];
      FERRY_ASSIGN_OR_RETURN(CommandList commands, record_compute(index, run, c.fills_used));
      FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute_.submit(std::move(commands)));
      FERRY_RETURN_IF_ERROR(done.wait(kWaitTimeout));
      const std::uint32_t pattern = step_pattern(run, index);
      if (mode == Mode::naive) {
        FERRY_RETURN_IF_ERROR(download(download_, pool_, output, 0, pageable_, {}, transfer));
        return host_step(pageable_, index, pattern, c.host_ms, "naive");
      }
      FERRY_ASSIGN_OR_RETURN(Lease lease, step_pool_.acquire(s_.output_bytes, kWaitTimeout));
      FERRY_RETURN_IF_ERROR(copy_and_wait(download_, output, lease, s_.output_bytes));
      return host_step(lease.data(), index, pattern, c.host_ms, "pooled-sequential");
    };
    FERRY_ASSIGN_OR_RETURN(Timing timing, repeat_steps(exactly(s_.warmup_steps, s_.steps), step));
    return Case::ModeResult{.seconds = timing.window_per_rep(), .steps = timing.reps};
  }

  // The same loop with the CUDA runtime alone, its memsets calibrated to the compute's time.
  Result<Case::ModeResult> naive_cuda(Case& c, int cuda_device_index) {
    if (device_.backend() != Backend::cuda) {
      c.unavailable = "not a CUDA device";
      return Case::ModeResult{};
    }
    const CudaNaiveEgress cuda = measure_cuda_naive_egress(
        cuda_device_index, s_.output_bytes, c.compute_seconds * 1e3, s_.warmup_steps, s_.steps,
        [&](std::uint64_t step, std::span<const std::byte> bytes, std::uint32_t pattern) {
          return host_step(bytes, step, pattern, c.host_ms, "naive-cudaMemcpy");
        });
    FERRY_RETURN_IF_ERROR(cuda.host_error);
    c.unavailable = cuda.reason;
    return Case::ModeResult{.seconds = cuda.seconds / static_cast<double>(cuda.steps),
                            .steps = cuda.available ? cuda.steps : 0,
                            .memsets = cuda.memsets};
  }

  // See PipelineRun.
  Result<Case::ModeResult> pipeline(const PipelineRun& p) {
    const std::uint32_t run = ++runs_;
    const std::uint64_t total_steps = std::uint64_t{p.warmup} + p.steps;
    // Per step: chunks consumed, and when the last one was (written by the consumer call that
    // finishes the step, read after the pipeline is closed).
    std::vector<std::atomic<std::uint32_t>> consumed_chunks(total_steps);
    std::vector<Clock::time_point> consumed(total_steps);
    auto consumer = [&](const EgressChunk& chunk) -> Status {
      if (chunk.step >= total_steps)
        return Status(ErrorCode::internal, "unexpected step " + std::to_string(chunk.step));
      Status status = consume(chunk.bytes, chunk.offset, p.bytes, step_pattern(run, chunk.step),
                              chunk.step < p.warmup || s_.full_check, p.host_ms, p.what,
                              chunk.step);
      if (++consumed_chunks[chunk.step] == chunk.count) consumed[chunk.step] = Clock::now();
      return status;
    };
    EgressPipeline egress;
    if (p.egress) {
      FERRY_ASSIGN_OR_RETURN(egress, EgressPipeline::create(
                                         device_,
                                         {.workers = s_.workers,
                                          .max_pending_steps = s_.max_pending_steps,
                                          .order = EgressOrder::as_completed,
                                          .pool = pool_,
                                          .chunk_bytes = p.chunk_bytes,
                                          .push_timeout = kWaitTimeout},
                                         consumer));
    }
    std::vector<TimelinePoint> last_read(p.outputs.size());
    TimelinePoint last_done;
    auto step = [&](std::uint64_t index) -> Status {
      const std::size_t slot = index % p.outputs.size();
      SubmitSync sync;
      std::optional<IngressBatch> batch;
      if (p.ingress != nullptr) {
        FERRY_ASSIGN_OR_RETURN(batch, p.ingress->next(kWaitTimeout));
        if (!batch) return Status(ErrorCode::internal, "the ingress pipeline ended early");
        sync.wait.push_back(batch->ready());
      }
      if (last_read[slot].timeline) sync.wait.push_back(last_read[slot]);
      FERRY_ASSIGN_OR_RETURN(CommandList commands, record_fills(p.outputs[slot], p.bytes, p.fills,
                                                                step_pattern(run, index)));
      FERRY_ASSIGN_OR_RETURN(last_done, compute_.submit(std::move(commands), sync));
      if (batch) FERRY_RETURN_IF_ERROR(batch->release(last_done));
      if (!p.egress) return ok_status();
      FERRY_ASSIGN_OR_RETURN(EgressTicket ticket,
                             egress.push(p.outputs[slot], 0, p.bytes, last_done));
      last_read[slot] = ticket.output_read;
      return ok_status();
    };
    auto drain = [&]() -> Status {
      if (p.egress) FERRY_RETURN_IF_ERROR(egress.drain(kWaitTimeout));
      return last_done.wait(kWaitTimeout);
    };
    Result<Timing> timing = repeat_steps(exactly(p.warmup, p.steps), step, drain, drain);
    // Delivers or drops whatever is left after an error, and joins the workers.
    const Status closed = egress.close(timing.ok() ? EgressClose::drain : EgressClose::cancel);
    FERRY_RETURN_IF_ERROR(timing.status());
    FERRY_RETURN_IF_ERROR(closed);
    // Steady: from the first to the last timed step's end of host work.
    std::sort(consumed.begin() + p.warmup, consumed.end());
    const double steady =
        p.steps < 2 ? kNaN
                    : std::chrono::duration<double>(consumed.back() - consumed[p.warmup]).count() /
                          (p.steps - 1);
    return Case::ModeResult{timing->window_per_rep(), timing->reps, steady};
  }

  Device device_;
  Queue compute_ = device_.queue(QueueKind::compute);
  Queue download_ = device_.queue(QueueKind::download);
  Settings s_;
  HostThreadPool threads_;
  std::vector<Chunk> chunks_;    // of one step's output
  std::vector<Buffer> outputs_;  // the ring of device outputs
  StagingPool pool_;             // host_readback, chunk-sized leases: the pipeline's
  StagingPool step_pool_;        // host_readback, one lease the size of the output
  std::vector<std::byte> pageable_;
  std::uint32_t runs_ = 0;  // a new pattern for each step of each run: stale bytes never pass
};

// The run's settings and cases from the options; an error text when the output is unusable.
std::string plan(const Options& options, Settings& s, std::string& output_label,
                 std::vector<Case>& cases) {
  const bool quick = options.flag("--quick");
  if (options.given("--mib")) {
    s.output_bytes = options.number("--mib") * kMiB;
    output_label = options.text("--mib") + " MiB";
  } else {
    std::uint64_t elements = 1;
    for (std::uint32_t dim : options.dims("--output-shape")) {
      if (elements > (1ull << 40) / dim) return "--output-shape: the output is too large";
      elements *= dim;
    }
    s.output_bytes = elements * 4;
    output_label = options.text("--output-shape") + " float32";
  }
  s.workers = static_cast<std::uint32_t>(options.number("--workers"));
  s.chunk_bytes = options.number("--chunk");
  s.pool_slab_bytes = std::max(quick ? kMiB : 64 * kMiB, s.chunk_bytes);
  // 512 MiB of pinned memory (quick: 4 MiB), and room for two chunks at least.
  s.pool_slabs = static_cast<std::uint32_t>(
      std::max<std::uint64_t>(2, (quick ? 4 : 512) * kMiB / s.pool_slab_bytes));
  s.warmup_steps = quick ? 2 : s.ring + 1;
  s.steps = static_cast<std::uint32_t>(options.number("--steps"));
  s.full_check = options.text("--check") == "full";
  if (quick) {
    s.calibration_time = std::chrono::milliseconds(20);
    s.duplex_input = {2, 16, 24, 3};
    s.duplex_output = {2, 21, 8, 8};
    s.duplex_warmup = 2;
    s.duplex_steps = 6;
  }
  // The settings' compute and host times per step (a tenth of them with --quick).
  const double scale = quick ? 0.1 : 1.0;
  for (const std::string& name : options.list("--settings")) {
    if (std::any_of(cases.begin(), cases.end(),
                    [&](const Case& c) { return c.name == name + "-bound"; }))
      continue;
    Case& c = cases.emplace_back(Case{name + "-bound", (name == "compute" ? 12.0 : 2.0) * scale,
                                      (name == "host" ? 12.0 * s.workers : 2.0) * scale});
    if (options.given("--compute-ms")) c.compute_ms = options.millis("--compute-ms");
    if (options.given("--host-ms")) c.host_ms = options.millis("--host-ms");
    if (options.given("--compute-fills"))
      c.fills = static_cast<std::uint32_t>(options.number("--compute-fills"));
  }
  return {};
}

void add_method(Report& report, const Settings& s, const std::string& output_label,
                double fill_seconds) {
  const std::string workers = std::to_string(s.workers);
  report.add_method(
      "per step, a " + output_label + " output (" + format_bytes(s.output_bytes) +
          ") written by fills on the compute queue (one fill " +
          format_value(fill_seconds * 1e3, Unit::ms) + " ms), the last with the step's own "
          "pattern; a consumer checks each chunk (" +
          (s.full_check ? "full: every word" : "sampled: a word every 4 KiB") +
          "), then busy-waits for its share of host-ms; " + format_bytes(s.chunk_bytes) +
          " chunks; " + workers + " host threads (as_completed workers); ring of " +
          std::to_string(s.ring) +
          " outputs; readback pool " + std::to_string(s.pool_slabs) + " x " +
          format_bytes(s.pool_slab_bytes) + "; at most " + std::to_string(s.max_pending_steps) +
          " steps pending; per mode " + std::to_string(s.warmup_steps) +
          " warm-up steps (checked in full), then " + std::to_string(s.steps) +
          " timed, first submission to last host work",
      {{"output", output_label}, {"output_bytes", s.output_bytes}, {"chunk_bytes", s.chunk_bytes},
       {"workers", std::uint64_t{s.workers}}, {"ring", std::uint64_t{s.ring}},
       {"max_pending_steps", std::uint64_t{s.max_pending_steps}},
       {"pool_slab_bytes", s.pool_slab_bytes}, {"pool_slabs", std::uint64_t{s.pool_slabs}},
       {"warmup_steps", std::uint64_t{s.warmup_steps}}, {"steps", std::uint64_t{s.steps}},
       {"check", std::string(s.full_check ? "full" : "sampled")}, {"fill_ms", fill_seconds * 1e3},
       {"duplex_warmup_steps", std::uint64_t{s.duplex_warmup}},
       {"duplex_steps", std::uint64_t{s.duplex_steps}}});
}

// A setting's two sections, each printed as soon as it is measured: each component alone, then
// the three ways against the bound that the slowest component sets. The first setting's carry
// the notes that explain them.
void add_components_section(Bench& bench, const Settings& s, const Case& c, bool first) {
  Report& report = bench.report;
  const std::string workers = std::to_string(s.workers);
  Section& parts = report.add_section(
      c.name + ": each component alone (ms per step, back to back over " +
          std::to_string(s.steps) + " steps)",
      "components_" + c.name);
  parts.fields = {
      {"compute", "compute_ms", c.compute_seconds * 1e3, Unit::ms},
      {"", "compute_ms_requested", c.fills ? Value() : Value(c.compute_ms), Unit::number, true},
      {"", "fills", std::uint64_t{c.fills_used}, Unit::count, true},
      {"copy", "copy_ms", c.copy_seconds * 1e3, Unit::ms},
      {"copy rate", "copy_gbps", static_cast<double>(s.output_bytes) / c.copy_seconds / 1e9,
       Unit::gbps},
      {"host", "host_ms", c.host_seconds * 1e3, Unit::ms},
      {"", "host_ms_cpu", c.host_ms, Unit::number, true},
      {"bound (by " + c.bound_by() + ")", "bound_ms", c.bound() * 1e3, Unit::ms},
      {"", "bound_by", c.bound_by(), Unit::text, true}};
  if (first) {
    parts.notes = {
        "compute: " + std::to_string(c.fills_used) + " fills on the compute queue; copy: the "
        "output in chunks into leases of the readback pool on the download queue; host: the "
        "consumer on every chunk, " + workers + " threads each taking the next chunk when free "
        "(about host-ms / " + workers + " when the checks cost less than the busy wait); "
        "bound = max(compute, copy, host)"};
  }
  bench.publish();
}

void add_modes_section(Bench& bench, const Settings& s, const Case& c, bool first) {
  Report& report = bench.report;
  Section& section = report.add_section(
      c.name + ": the three ways (ms per step over " + std::to_string(s.steps) + " timed steps)",
      "modes_" + c.name);
  const bool cuda = c.modes.contains(Mode::naive_cuda);
  section.columns = {{"mode", "mode"}, {"ms/step", "ms_per_step", Unit::ms},
                     {"GB/s", "gbps", Unit::gbps}, {"x naive", "over_naive", Unit::ratio},
                     {"x cudaMemcpy", "over_naive_cuda", Unit::ratio, !cuda},
                     {"x pooled", "over_pooled", Unit::ratio},
                     {"bound/ms", "bound_over_measured", Unit::percent},
                     {"steady", "steady_bound_over_measured", Unit::percent},
                     {"steps", "steps", Unit::count, true},
                     {"memsets", "memsets_per_step", Unit::count, true}};
  const double naive = c.mode(Mode::naive).seconds, naive_cuda = c.mode(Mode::naive_cuda).seconds;
  for (const auto& [mode, m] : c.modes) {
    section.add_row(
        {kModeNames[int(mode)], m.seconds * 1e3,
         static_cast<double>(s.output_bytes) / m.seconds / 1e9, naive / m.seconds,
         naive_cuda / m.seconds, c.mode(Mode::pooled).seconds / m.seconds, c.bound() / m.seconds,
         mode == Mode::ferry_egress ? Value(c.bound() / m.steady_seconds) : Value(), m.steps,
         mode == Mode::naive_cuda ? Value(std::uint64_t{m.memsets}) : Value()});
  }
  if (first) {
    section.notes = {
        "x naive etc.: the speed-up over that mode; bound/ms: the bound over the measured ms per "
        "step; steady: the same from the first to the last timed step's end of host work, "
        "without the pipeline's fill and drain"};
  }
  if (first && !c.unavailable.empty())  // the same reason for every setting
    section.notes.push_back("naive-cudaMemcpy: not measured: " + c.unavailable);
  const Case::ModeResult ferry = c.mode(Mode::ferry_egress);
  report.summary.emplace_back(
      "egress " + c.name,
      "bound/ferry-egress " + format_value(c.bound() / ferry.seconds, Unit::percent) +
          " (steady " + format_value(c.bound() / ferry.steady_seconds, Unit::percent) + "; " +
          format_value(ferry.seconds * 1e3, Unit::ms) + " vs " +
          format_value(c.bound() * 1e3, Unit::ms) + " ms, bound by " + c.bound_by() +
          "); ferry-egress/naive " + ratio_text(naive / ferry.seconds) +
          (cuda ? ", /naive-cudaMemcpy " + ratio_text(naive_cuda / ferry.seconds) : ""));
  bench.publish();
}

// After the settings: ingress and egress together, and what the readback pool did.
void add_duplex_and_pool(Report& report, const Settings& s, const std::vector<double>& duplex,
                         const StagingPoolStats& pool) {
  if (!duplex.empty()) {
    Section& both = report.add_section(
        "Ingress and egress together (per step: a " + to_string(s.duplex_input) +
            " uint8 batch up and normalized, one fill of a " + to_string(s.duplex_output) +
            " float32 output, that output down; " + std::to_string(s.duplex_steps) +
            " timed steps after " + std::to_string(s.duplex_warmup) + ")",
        "duplex");
    both.columns = {{"run", "run"}, {"steps/s", "steps_per_second", Unit::number},
                    {"ms/step", "ms_per_step", Unit::ms}};
    for (std::size_t i = 0; i < duplex.size(); ++i)
      both.add_row({kDuplexNames[i], duplex[i], 1e3 / duplex[i]});
    const double ratio = duplex[2] / std::min(duplex[0], duplex[1]);
    both.fields = {{"both at once / the slower direction alone (steps/s)", "both_over_slower",
                    ratio, Unit::ratio}};
    report.summary.emplace_back("ingress+egress",
                                "both/slower direction alone " + ratio_text(ratio));
  }

  Section& readback = report.add_section("Readback pool", "readback_pool");
  readback.fields = {{"capacity", "capacity_bytes", pool.capacity_bytes, Unit::bytes},
                     {"acquires", "acquires", pool.acquires, Unit::count},
                     {"acquires that waited for room", "waits", pool.waits, Unit::count}};
  readback.notes = {"a wait is push() blocked on a full pool; every slab is touched once before "
                    "timing, so the pool's high water is all of it"};
}

Status run_egress(Bench& bench, Settings s, const std::string& output_label,
                  std::vector<Case>& cases) {
  // On a CPU implementation the 400 steps of ingress and egress together take a minute or more
  // (5-12 steps/s on lavapipe) and say nothing about a GPU: a tenth of them there.
  if (bench.device.info().is_cpu && !bench.options.flag("--quick")) {
    s.duplex_warmup = 4;
    s.duplex_steps = 40;
  }
  const std::uint64_t device_need = s.ring * s.output_bytes;
  const std::uint64_t host_need =
      2 * s.output_bytes + std::uint64_t{s.pool_slabs} * s.pool_slab_bytes;
  if (std::string why = memory_shortfall(bench.device.info(), device_need, host_need); !why.empty())
    return Status(ErrorCode::resource_exhausted, "the " + output_label + " output " + why);
  EgressBench egress(bench.device, s);
  FERRY_RETURN_IF_ERROR(egress.create());
  FERRY_RETURN_IF_ERROR(bench.progress("calibrating the fill"));
  FERRY_ASSIGN_OR_RETURN(const double fill_seconds, egress.calibrate_fill());
  add_method(bench.report, s, output_label, fill_seconds);
  bench.publish();
  for (Case& c : cases) {
    const bool first = &c == &cases.front();
    c.fills_used = c.fills.value_or(static_cast<std::uint32_t>(
        std::clamp(std::lround(c.compute_ms / 1e3 / fill_seconds), 1L, 1'000'000L)));
    FERRY_RETURN_IF_ERROR(bench.progress("measuring " + c.name + " components"));
    FERRY_RETURN_IF_ERROR(egress.measure_components(c).with_context(c.name));
    add_components_section(bench, s, c, first);
    for (Mode mode : kModes) {
      FERRY_RETURN_IF_ERROR(bench.progress("measuring " + c.name + " " + kModeNames[int(mode)]));
      FERRY_RETURN_IF_ERROR(egress.run_mode(mode, c, bench.device_index()).with_context(c.name));
    }
    add_modes_section(bench, s, c, first);
  }
  std::vector<double> duplex;  // steps/s of each Duplex mode
  for (Duplex mode : {Duplex::ingress_alone, Duplex::egress_alone, Duplex::both}) {
    if (bench.options.flag("--no-duplex")) break;
    FERRY_RETURN_IF_ERROR(
        bench.progress(std::string("measuring ingress+egress, ") + kDuplexNames[int(mode)]));
    FERRY_ASSIGN_OR_RETURN(duplex.emplace_back(), egress.run_duplex(mode));
  }
  add_duplex_and_pool(bench.report, s, duplex, egress.pool_stats());
  return ok_status();
}

int run(const Options& options, const std::string& command_line) {
  Settings s;
  std::string output_label;
  std::vector<Case> cases;
  if (std::string error = plan(options, s, output_label, cases); !error.empty())
    return usage_error(error);
  return run_bench(options, command_line, "ferry bench egress",
                   {QueueKind::compute, QueueKind::download}, false,
                   [&](Bench& bench) { return run_egress(bench, s, output_label, cases); });
}

}  // namespace

const Command kBenchEgress = {
    .name = "bench egress",
    .summary =
        "Device results to host work, step after step: compute, download and host work in "
        "sequence against ferry's EgressPipeline overlapping them, held against the slowest "
        "component alone; ingress and egress together against each direction alone.",
    .about =
        "Each step fills a float32 output on the compute queue (as many fills as take\n"
        "--compute-ms); a host consumer checks it and busy-waits for its share of --host-ms.\n"
        "Per setting (compute, host CPU ms per step: copy 2, 2; compute 12, 2; host 2, 12 x\n"
        "workers), each component alone (bound: the slowest), then:\n"
        "  naive              compute, wait, ferry::download into pageable memory, host work\n"
        "  naive-cudaMemcpy   (CUDA) the same with memsets and a synchronous cudaMemcpy\n"
        "  pooled-sequential  compute, wait, one copy into a pinned lease, wait, host work\n"
        "  ferry-egress       EgressPipeline, a ring of 3 outputs: compute i+1, download i and\n"
        "                     host work on i-1 overlap\n"
        "Then ingress and egress together (normalized uint8 batches up, each feeding a fill of\n"
        "an output that goes down) against each direction alone. Warm-up steps are checked in\n"
        "full, timed steps as --check says (exit 1 on wrong bytes). --quick: a tenth of the\n"
        "times, a small pool and small batches.\n",
    .options = kOptions,
    .run = run,
};

}  // namespace ferry::cli
