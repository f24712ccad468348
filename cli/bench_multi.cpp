// `ferry bench multi`: several devices of one backend at once. Pinned uploads and downloads on
// 1, 2, 4... devices together against the sum of each device alone (same run); copies between two
// devices, direct against staged through host memory; a ShardedIndex search on 1, 2, 4...
// devices against one device holding the same database, results checked identical.
#include <algorithm>
#include <barrier>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "bench_common.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kOptions[] = {
    {.name = "--devices", .kind = OptionKind::count, .metavar = "N",
     .help = "devices of the backend to use (0: all it has; more than it has: its devices opened "
             "again, to exercise the paths, not to measure)",
     .fallback = "0", .max = 64},
    {.name = "--bytes", .kind = OptionKind::size, .metavar = "SIZE",
     .help = "bytes per copy, per device", .fallback = "256M", .quick = "4M"},
    {.name = "--copies", .kind = OptionKind::count, .metavar = "N",
     .help = "copies per device and direction in one timed run", .fallback = "16", .quick = "3",
     .min = 1, .max = 100000},
    {.name = "--rows", .kind = OptionKind::count, .metavar = "N",
     .help = "database rows (256-bit codes) of the sharded search", .fallback = "200000000",
     .quick = "30000", .min = 1, .max = 100'000'000'000},
    {.name = "--queries", .kind = OptionKind::count, .metavar = "N",
     .help = "queries per search (k = 10)", .fallback = "1000", .quick = "50", .min = 1,
     .max = 100000},
    {.name = "--fill-rows", .kind = OptionKind::count, .metavar = "N",
     .help = "rows (256-bit codes) per device of the search at full size, which scales the "
             "database with the devices (0: not run)",
     .fallback = "0", .quick = "0", .max = 100'000'000'000},
    {.name = "--fill-queries", .kind = OptionKind::count, .metavar = "N",
     .help = "queries per search at full size (k = 10)", .fallback = "1000", .quick = "20",
     .min = 1, .max = 100000},
    {.name = "--min-time-ms", .kind = OptionKind::count, .metavar = "N",
     .help = "least time per measurement", .fallback = "1000", .quick = "10"},
};

// 1, 2, 4, ... up to n, and n.
std::vector<std::size_t> device_counts(std::size_t n) {
  std::vector<std::size_t> counts;
  for (std::size_t c = 1; c < n; c *= 2) counts.push_back(c);
  counts.push_back(n);
  return counts;
}

std::size_t numa_nodes() {
  std::size_t nodes = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[4]))) ++nodes;
  }
  return nodes;
}

// One device's copy set-up: a pinned host buffer each way and a device buffer each way.
struct DeviceCopies {
  Device device;
  Buffer host_up, host_down, device_up, device_down;
};

enum class Direction { upload, download, both };

// `copies` copies per device (each way for both) on every device of `set` at once, each device
// driven by its own thread, all started together: the total bytes over the wall time.
Result<double> copy_rate(const std::vector<DeviceCopies*>& set, Direction direction,
                         std::uint64_t bytes, std::uint64_t copies) {
  std::barrier start(static_cast<std::ptrdiff_t>(set.size() + 1));
  std::vector<Status> results(set.size());
  std::vector<std::thread> threads;
  for (std::size_t d = 0; d < set.size(); ++d) {
    threads.emplace_back([&, d] {
      DeviceCopies& c = *set[d];
      start.arrive_and_wait();
      // Two copies in flight per queue, so that the engine never waits for the host.
      TimelinePoint up[2], down[2];
      for (std::uint64_t i = 0; i < copies && results[d].ok(); ++i) {
        auto issue = [&](const Queue& queue, const Buffer& src, const Buffer& dst,
                         TimelinePoint& slot) -> Status {
          if (slot.timeline) FERRY_RETURN_IF_ERROR(slot.wait(kWaitTimeout));
          CommandList commands;
          FERRY_RETURN_IF_ERROR(commands.copy(src, 0, dst, 0, bytes));
          FERRY_ASSIGN_OR_RETURN(slot, queue.submit(std::move(commands)));
          return Status();
        };
        if (direction != Direction::download) {
          results[d] = issue(c.device.queue(QueueKind::upload), c.host_up, c.device_up, up[i % 2]);
        }
        if (results[d].ok() && direction != Direction::upload) {
          results[d] = issue(c.device.queue(QueueKind::download), c.device_down, c.host_down, down[i % 2]);
        }
      }
      for (TimelinePoint* slot : {&up[0], &up[1], &down[0], &down[1]}) {
        if (slot->timeline && results[d].ok()) results[d] = slot->wait(kWaitTimeout);
      }
    });
  }
  const auto begin = std::chrono::steady_clock::now();
  start.arrive_and_wait();
  for (std::thread& thread : threads) thread.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  for (const Status& status : results) FERRY_RETURN_IF_ERROR(status);
  const double ways = direction == Direction::both ? 2.0 : 1.0;
  return static_cast<double>(bytes) * static_cast<double>(copies) * ways *
         static_cast<double>(set.size()) / seconds / 1e9;
}

