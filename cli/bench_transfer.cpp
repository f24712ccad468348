// `ferry bench transfer`: host<->device bandwidth of the plain API path, the staging pool and
// pageable memory, in one run so that the ratios between them are measured like for like.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <tuple>

#include "baselines/cuda_memcpy.hpp"
#include "bench_common.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kOptions[] = {
    {.name = "--sizes", .kind = OptionKind::sizes, .metavar = "LIST",
     .help = "comma-separated sizes (K/M/G suffixes); by default a CPU device stops at 256M. "
             "Sizes that do not fit in memory are skipped and listed",
     .fallback = "64K,1M,16M,256M,1G", .quick = "64K,1M,16M,64M"},
    {.name = "--min-time-ms", .kind = OptionKind::count, .metavar = "N",
     .help = "time spent on each measurement after its warm-up", .fallback = "200", .quick = "50",
     .max = 3'600'000},
    {.name = "--chunk", .kind = OptionKind::size, .metavar = "SIZE",
     .help = "chunk size of the pool and pageable paths", .fallback = "16M", .min = 4096,
     .max = 1ull << 30},
    {.name = "--in-flight", .kind = OptionKind::count, .metavar = "N",
     .help = "pool chunks in flight per direction", .fallback = "4", .min = 1, .max = 64},
    {.name = "--origin-size", .kind = OptionKind::size, .metavar = "SIZE",
     .help = "size of the host-memory origin table's direct copies", .fallback = "16M",
     .quick = "1M", .max = 1ull << 30},
    {.name = "--no-origins", .kind = OptionKind::flag, .help = "no host-memory origin table"},
};

// ferry's paths, then the CUDA runtime's copies (the baselines on CUDA devices).
enum class Mode : std::uint8_t {
  direct, pool, pageable_naive, pageable, cuda_async, cuda_pageable
};
enum class Dir : std::uint8_t { h2d, d2h, both };
constexpr const char* kModeNames[] = {"direct",   "pool",           "pageable-naive",
                                      "pageable", "cudaMemcpyAsync", "cudaMemcpy pageable"};
constexpr const char* kDirNames[] = {"H2D", "D2H", "both"};
constexpr Mode kModes[] = {Mode::direct, Mode::pool, Mode::pageable_naive, Mode::pageable};
constexpr Dir kOneWay[] = {Dir::h2d, Dir::d2h};
constexpr std::pair<Mode, Dir> kCases[] = {  // in the order measured
    {Mode::direct, Dir::h2d},   {Mode::direct, Dir::d2h},         {Mode::pool, Dir::h2d},
    {Mode::pool, Dir::d2h},     {Mode::pageable_naive, Dir::h2d}, {Mode::pageable_naive, Dir::d2h},
    {Mode::pageable, Dir::h2d}, {Mode::pageable, Dir::d2h},       {Mode::pool, Dir::both}};

// Both directions at once move twice the size.
double gbps(std::uint64_t size, Dir dir, double seconds) {
  return static_cast<double>(dir == Dir::both ? 2 * size : size) / seconds / 1e9;
}

// One direction of the pool path: chunks of pinned lease memory, `window` in flight. H2D drops
// each lease right after submitting (the pool takes it back once the copy is done); D2H keeps it
// until the copy has landed and its bytes were consumed. Timed runs send whatever the leases hold
// (the data is "already pinned" by assumption) and drop what they receive.
struct PoolStream {
  const Queue& queue;
  const StagingPool& pool;
  bool upload;
  const Buffer& device_buffer;
  std::uint64_t chunk_bytes;
  unsigned window;
  std::byte* host;  // verifying: the bytes to send, or where received bytes go; else null
  std::uint64_t next = 0;  // offset of the next chunk
  struct Chunk {
    Lease lease;  // empty for H2D
    TimelinePoint done;
    std::uint64_t offset = 0;
  };
  std::deque<Chunk> in_flight = {};

  bool all_submitted() const { return next >= device_buffer.size(); }
  Status submit_next() {
    if (all_submitted()) return ok_status();
    if (in_flight.size() >= window) FERRY_RETURN_IF_ERROR(retire_oldest());
    const std::uint64_t bytes = std::min(chunk_bytes, device_buffer.size() - next);
    FERRY_ASSIGN_OR_RETURN(Lease lease, pool.acquire(bytes, kWaitTimeout));
    CommandList commands;
    if (upload && host != nullptr) std::memcpy(lease.data().data(), host + next, bytes);
    FERRY_RETURN_IF_ERROR(upload ? commands.copy(lease, 0, device_buffer, next, bytes)
                                 : commands.copy(device_buffer, next, lease, 0, bytes));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, queue.submit(std::move(commands)));
    if (upload) lease.release();
    in_flight.push_back({std::move(lease), std::move(done), next});
    next += bytes;
    return ok_status();
  }
  Status retire_oldest() {
    Chunk& chunk = in_flight.front();
    FERRY_RETURN_IF_ERROR(chunk.done.wait(kWaitTimeout));
    if (host != nullptr && chunk.lease)
      std::memcpy(host + chunk.offset, chunk.lease.data().data(), chunk.lease.size());
    in_flight.pop_front();
    return ok_status();
  }
  Status finish() {
    while (!in_flight.empty()) FERRY_RETURN_IF_ERROR(retire_oldest());
    return ok_status();
  }
};

