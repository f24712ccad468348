// `ferry bench transfer`: host<->device bandwidth of the plain API path, the staging pool and
// pageable memory, in one run so that the ratios between them are measured like for like.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "cli_args.hpp"
#include "commands.hpp"
#include "ferry/ferry.hpp"
#include "bench_report.hpp"
#include "format.hpp"
#include "transfer_modes.hpp"

namespace ferry::cli {

const char* const kBenchTransferHelp =
    "Usage: ferry bench transfer [options]\n"
    "\n"
    "Measures host->device (H2D), device->host (D2H) and both at once on one device, per size:\n"
    "  direct          whole size in one copy from/to a pinned host buffer, one submission, wait\n"
    "                  (the baseline: like one cudaMemcpyAsync or one vkCmdCopyBuffer)\n"
    "  pool            pinned data in staging-pool leases, copied in chunks, several in flight\n"
    "  pageable        a std::vector through ferry::upload / ferry::download\n"
    "  pageable-naive  memcpy into a pinned buffer, then one copy (reverse for D2H), in sequence\n"
    "  both            pool H2D and D2H at once on the upload and download queues\n"
    "Each case is checked once with random bytes (exit 1 on a mismatch), warmed up, then repeated\n"
    "until --min-time-ms has passed; the median is reported in GB/s (1e9 bytes per second).\n"
    "\n"
    "Options:\n"
    "  --backend NAME     auto (default: cuda, then vulkan, then cpu), cpu, vulkan or cuda\n"
    "  --device N         device index within the backend (default 0)\n"
    "  --sizes LIST       comma-separated sizes with K/M/G suffixes (default 64K,1M,16M,256M,1G;\n"
    "                     on a CPU device the default stops at 256M). Sizes that do not fit in\n"
    "                     device or host memory are skipped and listed.\n"
    "  --min-time-ms N    time spent on each measurement after warm-up (default 200)\n"
    "  --chunk SIZE       chunk size of the pool and pageable paths (default 16M)\n"
    "  --in-flight N      pool chunks in flight per direction (default 4)\n"
    "  --quick            sizes 64K,1M,16M,64M and 50 ms per measurement (unless given)\n"
    "  --json             JSON on stdout instead of the table\n"
    "  --json-file PATH   also write the JSON to PATH\n";

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kCpuDefaultSizeCap = 256 * kMiB;
const std::vector<std::uint64_t> kDefaultSizes = {64 << 10, kMiB, 16 * kMiB, 256 * kMiB, 1024 * kMiB};
const std::vector<std::uint64_t> kQuickSizes = {64 << 10, kMiB, 16 * kMiB, 64 * kMiB};
constexpr std::size_t kMinReps = 3;
constexpr std::size_t kMaxReps = 1'000'000;

// Every case, in the order measured (and printed in JSON).
constexpr Case kCases[] = {
    {TransferMode::direct, TransferDirection::h2d},
    {TransferMode::direct, TransferDirection::d2h},
    {TransferMode::pool, TransferDirection::h2d},
    {TransferMode::pool, TransferDirection::d2h},
    {TransferMode::pageable_naive, TransferDirection::h2d},
    {TransferMode::pageable_naive, TransferDirection::d2h},
    {TransferMode::pageable, TransferDirection::h2d},
    {TransferMode::pageable, TransferDirection::d2h},
    {TransferMode::pool, TransferDirection::both},
};

// ---- arguments ---------------------------------------------------------------------------

Parsed<BenchOptions> parse_options(const std::vector<std::string_view>& args, bool& help) {
  using Fail = Parsed<BenchOptions>;
  BenchOptions options;
  ArgReader reader(args);
  while (!reader.done()) {
    const std::string_view name = reader.peek_name();
    if (name == "--help" || name == "-h") {
      help = true;
      return {options, {}};
    }
    std::string common_error;
    if (take_common_bench_option(reader, options, common_error)) {
      if (!common_error.empty()) return Fail::fail(common_error);
      continue;
    }
    const bool known = name == "--sizes" || name == "--min-time-ms" || name == "--chunk" ||
                       name == "--in-flight";
    if (!known) return Fail::fail("bench transfer: unknown argument '" + std::string(name) + "'");
    Parsed<std::string_view> value = reader.take_value();
    if (!value.ok()) return Fail::fail(value.error);
    const std::string_view text = *value.value;
    const std::string option(name);

    if (name == "--sizes") {
      Parsed<std::vector<std::uint64_t>> sizes = parse_size_list(text);
      if (!sizes.ok()) return Fail::fail(option + ": " + sizes.error);
      options.sizes = *sizes.value;
    } else if (name == "--min-time-ms") {
      Parsed<std::uint64_t> ms = parse_count(text, 3'600'000);
      if (!ms.ok()) return Fail::fail(option + ": " + ms.error);
      options.min_time_ms = *ms.value;
    } else if (name == "--chunk") {
      Parsed<std::uint64_t> chunk = parse_size(text);
      if (!chunk.ok()) return Fail::fail(option + ": " + chunk.error);
      if (*chunk.value < 4096 || *chunk.value > 1024 * kMiB) {
        return Fail::fail(option + ": chunk must be between 4K and 1G");
      }
      options.transfer.chunk_bytes = *chunk.value;
    } else if (name == "--in-flight") {
      Parsed<std::uint64_t> count = parse_count(text, 64);
      if (!count.ok()) return Fail::fail(option + ": " + count.error);
      if (*count.value == 0) return Fail::fail(option + ": must be at least 1");
      options.transfer.in_flight = static_cast<unsigned>(*count.value);
    }
  }
  return {options, {}};
}

// ---- planning ----------------------------------------------------------------------------

void plan_sizes(const BenchOptions& options, const DeviceInfo& device, Report& report) {
  const bool explicit_sizes = options.sizes.has_value();
  const std::vector<std::uint64_t>& wanted =
      explicit_sizes ? *options.sizes : (options.quick ? kQuickSizes : kDefaultSizes);
  const std::uint64_t host_available = available_host_memory();
  for (std::uint64_t size : wanted) {
    // Two device buffers; on the host two pageable vectors and two pinned buffers (plus the
    // device buffers themselves when the "device" is the CPU).
    const std::uint64_t device_need = 2 * size;
    const std::uint64_t host_need = (device.is_cpu ? 6 : 4) * size;
    if (!explicit_sizes && device.is_cpu && size > kCpuDefaultSizeCap) {
      report.skipped.push_back({size, "CPU device: default sizes stop at 256 MiB (use --sizes)"});
    } else if (device.device_memory_bytes != 0 && device_need > device.device_memory_bytes / 10 * 9) {
      report.skipped.push_back({size, "needs " + format_bytes(device_need) + " of device memory, " +
                                          format_bytes(device.device_memory_bytes) + " exist"});
    } else if (host_available != 0 && host_need > host_available / 10 * 8) {
      report.skipped.push_back({size, "needs about " + format_bytes(host_need) +
                                          " of host memory, " + format_bytes(host_available) +
                                          " available"});
    } else {
      report.sizes.push_back(size);
    }
  }
}

// ---- measuring ---------------------------------------------------------------------------

Result<Measurement> measure(TransferBench& bench, std::uint64_t size, Case which,
                            std::chrono::milliseconds min_time) {
  using Clock = std::chrono::steady_clock;
  FERRY_RETURN_IF_ERROR(bench.verify(which.mode, which.direction));
  FERRY_RETURN_IF_ERROR(bench.run(which.mode, which.direction));  // warm-up
  std::vector<double> seconds;
  const Clock::time_point start = Clock::now();
  while (seconds.size() < kMaxReps) {
    const Clock::time_point t0 = Clock::now();
    FERRY_RETURN_IF_ERROR(bench.run(which.mode, which.direction));
    const Clock::time_point t1 = Clock::now();
    seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    if (seconds.size() >= kMinReps && t1 - start >= min_time) break;
  }
  std::sort(seconds.begin(), seconds.end());
  Measurement m;
  m.size = size;
  m.which = which;
  m.reps = seconds.size();
  const std::size_t mid = seconds.size() / 2;
  m.median_seconds = seconds.size() % 2 == 1 ? seconds[mid] : (seconds[mid - 1] + seconds[mid]) / 2;
  m.best_seconds = seconds.front();
  return m;
}

// CPU time per small pooled transfer as an application issues it (lease, record, submit),
// without waiting for each: the overhead ferry adds on top of the copy itself.
Result<double> measure_submit_overhead_us(const Device& device) {
  constexpr std::uint64_t kBytes = 4096;
  constexpr int kWarmup = 200;
  constexpr int kCount = 2000;
  FERRY_ASSIGN_OR_RETURN(StagingPool pool,
                         device.create_staging_pool({.kind = MemoryKind::host_upload,
                                                     .slab_bytes = 16 * kMiB,
                                                     .max_slabs = 1,
                                                     .reserved_slabs = 1}));
  FERRY_ASSIGN_OR_RETURN(Buffer target, device.create_buffer(kBytes));
  const Queue queue = device.queue(QueueKind::upload);
  auto one = [&]() -> Status {
    FERRY_ASSIGN_OR_RETURN(Lease lease, pool.acquire(kBytes));
    CommandList commands;
    FERRY_RETURN_IF_ERROR(commands.copy(lease, 0, target, 0, kBytes));
    return queue.submit(std::move(commands)).status();
  };
  for (int i = 0; i < kWarmup; ++i) FERRY_RETURN_IF_ERROR(one());
  FERRY_RETURN_IF_ERROR(queue.wait_idle());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCount; ++i) FERRY_RETURN_IF_ERROR(one());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  FERRY_RETURN_IF_ERROR(queue.wait_idle());
  return seconds / kCount * 1e6;
}