Status transfer_table(Bench& bench, std::vector<DeviceCopies>& devices) {
  const std::uint64_t bytes = bench.number("--bytes");
  const std::uint64_t copies = bench.number("--copies");
  Section& section = bench.report.add_section(
      "Pinned copies on several devices at once against the sum of each device alone",
      "transfers");
  section.columns = {{"devices", "devices", Unit::count},
                     {"direction", "direction"},
                     {"together GB/s", "together_gbps", Unit::gbps},
                     {"sum alone GB/s", "sum_alone_gbps", Unit::gbps},
                     {"together/sum", "together_over_sum", Unit::ratio},
                     {"per device GB/s", "per_device_gbps", Unit::gbps}};
  const std::pair<Direction, const char*> directions[] = {
      {Direction::upload, "H2D"}, {Direction::download, "D2H"}, {Direction::both, "both"}};
  for (const auto& [direction, name] : directions) {
    // Each device alone (the best of two runs), then every count of devices together.
    std::vector<double> alone(devices.size(), 0.0);
    if (direction == Direction::upload) {  // untimed: first copies map the host memory
      std::vector<DeviceCopies*> all;
      for (DeviceCopies& c : devices) all.push_back(&c);
      FERRY_RETURN_IF_ERROR(copy_rate(all, Direction::both, bytes, 2).status());
    }
    for (std::size_t d = 0; d < devices.size(); ++d) {
      FERRY_RETURN_IF_ERROR(bench.progress(std::string(name) + " on device " + std::to_string(d) + " alone"));
      for (int run = 0; run < 2; ++run) {
        FERRY_ASSIGN_OR_RETURN(double rate, copy_rate({&devices[d]}, direction, bytes, copies));
        alone[d] = std::max(alone[d], rate);
      }
    }
    for (const std::size_t n : device_counts(devices.size())) {
      std::vector<DeviceCopies*> set;
      double sum = 0.0;
      for (std::size_t d = 0; d < n; ++d) {
        set.push_back(&devices[d]);
        sum += alone[d];
      }
      double together = 0.0;
      FERRY_RETURN_IF_ERROR(bench.progress(std::string(name) + " on " + std::to_string(n) + " devices"));
      for (int run = 0; run < 2; ++run) {
        FERRY_ASSIGN_OR_RETURN(double rate, copy_rate(set, direction, bytes, copies));
        together = std::max(together, rate);
      }
      section.add_row({std::uint64_t{n}, std::string(name), together, sum, together / sum,
                       together / static_cast<double>(n)});
      if (n == devices.size() && n > 1) {
        bench.report.summary.emplace_back(
            std::string("pinned ") + name + " on " + std::to_string(n) + " devices",
            "together/sum alone " + ratio_text(together / sum) + " (" +
                format_value(together, Unit::gbps) + " GB/s)");
      }
    }
  }
  section.notes.push_back(
      "each device driven by its own host thread (two copies in flight per queue), all started "
      "together; the best of two runs of " + std::to_string(copies) + " copies of " +
      format_value(bytes, Unit::bytes) + " per device and direction; the threads are the bench's "
      "own (not placed); host buffers are placed on each device's NUMA node where the host has "
      "several (DeviceOptions::numa_placement; this host has " +
      std::to_string(numa_nodes()) + " NUMA node(s))");
  bench.publish();
  return Status();
}

// How the CPU touches a pinned buffer between two copies of it.
enum class Touch { none, memcpy, streaming };