// Queues and staging pools of one device, and the buffers of the size being measured.
struct Transfers {
  Device device;
  std::uint64_t chunk_bytes;
  unsigned in_flight;
  Queue compute = device.queue(QueueKind::compute), up = device.queue(QueueKind::upload),
        down = device.queue(QueueKind::download);
  StagingPool upload_pool = {}, readback_pool = {};
  std::uint64_t size = 0;
  Buffer device_a = {};                 // H2D target; D2H source
  Buffer device_b = {};                 // D2H source while `both` uploads into device_a
  Buffer pinned_source = {};            // host_upload: source of the direct and naive paths
  Buffer pinned_target = {};            // host_readback: their target
  std::vector<std::byte> pattern = {};  // random bytes: the pageable source
  std::vector<std::byte> pageable = {};

  // Room for the whole window plus one chunk (a lease comes back only once the pool sees its
  // copy complete).
  Status create_pools() {
    const std::uint64_t chunk = round_up(chunk_bytes, kStagingAlignment);
    const std::uint64_t slab = std::max<std::uint64_t>(64 * kMiB, chunk), per_slab = slab / chunk;
    const auto slabs = static_cast<std::uint32_t>((in_flight + 1 + per_slab - 1) / per_slab);
    FERRY_ASSIGN_OR_RETURN(upload_pool,
                           reserved_pool(device, MemoryKind::host_upload, slab, slabs));
    FERRY_ASSIGN_OR_RETURN(readback_pool,
                           reserved_pool(device, MemoryKind::host_readback, slab, slabs));
    return ok_status();
  }

  // Buffers for `bytes` (those of the previous size go first), the random pattern (`seed`) in
  // the pinned source and in both device buffers.
  Status prepare(std::uint64_t bytes, std::uint64_t seed) {
    for (Buffer* buffer : {&device_a, &device_b, &pinned_source, &pinned_target}) buffer->release();
    pattern = {};
    pageable = {};
    FERRY_RETURN_IF_ERROR(device.wait_idle(kWaitTimeout));
    size = bytes;
    FERRY_ASSIGN_OR_RETURN(device_a, device.create_buffer(size, MemoryKind::device));
    FERRY_ASSIGN_OR_RETURN(device_b, device.create_buffer(size, MemoryKind::device));
    FERRY_ASSIGN_OR_RETURN(pinned_target, device.create_buffer(size, MemoryKind::host_readback));
    pattern.resize(size);
    pageable.resize(size);
    fill_random(pattern, seed);
    FERRY_ASSIGN_OR_RETURN(pinned_source, pinned_copy(device, pattern));
    FERRY_RETURN_IF_ERROR(copy_and_wait(up, pinned_source, device_a, size));
    return copy_and_wait(up, pinned_source, device_b, size);
  }

  // One transfer of the current size; `both` exists for the pool mode only.
  Status run(Mode mode, Dir dir, bool verifying = false) {
    const bool h2d = dir == Dir::h2d;
    const TransferOptions transfer{.chunk_bytes = chunk_bytes, .acquire_timeout = kWaitTimeout};
    if (mode == Mode::direct) {
      return h2d ? copy_and_wait(up, pinned_source, device_a, size)
                 : copy_and_wait(down, device_a, pinned_target, size);
    }
    if (mode == Mode::pageable && h2d) {
      FERRY_ASSIGN_OR_RETURN(TimelinePoint done,
                             upload(up, upload_pool, pattern, device_a, 0, {}, transfer));
      return done.wait(kWaitTimeout);
    }
    if (mode == Mode::pageable)
      return download(down, readback_pool, device_a, 0, pageable, {}, transfer);
    if (mode == Mode::pageable_naive && h2d) {
      FERRY_ASSIGN_OR_RETURN(std::span<std::byte> staging, pinned_source.host_span());
      std::memcpy(staging.data(), pattern.data(), size);
      return copy_and_wait(up, pinned_source, device_a, size);
    }
    if (mode == Mode::pageable_naive) {
      FERRY_RETURN_IF_ERROR(copy_and_wait(down, device_a, pinned_target, size));
      FERRY_ASSIGN_OR_RETURN(std::span<std::byte> staging, pinned_target.host_span());
      std::memcpy(pageable.data(), staging.data(), size);
      return ok_status();
    }
    // The pool; in `both`, D2H reads device_b so that it never races the upload into device_a.
    PoolStream h2d_stream{up, upload_pool, true, device_a, chunk_bytes, in_flight,
                          verifying ? pattern.data() : nullptr};
    PoolStream d2h_stream{down, readback_pool, false, dir == Dir::both ? device_b : device_a,
                          chunk_bytes, in_flight, verifying ? pageable.data() : nullptr};
    const bool uploads = dir != Dir::d2h, downloads = dir != Dir::h2d;
    // Interleaved so that in `both` each queue always has chunks waiting.
    while ((uploads && !h2d_stream.all_submitted()) || (downloads && !d2h_stream.all_submitted())) {
      if (uploads) FERRY_RETURN_IF_ERROR(h2d_stream.submit_next());
      if (downloads) FERRY_RETURN_IF_ERROR(d2h_stream.submit_next());
    }
    if (uploads) FERRY_RETURN_IF_ERROR(h2d_stream.finish());
    return downloads ? d2h_stream.finish() : ok_status();
  }