// ---- output ------------------------------------------------------------------------------

}  // namespace

int run_bench_transfer(const std::vector<std::string_view>& args) {
  bool help = false;
  Parsed<BenchOptions> parsed = parse_options(args, help);
  if (!parsed.ok()) return usage_error(parsed.error);
  if (help) {
    std::cout << kBenchTransferHelp;
    return kExitOk;
  }
  Report report;
  report.command = command_line("ferry bench transfer", args);
  report.options = *parsed.value;
  const BenchOptions& options = report.options;
  report.min_time_ms = options.min_time_ms.value_or(options.quick ? 50 : 200);

  std::optional<Device> opened = open_bench_device(options);
  if (!opened) return kExitFailure;
  Device device = std::move(*opened);
  report.device = device.info();
  report.date = utc_timestamp();
  plan_sizes(options, report.device, report);
  if (report.sizes.empty()) {
    std::cerr << "ferry: error: no size to measure on " << device_label(report.device) << ":\n";
    for (const auto& skipped : report.skipped) {
      std::cerr << "  " << format_bytes(skipped.size) << ": " << skipped.reason << "\n";
    }
    return kExitFailure;
  }

  Result<std::unique_ptr<TransferBench>> created = TransferBench::create(device, options.transfer);
  if (!created.ok()) return library_error(created.status(), "setting up the benchmark");
  std::unique_ptr<TransferBench> bench = std::move(created).value();

  const bool progress = !options.json && isatty(STDERR_FILENO) != 0;
  std::uint64_t seed = 0x5eed;
  for (std::size_t i = 0; i < report.sizes.size(); ++i) {
    const std::uint64_t size = report.sizes[i];
    if (progress) {
      std::cerr << "ferry: measuring " << format_bytes(size) << " (" << i + 1 << "/"
                << report.sizes.size() << ")\n";
    }
    if (Status status = bench->prepare(size, seed++); !status.ok()) {
      return library_error(status, "preparing " + format_bytes(size));
    }
    for (const Case& which : kCases) {
      Result<Measurement> m =
          measure(*bench, size, which, std::chrono::milliseconds(report.min_time_ms));
      if (!m.ok()) {
        return library_error(m.status(), std::string(to_string(which.mode)) + " " +
                                             std::string(to_string(which.direction)) + " " +
                                             format_bytes(size));
      }
      report.results.push_back(*m);
    }
    if (report.device.backend == Backend::cuda) {
      report.cuda_baselines.emplace_back(
          size, measure_cuda_memcpy(options.device_index, size,
                                    static_cast<double>(report.min_time_ms)));
    }
  }
  Result<double> overhead = measure_submit_overhead_us(device);
  if (!overhead.ok()) return library_error(overhead.status(), "measuring the submit overhead");
  report.submit_overhead_us = *overhead;
  report.upload_pool = bench->upload_pool_stats();
  report.readback_pool = bench->readback_pool_stats();
  bench.reset();  // buffers and pools go before the device closes
  report.validation_messages = device.validation_message_count();
  if (Status status = device.close(std::chrono::seconds(60)); !status.ok()) {
    return library_error(status, "closing the device");
  }

  return emit_bench_report(
      options.json, options.json_file, report.validation_messages,
      [&](std::ostream& out) { print_report_table(report, out); },
      [&](std::ostream& out) { print_report_json(report, out); });
}

}  // namespace ferry::cli