// `bytes` split over 8 threads: dst written by memcpy, or by streaming (non-temporal) stores
// that leave nothing of it in the CPU's caches.
void host_copy(std::byte* dst, const std::byte* src, std::uint64_t bytes, Touch touch) {
  constexpr unsigned kThreads = 8;
  const std::uint64_t piece = (bytes / kThreads + 63) / 64 * 64;
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < kThreads; ++i) {
    const std::uint64_t begin = std::min<std::uint64_t>(bytes, i * piece);
    const std::uint64_t n = std::min<std::uint64_t>(bytes - begin, piece);
    threads.emplace_back([=] {
#if defined(__SSE2__)
      if (touch == Touch::streaming && reinterpret_cast<std::uintptr_t>(dst + begin) % 16 == 0) {
        std::uint64_t at = 0;
        for (; at + 16 <= n; at += 16) {
          _mm_stream_si128(reinterpret_cast<__m128i*>(dst + begin + at),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + begin + at)));
        }
        std::memcpy(dst + begin + at, src + begin + at, n - at);
        _mm_sfence();
        return;
      }
#endif
      std::memcpy(dst + begin, src + begin, n);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

// GB/s of copies of `bytes` between a pinned buffer and the device, each waited for, timing the
// copies only; between two copies the CPU writes the buffer (H2D) or reads it (D2H) as `touch`
// says, as the host-staged path does with its leases.
Result<double> touched_copy_rate(Bench& bench, const Device& device, bool upload, Touch touch,
                                 std::uint64_t bytes) {
  FERRY_ASSIGN_OR_RETURN(Buffer host, device.create_buffer(bytes, upload ? MemoryKind::host_upload
                                                                         : MemoryKind::host_readback));
  FERRY_ASSIGN_OR_RETURN(Buffer on_device, device.create_buffer(bytes));
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> pinned, host.host_span());
  std::vector<std::byte> other(bytes);
  fill_random(other, 41);
  const Queue queue = device.queue(upload ? QueueKind::upload : QueueKind::download);
  const auto min_time = std::chrono::milliseconds(std::max<std::uint64_t>(bench.number("--min-time-ms") / 4, 1));
  double seconds = 0.0;
  std::uint64_t copies = 0;
  for (int round = 0; copies < 8 || seconds < std::chrono::duration<double>(min_time).count(); ++round) {
    if (touch != Touch::none) {
      if (upload) {
        host_copy(pinned.data(), other.data(), bytes, touch);
      } else {
        host_copy(other.data(), pinned.data(), bytes, Touch::memcpy);
      }
    }
    const auto begin = std::chrono::steady_clock::now();
    FERRY_RETURN_IF_ERROR(upload ? copy_and_wait(queue, host, on_device, bytes)
                                 : copy_and_wait(queue, on_device, host, bytes));
    if (round < 2) continue;  // the first two: warm-up
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    ++copies;
  }
  return static_cast<double>(bytes) * static_cast<double>(copies) / seconds / 1e9;
}

// What bounds the host-staged path: its leases are pinned memory the CPU has just written or
// read. 8 MiB copies (its chunk) with and without that, on the devices it uses, alone.
Status touched_memory_table(Bench& bench, const Device& source, const Device& target) {
  constexpr std::uint64_t kChunk = 8 * kMiB;
  Section& section = bench.report.add_section(
      "8 MiB pinned copies of memory the CPU has just written or read (the host-staged path's "
      "leases) against memory it left alone", "touched_memory");
  section.columns = {{"copy", "copy"}, {"between copies the CPU", "touch"},
                     {"GB/s", "gbps", Unit::gbps}, {"over untouched", "over_untouched", Unit::ratio}};
  FERRY_RETURN_IF_ERROR(bench.progress("copies of memory the CPU touched"));
  FERRY_ASSIGN_OR_RETURN(double up_none, touched_copy_rate(bench, target, true, Touch::none, kChunk));
  FERRY_ASSIGN_OR_RETURN(double up_memcpy, touched_copy_rate(bench, target, true, Touch::memcpy, kChunk));
  FERRY_ASSIGN_OR_RETURN(double up_stream, touched_copy_rate(bench, target, true, Touch::streaming, kChunk));
  FERRY_ASSIGN_OR_RETURN(double down_none, touched_copy_rate(bench, source, false, Touch::none, kChunk));
  FERRY_ASSIGN_OR_RETURN(double down_read, touched_copy_rate(bench, source, false, Touch::memcpy, kChunk));
  section.add_row({std::string("H2D, device 1"), std::string("left it alone"), up_none, 1.0});
  section.add_row({std::string("H2D, device 1"), std::string("wrote it (memcpy)"), up_memcpy, up_memcpy / up_none});
  section.add_row({std::string("H2D, device 1"), std::string("wrote it (streaming stores)"), up_stream, up_stream / up_none});
  section.add_row({std::string("D2H, device 0"), std::string("left it alone"), down_none, 1.0});
  section.add_row({std::string("D2H, device 0"), std::string("read it (memcpy)"), down_read, down_read / down_none});
  section.notes.push_back("each copy waited for and timed alone (the CPU's writes or reads, by 8 "
                          "threads, happen between copies, untimed)");
  bench.publish();
  return Status();
}