  // One transfer whose result is compared with the pattern. Targets start cleared so that stale
  // data from an earlier run cannot pass for a good copy.
  Status verify(Mode mode, Dir dir, const std::string& what) {
    FERRY_ASSIGN_OR_RETURN(std::span<std::byte> readback, pinned_target.host_span());
    if (dir != Dir::d2h) {
      CommandList clear;
      FERRY_RETURN_IF_ERROR(ferry::fill(clear, device_a, 0, size, 0));
      FERRY_ASSIGN_OR_RETURN(TimelinePoint cleared, compute.submit(std::move(clear)));
      FERRY_RETURN_IF_ERROR(cleared.wait(kWaitTimeout));
    } else {
      FERRY_RETURN_IF_ERROR(copy_and_wait(up, pinned_source, device_a, size));
    }
    std::memset(readback.data(), 0, size);
    std::memset(pageable.data(), 0, size);
    FERRY_RETURN_IF_ERROR(run(mode, dir, true).with_context(what));
    if (dir != Dir::h2d) {
      FERRY_RETURN_IF_ERROR(compare_bytes(mode == Mode::direct ? readback : pageable, pattern,
                                          what + " (host side)"));
    }
    if (dir == Dir::d2h) return ok_status();
    std::memset(readback.data(), 0, size);
    FERRY_RETURN_IF_ERROR(copy_and_wait(down, device_a, pinned_target, size));
    return compare_bytes(readback, pattern, what + " (device side, read back directly)");
  }
};

// The median GB/s of every case (the CUDA baselines' included), and what is measured beside.
struct Results {
  std::map<std::tuple<std::uint64_t, Mode, Dir>, double> median_gbps;
  Section* all = nullptr;  // the report's JSON-only section of every timing
  bool cuda = false;       // a CUDA device

  double gbps(std::uint64_t size, Mode mode, Dir dir) const {
    const auto found = median_gbps.find({size, mode, dir});
    return found == median_gbps.end() ? kNaN : found->second;
  }
  // Both directions at once over the faster single direction of the same (pool) path.
  double both_ratio(std::uint64_t size) const {
    return gbps(size, Mode::pool, Dir::both) /
           std::max(gbps(size, Mode::pool, Dir::h2d), gbps(size, Mode::pool, Dir::d2h));
  }
  // "H2D / D2H: pool/<a> 1.01x / 0.98x, pageable/<b> ...".
  std::string ratios(std::uint64_t size, Mode a, Mode b, const std::string& a_name,
                     const std::string& b_name) const {
    auto over = [&](Mode mode, Mode base) {
      return ratio_text(gbps(size, mode, Dir::h2d) / gbps(size, base, Dir::h2d)) + " / " +
             ratio_text(gbps(size, mode, Dir::d2h) / gbps(size, base, Dir::d2h));
    };
    return "H2D / D2H: pool/" + a_name + " " + over(Mode::pool, a) + ", pageable/" + b_name + " " +
           over(Mode::pageable, b);
  }
};

// CPU time per small pooled transfer as an application issues it (lease, record, submit):
// - per call: each acquire + record + submit timed alone, in bursts of kOverheadBurst with the
//   queue drained between bursts (untimed), so that the GPU's own rate for small copies never
//   holds the caller back: the CPU cost itself (median and mean); and acquire + record alone,
//   the list dropped unsubmitted.
// - sustained: 2000 back to back, the window's mean: what a loop that never waits gets; once the
//   driver's queue fills, the GPU's time per small copy bounds it, not the CPU.
// - batched: kOverheadBatch copies (a lease each, distinct targets) in one CommandList and one
//   submission, per copy: what recording small transfers together saves.
struct SubmitOverhead {
  double record_median_us = 0;  // acquire + record only (the list dropped, never submitted)
  double per_call_median_us = 0;
  double per_call_mean_us = 0;
  double sustained_us = 0;
  double batched_median_us = 0;
};
constexpr std::uint64_t kOverheadBytes = 4096;
constexpr std::uint64_t kOverheadBurst = 32;
constexpr std::uint32_t kOverheadBatch = 16;