Status peer_table(Bench& bench, std::vector<DeviceCopies>& devices) {
  const std::uint64_t bytes = bench.number("--bytes");
  Section& section = bench.report.add_section(
      "Copies between two devices (copy_between_devices), device 0 to device 1", "peer");
  section.columns = {{"path", "path"}, {"GB/s", "gbps", Unit::gbps},
                     {"over host_staged", "over_host_staged", Unit::ratio}};
  DeviceCopies& a = devices[0];
  DeviceCopies& b = devices[1];
  PeerCopyOptions staged;
  staged.allow_direct = false;
  FERRY_ASSIGN_OR_RETURN(staged.source_pool,
                         reserved_pool(a.device, MemoryKind::host_readback, 8 * kMiB, 2));
  FERRY_ASSIGN_OR_RETURN(staged.target_pool,
                         reserved_pool(b.device, MemoryKind::host_upload, 8 * kMiB, 2));
  const RepeatSettings settings{.warmup = 1, .min_reps = 3, .max_reps = 1000,
                                .min_time = std::chrono::milliseconds(bench.number("--min-time-ms"))};
  auto measure = [&](const PeerCopyOptions& options, PeerCopyPath& path) -> Result<double> {
    FERRY_ASSIGN_OR_RETURN(Timing timing, time_each(settings, [&]() -> Status {
      FERRY_ASSIGN_OR_RETURN(path, copy_between_devices(a.device.queue(QueueKind::download),
                                                        a.device_up, 0,
                                                        b.device.queue(QueueKind::upload),
                                                        b.device_down, 0, bytes, options));
      return Status();
    }));
    return static_cast<double>(bytes) / timing.median_seconds / 1e9;
  };
  PeerCopyPath staged_path{}, direct_path{};
  FERRY_RETURN_IF_ERROR(bench.progress("copies between devices, staged through host memory"));
  FERRY_ASSIGN_OR_RETURN(double staged_rate, measure(staged, staged_path));
  FERRY_RETURN_IF_ERROR(bench.progress("copies between devices, direct"));
  FERRY_ASSIGN_OR_RETURN(double direct_rate, measure(PeerCopyOptions{}, direct_path));
  // The data arrived: device 1's buffer against device 0's.
  FERRY_ASSIGN_OR_RETURN(Buffer check_a, a.device.create_buffer(bytes, MemoryKind::host_readback));
  FERRY_ASSIGN_OR_RETURN(Buffer check_b, b.device.create_buffer(bytes, MemoryKind::host_readback));
  FERRY_RETURN_IF_ERROR(copy_and_wait(a.device.queue(QueueKind::download), a.device_up, check_a, bytes));
  FERRY_RETURN_IF_ERROR(copy_and_wait(b.device.queue(QueueKind::download), b.device_down, check_b, bytes));
  FERRY_ASSIGN_OR_RETURN(auto got, check_b.host_span());
  FERRY_ASSIGN_OR_RETURN(auto sent, check_a.host_span());
  FERRY_RETURN_IF_ERROR(compare_bytes(got, sent, "the copy between devices"));
  section.add_row({std::string(to_string(staged_path)), staged_rate, 1.0});
  if (direct_path == PeerCopyPath::host_staged) {
    section.add_row({std::string("host_staged, pools made per call"), direct_rate,
                     direct_rate / staged_rate});
    section.notes.push_back("no direct path between these devices on this backend");
  } else {
    section.add_row({std::string(to_string(direct_path)), direct_rate, direct_rate / staged_rate});
  }
  if (direct_path != PeerCopyPath::host_staged) bench.report.summary.emplace_back(
      "copy between devices", std::string(to_string(direct_path)) + "/host_staged " +
                                  ratio_text(direct_rate / staged_rate) + " (" +
                                  format_value(direct_rate, Unit::gbps) + " GB/s)");
  section.notes.push_back("median of copies of " + format_value(bytes, Unit::bytes) +
                          ", each waited for; host_staged through 8 MiB chunks of two "
                          "reserved pools; the target checked against the source");
  bench.publish();
  return Status();
}

Status search_table(Bench& bench, const std::vector<Device>& devices) {
  const std::uint64_t rows = bench.number("--rows");
  const auto queries = static_cast<std::uint32_t>(bench.number("--queries"));
  constexpr std::uint32_t kBits = 256;
  const std::uint64_t code_bytes = binary_code_bytes(kBits);
  Section& section = bench.report.add_section(
      "ShardedIndex search on several devices against one device holding every row", "sharded_search");
  section.columns = {{"devices", "devices", Unit::count},
                     {"rows per device", "rows_per_device", Unit::count},
                     {"ms per search", "ms", Unit::ms},
                     {"speed-up", "speedup", Unit::ratio},
                     {"identical", "identical", Unit::flag}};
  // Host: the codes and the shards' host copies where they spill; device 0: every row (one
  // device holds the whole database).
  bench.skipped = {"Skipped sharded search", "skipped_search", {},
                   {{"rows", "rows", Unit::count}, {"reason", "reason"}}};
  if (!bench.fits({rows}, rows * code_bytes + (256 << 20), 2 * rows * code_bytes)) {
    return bench.end_skipped(false);
  }
  FERRY_RETURN_IF_ERROR(bench.progress("random codes"));
  std::vector<std::byte> codes(rows * code_bytes);
  fill_random(codes, 17);
  std::vector<std::byte> query_codes(std::uint64_t{queries} * code_bytes);
  fill_random(query_codes, 23);
  // Every 7th query a database row: exact matches and ties at distance 0.
  for (std::uint32_t q = 0; q < queries; q += 7) {
    std::copy_n(codes.begin() + static_cast<std::ptrdiff_t>((q * 7919ull % rows) * code_bytes),
                code_bytes, query_codes.begin() + static_cast<std::ptrdiff_t>(q * code_bytes));
  }
  ShardedIndexOptions options;
  options.index.dims = kBits;
  const SearchParams params{10, 1, false};
  const RepeatSettings settings{.warmup = 1, .min_reps = 3, .max_reps = 1000,
                                .min_time = std::chrono::milliseconds(bench.number("--min-time-ms"))};
  SearchResults first;
  double one_device_ms = kNaN;
  for (const std::size_t n : device_counts(devices.size())) {
    FERRY_RETURN_IF_ERROR(bench.progress("sharded index on " + std::to_string(n) + " devices"));
    FERRY_ASSIGN_OR_RETURN(ShardedIndex index,
                           ShardedIndex::create(std::span(devices).first(n), options));
    // Added in steps, as an application streams a corpus in.
    constexpr std::uint64_t kStep = 16'000'000;
    for (std::uint64_t at = 0; at < rows; at += kStep) {
      const std::uint64_t count = std::min(kStep, rows - at);
      FERRY_RETURN_IF_ERROR(
          index.add_codes(std::span(codes).subspan(at * code_bytes, count * code_bytes), count).status());
    }
    SearchResults results;
    FERRY_ASSIGN_OR_RETURN(Timing timing, time_each(settings, [&]() -> Status {
      FERRY_ASSIGN_OR_RETURN(results, index.search_codes(query_codes, queries, params));
      return Status();
    }));
    const double ms = timing.median_seconds * 1e3;
    bool identical = true;
    if (n == 1) {
      first = results;
      one_device_ms = ms;
    } else {
      identical = results.ids == first.ids && results.scores == first.scores;
    }
    section.add_row({std::uint64_t{n}, rows / n, ms, one_device_ms / ms, identical});
    if (!identical) {
      return Status(ErrorCode::internal, "the search on " + std::to_string(n) +
                                             " devices differs from the one on one device");
    }
    if (n == devices.size() && n > 1) {
      bench.report.summary.emplace_back("sharded search on " + std::to_string(n) + " devices",
                                        "speed-up over one device " + ratio_text(one_device_ms / ms));
    }
  }
  section.notes.push_back(std::to_string(queries) + " query codes, k = 10, " +
                          std::to_string(rows) + " random 256-bit codes added in steps of 16M rows "
                          "(search_codes; the median over >= " +
                          std::to_string(bench.number("--min-time-ms")) +
                          " ms); the results of every device count compared with one device's");
  bench.publish();
  return Status();
}