Result<SubmitOverhead> measure_submit_overhead(const Device& device) {
  FERRY_ASSIGN_OR_RETURN(StagingPool pool,
                         reserved_pool(device, MemoryKind::host_upload, 16 * kMiB, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> targets,
                         create_buffers(device, kOverheadBatch, kOverheadBytes, MemoryKind::device));
  const Queue queue = device.queue(QueueKind::upload);
  auto record_one = [&](CommandList& commands, const Buffer& target) -> Status {
    FERRY_ASSIGN_OR_RETURN(Lease lease, pool.acquire(kOverheadBytes));
    return commands.copy(lease, 0, target, 0, kOverheadBytes);
  };
  auto submit_one = [&]() -> Status {
    CommandList commands;
    FERRY_RETURN_IF_ERROR(record_one(commands, targets[0]));
    return queue.submit(std::move(commands)).status();
  };
  auto idle = [&] { return queue.wait_idle(); };
  SubmitOverhead result;

  double sum_seconds = 0;
  std::uint64_t timed_calls = 0;
  const Repetition per_call = [&](std::uint64_t i) -> Result<double> {
    if (i % kOverheadBurst == 0) FERRY_RETURN_IF_ERROR(idle());
    FERRY_ASSIGN_OR_RETURN(double seconds, wall_time(submit_one));
    sum_seconds += seconds;
    ++timed_calls;
    return seconds;
  };
  FERRY_ASSIGN_OR_RETURN(Timing calls, repeat(exactly(kOverheadBurst, 2048), per_call, [&] {
                           sum_seconds = 0;
                           timed_calls = 0;
                           return idle();
                         }));
  result.per_call_median_us = calls.median_seconds * 1e6;

  const Repetition record_only = [&](std::uint64_t) -> Result<double> {
    return wall_time([&]() -> Status {
      CommandList commands;
      return record_one(commands, targets[0]);
    });
  };
  FERRY_ASSIGN_OR_RETURN(Timing records, repeat(exactly(kOverheadBurst, 2048), record_only));
  result.record_median_us = records.median_seconds * 1e6;
  result.per_call_mean_us = sum_seconds / static_cast<double>(timed_calls) * 1e6;

  FERRY_ASSIGN_OR_RETURN(Timing sustained, repeat_steps(exactly(200, 2000),
                                                        [&](std::uint64_t) { return submit_one(); },
                                                        idle));
  FERRY_RETURN_IF_ERROR(idle());
  result.sustained_us = sustained.window_per_rep() * 1e6;

  const Repetition batch = [&](std::uint64_t i) -> Result<double> {
    if (i % (kOverheadBurst / 4) == 0) FERRY_RETURN_IF_ERROR(idle());
    return wall_time([&]() -> Status {
      CommandList commands;
      for (const Buffer& target : targets) FERRY_RETURN_IF_ERROR(record_one(commands, target));
      return queue.submit(std::move(commands)).status();
    });
  };
  FERRY_ASSIGN_OR_RETURN(Timing batches, repeat(exactly(8, 256), batch, idle));
  FERRY_RETURN_IF_ERROR(idle());
  result.batched_median_us = batches.median_seconds / kOverheadBatch * 1e6;
  return result;
}

// Where a direct copy's host memory comes from: the backend's own pinned allocation, ordinary
// pages registered with the device, or pages cudaHostAlloc pinned registered with a device of
// another backend. Vulkan's copies trail CUDA's on the same GPU (docs/PERFORMANCE.md); copying
// the same pages through both backends tells the memory apart from the backend that moves it.
enum class HostOrigin : std::uint8_t { own, registered, cuda_pinned };
constexpr const char* kOriginNames[] = {"own (create_buffer)", "anonymous pages, registered",
                                        "cudaHostAlloc pages, registered"};
constexpr std::uint64_t kOriginPage = 4096;

struct FreeHostPages {
  void operator()(std::byte* pages) const { std::free(pages); }
};

// A source and a target of one origin, the size of the table.
struct OriginBuffers {
  std::unique_ptr<std::byte, FreeHostPages> pages;  // registered: both buffers' memory
  CudaPinnedHostMemory cuda_source, cuda_target;    // cuda_pinned
  Buffer source, target;
};

// The buffers of `origin`, or why the origin cannot be measured here (an empty Result value
// with the reason in `why`).
Result<std::optional<OriginBuffers>> origin_buffers(const Transfers& transfers, HostOrigin origin,
                                                    std::uint64_t size, std::string& why) {
  const Device& device = transfers.device;
  OriginBuffers out;
  if (origin == HostOrigin::own) {
    FERRY_ASSIGN_OR_RETURN(out.source, device.create_buffer(size, MemoryKind::host_upload));
    FERRY_ASSIGN_OR_RETURN(out.target, device.create_buffer(size, MemoryKind::host_readback));
    return std::optional<OriginBuffers>(std::move(out));
  }
  std::span<std::byte> source_memory, target_memory;
  if (origin == HostOrigin::registered) {
    const std::uint64_t rounded = round_up(size, kOriginPage);
    out.pages.reset(static_cast<std::byte*>(std::aligned_alloc(kOriginPage, 2 * rounded)));
    if (!out.pages) return Status(ErrorCode::out_of_memory, "aligned_alloc of the origin pages");
    std::memset(out.pages.get(), 0, 2 * rounded);  // touched: no first-touch faults timed
    source_memory = {out.pages.get(), static_cast<std::size_t>(size)};
    target_memory = {out.pages.get() + rounded, static_cast<std::size_t>(size)};
  } else {
    if (device.backend() == Backend::cuda) {
      why = "the CUDA backend's own memory is cudaHostAlloc's";
      return std::optional<OriginBuffers>();
    }
    Result<CudaPinnedHostMemory> source = CudaPinnedHostMemory::allocate(size);
    Result<CudaPinnedHostMemory> target =
        source.ok() ? CudaPinnedHostMemory::allocate(size) : source.status();
    if (!target.ok()) {
      why = target.status().message();
      return std::optional<OriginBuffers>();
    }
    out.cuda_source = std::move(*source);
    out.cuda_target = std::move(*target);
    source_memory = out.cuda_source.span();
    target_memory = out.cuda_target.span();
  }
  Result<Buffer> source = device.register_host_memory(source_memory, MemoryKind::host_upload);
  Result<Buffer> target =
      source.ok() ? device.register_host_memory(target_memory, MemoryKind::host_readback)
                  : source.status();
  if (!target.ok()) {
    if (target.status().code() != ErrorCode::unavailable) return target.status();
    why = target.status().message();
    return std::optional<OriginBuffers>();
  }
  out.source = std::move(*source);
  out.target = std::move(*target);
  return std::optional<OriginBuffers>(std::move(out));
}

// Direct copies (one copy of the whole size, waited for) from and to each origin's memory, H2D,
// D2H and both at once (on the upload and download queues), each checked once.
Status measure_origins(Bench& bench, Transfers& transfers, std::uint64_t size) {
  if (!bench.fits({size}, 2 * size, 6 * size)) return ok_status();
  FERRY_RETURN_IF_ERROR(bench.progress("measuring host memory origins"));
  FERRY_RETURN_IF_ERROR(
      transfers.prepare(size, 0x0416).with_context("preparing the origin table"));
  const RepeatSettings settings{.min_time =
                                    std::chrono::milliseconds(bench.number("--min-time-ms"))};
  Section& section = bench.report.add_section(
      "Host memory origin, direct copies of " + format_bytes(size) + " (median GB/s)", "origins");
  section.columns = {{"host memory", "origin"}, {"H2D", "h2d_gbps", Unit::gbps},
                     {"D2H", "d2h_gbps", Unit::gbps}, {"both", "both_gbps", Unit::gbps},
                     {"H2D / own", "h2d_vs_own", Unit::ratio},
                     {"D2H / own", "d2h_vs_own", Unit::ratio}};
  double own_h2d = kNaN, own_d2h = kNaN;
  for (HostOrigin origin : {HostOrigin::own, HostOrigin::registered, HostOrigin::cuda_pinned}) {
    const std::string name = kOriginNames[static_cast<int>(origin)];
    std::string why;
    FERRY_ASSIGN_OR_RETURN(std::optional<OriginBuffers> buffers,
                           origin_buffers(transfers, origin, size, why));
    if (!buffers) {
      section.notes.push_back(name + ": not measured (" + why + ")");
      continue;
    }
    // Checked once: the pattern up from the source, back down into the target.
    FERRY_ASSIGN_OR_RETURN(std::span<std::byte> source, buffers->source.host_span());
    FERRY_ASSIGN_OR_RETURN(std::span<std::byte> target, buffers->target.host_span());
    std::memcpy(source.data(), transfers.pattern.data(), size);
    std::memset(target.data(), 0, size);
    FERRY_RETURN_IF_ERROR(copy_and_wait(transfers.up, buffers->source, transfers.device_a, size));
    FERRY_RETURN_IF_ERROR(
        copy_and_wait(transfers.down, transfers.device_a, buffers->target, size));
    FERRY_RETURN_IF_ERROR(compare_bytes(target, transfers.pattern, name + " round trip"));

    auto both = [&]() -> Status {
      CommandList up, down;
      FERRY_RETURN_IF_ERROR(up.copy(buffers->source, 0, transfers.device_a, 0, size));
      FERRY_RETURN_IF_ERROR(down.copy(transfers.device_b, 0, buffers->target, 0, size));
      FERRY_ASSIGN_OR_RETURN(TimelinePoint uploaded, transfers.up.submit(std::move(up)));
      FERRY_ASSIGN_OR_RETURN(TimelinePoint downloaded, transfers.down.submit(std::move(down)));
      FERRY_RETURN_IF_ERROR(uploaded.wait(kWaitTimeout));
      return downloaded.wait(kWaitTimeout);
    };
    FERRY_ASSIGN_OR_RETURN(Timing h2d, time_each(settings, [&] {
                             return copy_and_wait(transfers.up, buffers->source,
                                                  transfers.device_a, size);
                           }));
    FERRY_ASSIGN_OR_RETURN(Timing d2h, time_each(settings, [&] {
                             return copy_and_wait(transfers.down, transfers.device_a,
                                                  buffers->target, size);
                           }));
    FERRY_ASSIGN_OR_RETURN(Timing both_ways, time_each(settings, both));
    const double h2d_gbps = gbps(size, Dir::h2d, h2d.median_seconds);
    const double d2h_gbps = gbps(size, Dir::d2h, d2h.median_seconds);
    if (origin == HostOrigin::own) {
      own_h2d = h2d_gbps;
      own_d2h = d2h_gbps;
    }
    section.add_row({name, h2d_gbps, d2h_gbps, gbps(size, Dir::both, both_ways.median_seconds),
                     h2d_gbps / own_h2d, d2h_gbps / own_d2h});
  }
  section.notes.push_back(
      "registered: register_host_memory (cudaHostRegister, VK_EXT_external_memory_host); both: "
      "H2D and D2H at once on the upload and download queues, total GB/s");
  bench.publish();
  return ok_status();
}

// The size's ratios, as lines of the summary (subject, text): against ferry's plain paths, and
// against the CUDA runtime's copies where they were measured.
std::vector<std::pair<std::string, std::string>> size_ratios(std::uint64_t size,
                                                             const Results& r) {
  const std::string subject = "transfer " + format_bytes(size);
  std::vector<std::pair<std::string, std::string>> lines = {
      {subject, r.ratios(size, Mode::direct, Mode::pageable_naive, "direct", "naive") +
                    "; both/one-direction " + ratio_text(r.both_ratio(size))}};
  const double cuda_both = r.gbps(size, Mode::cuda_async, Dir::both);
  if (!std::isnan(cuda_both)) {
    lines.emplace_back(
        subject + " vs CUDA",
        r.ratios(size, Mode::cuda_async, Mode::cuda_pageable, "cudaMemcpyAsync", "cudaMemcpy") +
            "; both/CUDA both " + ratio_text(r.gbps(size, Mode::pool, Dir::both) / cuda_both));
  }
  return lines;
}

// One section per size, printed as soon as the size is measured: a row per path with GB/s each
// way and both at once, and up to 1 MiB microseconds per transfer (small copies are bound by
// per-transfer overhead, which reads better as time); the size's ratios under the table.
void add_size_section(Bench& bench, std::uint64_t size, const Results& r,
                      const std::string& no_cuda) {
  const bool small = size <= kMiB;
  Section& section = bench.report.add_section(
      format_bytes(size) + " (median GB/s" + (small ? "; microseconds per transfer)" : ")"),
      "size_" + std::to_string(size));
  section.columns = {{"path", "path"},
                     {"H2D GB/s", "h2d_gbps", Unit::gbps},
                     {"D2H GB/s", "d2h_gbps", Unit::gbps},
                     {"both GB/s", "both_gbps", Unit::gbps},
                     {"H2D us", "h2d_us", Unit::us, !small},
                     {"D2H us", "d2h_us", Unit::us, !small}};
  for (Mode mode : {Mode::direct, Mode::pool, Mode::pageable_naive, Mode::pageable,
                    Mode::cuda_async, Mode::cuda_pageable}) {
    const double h2d = r.gbps(size, mode, Dir::h2d), d2h = r.gbps(size, mode, Dir::d2h);
    if (std::isnan(h2d) && std::isnan(d2h)) continue;  // a CUDA baseline not measured
    const double both = r.gbps(size, mode, Dir::both);
    section.add_row({kModeNames[int(mode)], h2d, d2h, std::isnan(both) ? Value() : Value(both),
                     1e-3 * double(size) / h2d, 1e-3 * double(size) / d2h});
  }
  for (const auto& [subject, text] : size_ratios(size, r)) {
    const bool vs_cuda = subject.ends_with("vs CUDA");
    section.fields.push_back({vs_cuda ? "vs CUDA" : "ratios", vs_cuda ? "vs_cuda" : "ratios", text});
    bench.report.summary.emplace_back(subject, text);
  }
  if (!no_cuda.empty()) section.notes.push_back("no CUDA baseline: " + no_cuda);
  bench.publish();
}

Status measure(Bench& bench, const std::vector<std::uint64_t>& sizes, Transfers& transfers,
               Results& r) {
  const RepeatSettings settings{.min_time =
                                    std::chrono::milliseconds(bench.number("--min-time-ms"))};
  FERRY_RETURN_IF_ERROR(transfers.create_pools());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::uint64_t size = sizes[i];
    FERRY_RETURN_IF_ERROR(bench.progress("measuring " + format_bytes(size) + " (" +
                                         std::to_string(i + 1) + "/" +
                                         std::to_string(sizes.size()) + ")"));
    FERRY_RETURN_IF_ERROR(
        transfers.prepare(size, 0x5eed + i).with_context("preparing " + format_bytes(size)));
    for (const auto& [mode, dir] : kCases) {
      const std::string what = std::string(kModeNames[int(mode)]) + " " + kDirNames[int(dir)];
      const std::string context = what + " " + format_bytes(size);
      Status checked = transfers.verify(mode, dir, what + " of " + std::to_string(size) + " bytes");
      FERRY_RETURN_IF_ERROR(checked.with_context(context));
      Result<Timing> timing =
          time_each(settings, [&, mode = mode, dir = dir] { return transfers.run(mode, dir); });
      if (!timing.ok()) return timing.status().with_context(context);
      r.median_gbps[{size, mode, dir}] = gbps(size, dir, timing->median_seconds);
      r.all->add_row({size, kModeNames[int(mode)], kDirNames[int(dir)], timing->reps,
                     timing->median_seconds, timing->best_seconds, r.gbps(size, mode, dir),
                     gbps(size, dir, timing->best_seconds)});
    }
    std::string no_cuda;
    if (r.cuda) {
      const CudaMemcpyBaseline base = measure_cuda_memcpy(bench.device_index(), size, settings);
      FERRY_RETURN_IF_ERROR(check_interrupt());  // not "no baseline" after a Ctrl-C in it
      no_cuda = base.reason;
      for (Dir dir : kOneWay) {
        if (!base.available) break;
        r.median_gbps[{size, Mode::cuda_async, dir}] = base.pinned[int(dir)];
        r.median_gbps[{size, Mode::cuda_pageable, dir}] = base.pageable[int(dir)];
        r.median_gbps[{size, Mode::cuda_async, Dir::both}] = base.both_pinned;
      }
    }
    add_size_section(bench, size, r, no_cuda);
  }
  return ok_status();
}