// Per query, the best k of `copies` copies of a database whose own best k are `one` (ids of
// copy c are those of the original plus c * rows): a row of copy c is among the best k only if
// it is among the best k of its copy, so these lists hold every answer.
SearchResults expected_over_copies(const SearchResults& one, std::uint64_t rows,
                                   std::uint64_t copies) {
  SearchResults out;
  out.queries = one.queries;
  out.k = one.k;
  std::vector<std::pair<float, std::uint64_t>> merged;
  for (std::uint32_t q = 0; q < one.queries; ++q) {
    merged.clear();
    for (std::uint32_t i = 0; i < one.k; ++i) {
      const std::uint64_t id = one.ids[std::uint64_t{q} * one.k + i];
      if (id == kBinaryIndexNoId) continue;
      // Copies in id order: once k entries of a distance are in, later copies add none better.
      for (std::uint64_t c = 0; c < std::min<std::uint64_t>(copies, one.k); ++c) {
        merged.emplace_back(one.scores[std::uint64_t{q} * one.k + i], id + c * rows);
      }
    }
    std::sort(merged.begin(), merged.end());
    for (std::uint32_t i = 0; i < one.k; ++i) {
      out.ids.push_back(i < merged.size() ? merged[i].second : kBinaryIndexNoId);
      out.scores.push_back(i < merged.size() ? merged[i].first : kNaN);
    }
  }
  return out;
}

// Search throughput with the database growing with the devices (each holds --fill-rows rows, as
// many as fill it): rows x queries per second on n devices against one. One device cannot hold
// the n-device database, so the results are checked against a truth built from one block: the
// database is copies of a block of random codes, and the best k over copies follow from the
// block's own best k (expected_over_copies).
Status full_size_table(Bench& bench, const std::vector<Device>& devices) {
  const std::uint64_t rows_per_device = bench.number("--fill-rows");
  if (rows_per_device == 0) return Status();
  const auto queries = static_cast<std::uint32_t>(bench.number("--fill-queries"));
  constexpr std::uint32_t kBits = 256;
  const std::uint64_t code_bytes = binary_code_bytes(kBits);
  // The block: whole rows of it per device, at most 16M rows (512 MiB of host memory).
  const std::uint64_t block = std::min<std::uint64_t>(rows_per_device, 16'000'000);
  const std::uint64_t blocks_per_device = rows_per_device / block;
  Section& section = bench.report.add_section(
      "ShardedIndex search at full size: each device holds --fill-rows rows, the database grows "
      "with the devices", "full_size_search");
  section.columns = {{"devices", "devices", Unit::count},
                     {"rows", "rows", Unit::count},
                     {"of device memory", "device_memory_share", Unit::percent},
                     {"ms per search", "ms", Unit::ms},
                     {"G rows x queries/s", "giga_row_queries_per_s", Unit::number},
                     {"scaling", "scaling", Unit::ratio},
                     {"correct", "correct", Unit::flag}};
  bench.skipped = {"Skipped full-size search", "skipped_full_size", {},
                   {{"rows per device", "rows", Unit::count}, {"reason", "reason"}}};
  if (!bench.fits({rows_per_device}, blocks_per_device * block * code_bytes + (256 << 20),
                  2 * block * code_bytes)) {
    return bench.end_skipped(false);
  }
  FERRY_RETURN_IF_ERROR(bench.progress("full size: a block of " + std::to_string(block) + " random codes"));
  std::vector<std::byte> codes(block * code_bytes);
  fill_random(codes, 29);
  std::vector<std::byte> query_codes(std::uint64_t{queries} * code_bytes);
  fill_random(query_codes, 31);
  for (std::uint32_t q = 0; q < queries; q += 7) {  // exact matches: ties at distance 0 in every copy
    std::copy_n(codes.begin() + static_cast<std::ptrdiff_t>((q * 7919ull % block) * code_bytes),
                code_bytes, query_codes.begin() + static_cast<std::ptrdiff_t>(q * code_bytes));
  }
  const SearchParams params{10, 1, false};
  SearchResults one_block;
  {
    BinaryIndexOptions options;
    options.dims = kBits;
    FERRY_ASSIGN_OR_RETURN(BinaryIndex index, BinaryIndex::create(devices[0], options));
    FERRY_RETURN_IF_ERROR(index.add_codes(codes, block).status());
    FERRY_ASSIGN_OR_RETURN(one_block, index.search_codes(query_codes, queries, params));
  }
  const RepeatSettings settings{.warmup = 1, .min_reps = 2, .max_reps = 1000,
                                .min_time = std::chrono::milliseconds(bench.number("--min-time-ms"))};
  double one_device_rate = kNaN;
  for (const std::size_t n : device_counts(devices.size())) {
    const std::uint64_t copies = blocks_per_device * n;
    const std::uint64_t rows = copies * block;
    FERRY_RETURN_IF_ERROR(bench.progress("full size on " + std::to_string(n) + " devices: " +
                                         std::to_string(rows) + " rows"));
    ShardedIndexOptions options;
    options.index.dims = kBits;
    options.index.memory.code_budget_bytes = blocks_per_device * block * code_bytes;  // all resident
    FERRY_ASSIGN_OR_RETURN(ShardedIndex index, ShardedIndex::create(std::span(devices).first(n), options));
    for (std::uint64_t c = 0; c < copies; ++c) {
      if (c % 64 == 0) {
        FERRY_RETURN_IF_ERROR(bench.progress("  adding copy " + std::to_string(c) + " of " +
                                             std::to_string(copies)));
      }
      FERRY_RETURN_IF_ERROR(index.add_codes(codes, block).status());
    }
    SearchResults results;
    FERRY_ASSIGN_OR_RETURN(Timing timing, time_each(settings, [&]() -> Status {
      FERRY_ASSIGN_OR_RETURN(results, index.search_codes(query_codes, queries, params));
      return Status();
    }));
    const SearchResults expected = expected_over_copies(one_block, block, copies);
    const bool correct = results.ids == expected.ids && results.scores == expected.scores;
    const double rate = static_cast<double>(rows) * queries / timing.median_seconds / 1e9;
    if (n == 1) one_device_rate = rate;
    const double memory = static_cast<double>(devices[0].info().device_memory_bytes);
    section.add_row({std::uint64_t{n}, rows,
                     memory > 0 ? static_cast<double>(blocks_per_device * block * code_bytes) / memory : kNaN,
                     timing.median_seconds * 1e3, rate, rate / one_device_rate, correct});
    if (!correct) {
      return Status(ErrorCode::internal, "the full-size search on " + std::to_string(n) +
                                             " devices differs from the truth built from one block");
    }
    if (n == devices.size() && n > 1) {
      bench.report.summary.emplace_back(
          "full-size search on " + std::to_string(n) + " devices",
          "throughput over one device " + ratio_text(rate / one_device_rate) + " (" +
              std::to_string(rows) + " rows)");
    }
  }
  section.notes.push_back(
      std::to_string(queries) + " query codes, k = 10, search_codes; the database is " +
      std::to_string(blocks_per_device) + " copies per device of a block of " +
      std::to_string(block) + " random 256-bit codes, every row resident in device memory; "
      "scaling = rows x queries per second over one device's; each result checked against the "
      "block's own best k merged over the copies (ties by ascending id)");
  bench.publish();
  return Status();
}