void add_method(Report& report, const Options& options, bool cuda) {
  report.add_method(
      "median GB/s (1e9 B/s) of repeated transfers, >= " + options.text("--min-time-ms") +
          " ms per case after a warm-up; pool/pageable chunks " +
          format_bytes(options.number("--chunk")) + ", " + options.text("--in-flight") +
          " pool chunks in flight per direction; both: pool H2D and D2H at once on the upload "
          "and download queues, total GB/s (both/one-direction: over the faster direction "
          "alone); " +
          (cuda ? "cudaMemcpyAsync: pinned cudaHostAlloc memory, one copy + "
                  "cudaStreamSynchronize (both: two streams); cudaMemcpy pageable: the "
                  "std::vector memory ferry's pageable path reads; "
                : "") +
          "every ferry case checked once with random bytes",
      {{"min_time_ms", options.number("--min-time-ms")},
       {"chunk_bytes", options.number("--chunk")},
       {"in_flight", options.number("--in-flight")}});
}

// After the sizes: the CPU cost of a small transfer, and what the staging pools did.
Status add_overhead_and_pools(Bench& bench, const Transfers& transfers) {
  FERRY_RETURN_IF_ERROR(bench.progress("measuring the per-transfer CPU overhead"));
  Result<SubmitOverhead> overhead = measure_submit_overhead(bench.device);
  if (!overhead.ok()) return overhead.status().with_context("measuring the submit overhead");
  Section& section =
      bench.report.add_section("Per-transfer CPU overhead of the pool path", "overhead");
  section.fields = {
      {"acquire + record + submit of a 4 KiB copy, per call (median of 2048)",
       "submit_overhead_us", overhead->per_call_median_us, Unit::us},
      {"the same, mean", "submit_overhead_mean_us", overhead->per_call_mean_us, Unit::us},
      {"of which acquire + record (median, the list dropped unsubmitted)", "record_overhead_us",
       overhead->record_median_us, Unit::us},
      {"sustained, 2000 back to back without waiting (mean)", "submit_sustained_us",
       overhead->sustained_us, Unit::us},
      {"per copy, " + std::to_string(kOverheadBatch) + " copies in one submission (median)",
       "submit_batched_us", overhead->batched_median_us, Unit::us}};
  if (bench.device.backend() == Backend::cuda) {
    const CudaSubmitCost floor =
        measure_cuda_submit_cost(bench.device_index(), kOverheadBytes, kOverheadBurst, 2048);
    FERRY_RETURN_IF_ERROR(check_interrupt());
    if (floor.available) {
      section.fields.push_back({"plain CUDA, per call: cudaMemcpyAsync of 4 KiB (median)",
                                "cuda_memcpy_us", floor.memcpy_us, Unit::us});
      section.fields.push_back({"plain CUDA, per call: the same with cudaMemcpyDefault (median)",
                                "cuda_memcpy_default_us", floor.memcpy_default_us, Unit::us});
      section.fields.push_back({"plain CUDA, per call: cudaMemcpyAsync + cudaEventRecord (median)",
                                "cuda_memcpy_event_us", floor.memcpy_event_us, Unit::us});
    } else {
      section.notes.push_back("no plain CUDA floor: " + floor.reason);
    }
  }
  section.notes.push_back(
      "per call: each call timed alone, in bursts of " + std::to_string(kOverheadBurst) +
          " with the queue drained between bursts (untimed); sustained: the GPU's time per "
          "small copy bounds it once the driver's queue is full");

  Section& pools = bench.report.add_section("Staging pools", "staging_pools");
  pools.columns = {{"pool", "pool"}, {"capacity", "capacity_bytes", Unit::bytes},
                   {"reserved", "bytes_reserved", Unit::bytes},
                   {"high water", "high_water_bytes", Unit::bytes}, {"slabs", "slabs", Unit::count},
                   {"acquires", "acquires", Unit::count}, {"waits", "waits", Unit::count}};
  for (const StagingPool* pool : {&transfers.upload_pool, &transfers.readback_pool}) {
    const StagingPoolStats stats = pool->stats();
    pools.add_row({std::string(pool == &transfers.upload_pool ? "upload" : "readback"),
                   stats.capacity_bytes, stats.bytes_reserved, stats.high_water_bytes,
                   std::uint64_t{stats.slabs}, stats.acquires, stats.waits});
  }
  pools.notes = {"waits: acquires that had to wait for a lease to come back"};
  return ok_status();
}