Status measure(Bench& bench) {
  const std::string backend(to_string(bench.device.backend()));
  std::size_t listed = 1;
  for (const BackendInfo& info : list_backends()) {
    if (info.backend == bench.device.backend()) listed = info.devices.size();
  }
  const std::uint64_t wanted = bench.number("--devices");
  // More than the backend has: its devices opened again, which exercises every path (the
  // figures then share devices).
  const std::size_t count = wanted == 0 ? listed : static_cast<std::size_t>(wanted);
  std::vector<Device> devices = {bench.device};
  for (std::size_t d = 1; d < count; ++d) {
    const int index = static_cast<int>((static_cast<std::size_t>(bench.device_index()) + d) % listed);
    FERRY_ASSIGN_OR_RETURN(Device device, Device::open(backend, index));
    devices.push_back(device);
  }
  bench.report.add_method("several devices of one backend in one process",
                          {{"devices", std::uint64_t{devices.size()}},
                           {"bytes", bench.number("--bytes")},
                           {"rows", bench.number("--rows")}});
  bench.report.header.push_back({"devices", "device_count", std::uint64_t{devices.size()}, Unit::count});
  Section& where = bench.report.add_section("Where the devices sit on the host", "devices");
  where.columns = {{"device", "index", Unit::count}, {"name", "name"}, {"PCI bus", "pci_bus_id"},
                   {"NUMA node", "numa_node"}, {"peer devices", "peer_devices"},
                   {"device group", "device_group_size", Unit::count}};
  for (const Device& device : devices) {
    const DeviceInfo& info = device.info();
    std::string peers;
    for (int peer : info.peer_devices) peers += (peers.empty() ? "" : ",") + std::to_string(peer);
    where.add_row({std::uint64_t(info.index), info.name, info.pci_bus_id.empty() ? "-" : info.pci_bus_id,
                   info.numa_node < 0 ? std::string("unknown") : std::to_string(info.numa_node),
                   peers.empty() ? std::string("none") : peers,
                   std::uint64_t{info.device_group_size}});
  }
  where.notes.push_back("peer devices: copied to directly, GPU to GPU (CUDA peer access); device "
                        "group: Vulkan's, reported only (0: not Vulkan)");
  bench.publish();

  const std::uint64_t bytes = bench.number("--bytes");
  std::vector<DeviceCopies> copies;
  for (const Device& device : devices) {
    DeviceCopies c{device, {}, {}, {}, {}};
    FERRY_ASSIGN_OR_RETURN(c.host_up, device.create_buffer(bytes, MemoryKind::host_upload));
    FERRY_ASSIGN_OR_RETURN(c.host_down, device.create_buffer(bytes, MemoryKind::host_readback));
    FERRY_ASSIGN_OR_RETURN(c.device_up, device.create_buffer(bytes));
    FERRY_ASSIGN_OR_RETURN(c.device_down, device.create_buffer(bytes));
    FERRY_ASSIGN_OR_RETURN(auto host, c.host_up.host_span());
    fill_random(host, 5 + copies.size());
    copies.push_back(std::move(c));
  }
  FERRY_RETURN_IF_ERROR(transfer_table(bench, copies));
  if (copies.size() > 1) {
    FERRY_RETURN_IF_ERROR(peer_table(bench, copies));
    FERRY_RETURN_IF_ERROR(touched_memory_table(bench, copies[0].device, copies[1].device));
  }
  copies.clear();
  FERRY_RETURN_IF_ERROR(search_table(bench, devices));
  return full_size_table(bench, devices);
}

int run(const Options& options, const std::string& command_line) {
  return run_bench(options, command_line, "ferry bench multi",
                   {QueueKind::compute, QueueKind::upload, QueueKind::download}, false, measure);
}

}  // namespace

const Command kBenchMulti = {
    .name = "bench multi",
    .summary = "Several devices of one backend at once: pinned copies together against each "
               "device alone, copies between devices (direct against staged through host "
               "memory), and a ShardedIndex search on 1, 2, 4... devices against one device.",
    .about =
        "Uses --devices devices of --backend (0: all), starting at --device. Pinned H2D, D2H\n"
        "and both-direction copies of --bytes per device, each device driven by its own\n"
        "thread: aggregate GB/s on 1, 2, 4... devices against the sum of each device alone\n"
        "in the same run. copy_between_devices from device 0 to device 1: the direct path\n"
        "(CUDA peer copies) against the host-staged one. A ShardedIndex of --rows random\n"
        "256-bit codes searched (--queries, k = 10) on 1, 2, 4... devices, the results of\n"
        "each compared with one device's (exit 1 when they differ).\n",
    .options = kOptions,
    .run = run,
};

}  // namespace ferry::cli