Status run_transfer(Bench& bench) {
  const Options& options = bench.options;
  std::vector<std::uint64_t> sizes;
  bench.skipped = {"Skipped sizes", "skipped", {},
                   {{"size", "size_bytes", Unit::bytes}, {"reason", "reason"}}};
  for (std::uint64_t size : options.sizes("--sizes")) {
    if (!options.given("--sizes") && bench.device.info().is_cpu && size > 256 * kMiB) {
      bench.skipped.add_row({size, "CPU device: default sizes stop at 256 MiB (use --sizes)"});
    } else if (bench.fits({size}, 2 * size, 4 * size)) {  // host: 2 pageable, 2 pinned
      sizes.push_back(size);
    }
  }
  if (sizes.empty()) return bench.end_skipped(true);
  Transfers transfers{bench.device, bench.number("--chunk"),
                      static_cast<unsigned>(bench.number("--in-flight"))};
  Results results;
  results.cuda = bench.device.backend() == Backend::cuda;
  add_method(bench.report, options, results.cuda);
  results.all = &bench.report.add_section("Every measurement", "measurements");
  results.all->json_only = true;
  results.all->columns = {
      {"size", "size_bytes", Unit::bytes}, {"mode", "mode"}, {"dir", "direction"},
      {"reps", "reps", Unit::count}, {"median s", "median_seconds", Unit::seconds},
      {"best s", "best_seconds", Unit::seconds}, {"median", "median_gbps", Unit::gbps},
      {"best", "best_gbps", Unit::gbps}};
  FERRY_RETURN_IF_ERROR(measure(bench, sizes, transfers, results));
  if (!options.flag("--no-origins")) {
    FERRY_RETURN_IF_ERROR(measure_origins(bench, transfers, bench.number("--origin-size")));
  }
  FERRY_RETURN_IF_ERROR(add_overhead_and_pools(bench, transfers));
  return bench.end_skipped(false);
}

int run(const Options& options, const std::string& command_line) {
  return run_bench(options, command_line, "ferry bench transfer",
                   {QueueKind::upload, QueueKind::download}, false, run_transfer);
}

}  // namespace

const Command kBenchTransfer = {
    .name = "bench transfer",
    .summary = "Host<->device bandwidth (H2D, D2H, both at once) of the plain API path, the "
               "staging pool and pageable memory, checked with random data.",
    .about =
        "Per size, host->device (H2D), device->host (D2H) and both at once:\n"
        "  direct          the whole size in one copy from/to a pinned buffer (the baseline)\n"
        "  pool            pinned data in staging-pool leases, chunks copied several in flight\n"
        "  pageable        a std::vector through ferry::upload / ferry::download\n"
        "  pageable-naive  memcpy into a pinned buffer, then one copy (reverse for D2H)\n"
        "  both            pool H2D and D2H at once on the upload and download queues\n"
        "and on CUDA devices cudaMemcpyAsync (pinned) and cudaMemcpy (pageable). Each case is\n"
        "checked once with random bytes (exit 1 on a mismatch), then timed: median GB/s, and us\n"
        "per transfer up to 1 MiB, one table per size as soon as it is measured. Then direct\n"
        "copies from host memory of several origins (the backend's own, ordinary pages\n"
        "registered, cudaHostAlloc pages registered with a non-CUDA device), a small pooled\n"
        "transfer's CPU time and pool statistics.\n",
    .options = kOptions,
    .run = run,
};

}  // namespace ferry::cli
