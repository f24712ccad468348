#include "bench_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

namespace ferry::cli {

using Clock = std::chrono::steady_clock;

namespace {

// Set by the SIGINT handler (a lock-free atomic is async-signal-safe); read between steps.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void on_interrupt(int) { g_interrupted.store(true, std::memory_order_relaxed); }

// The first Ctrl-C asks the bench to stop at its next step and print what it has; the handler
// is reset on delivery, so a second Ctrl-C ends the process at once as usual.
void catch_interrupt() {
  struct sigaction action = {};
  action.sa_handler = on_interrupt;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
}

bool interrupted() { return g_interrupted.load(std::memory_order_relaxed); }

}  // namespace

Status check_interrupt() {
  return interrupted() ? Status(ErrorCode::failed_precondition, "interrupted") : ok_status();
}

Result<double> wall_time(const std::function<Status()>& body) {
  const Clock::time_point start = Clock::now();
  FERRY_RETURN_IF_ERROR(body());
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Result<Timing> repeat(const RepeatSettings& settings, const Repetition& rep,
                      const std::function<Status()>& settle,
                      const std::function<Status()>& finish) {
  std::uint64_t index = 0;
  for (; index < settings.warmup; ++index) {
    FERRY_RETURN_IF_ERROR(check_interrupt());
    FERRY_RETURN_IF_ERROR(rep(index).status());
  }
  if (settle) FERRY_RETURN_IF_ERROR(settle());
  std::vector<double> samples;
  const Clock::time_point start = Clock::now();
  while (samples.size() < settings.max_reps) {
    FERRY_RETURN_IF_ERROR(check_interrupt());
    FERRY_ASSIGN_OR_RETURN(double seconds, rep(index++));
    samples.push_back(seconds);
    if (samples.size() >= settings.min_reps && Clock::now() - start >= settings.min_time) break;
  }
  if (finish) FERRY_RETURN_IF_ERROR(finish());
  Timing timing;
  timing.window_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  timing.reps = samples.size();
  if (samples.empty()) return timing;
  std::sort(samples.begin(), samples.end());
  const std::size_t mid = samples.size() / 2;
  timing.median_seconds =
      samples.size() % 2 == 1 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
  timing.best_seconds = samples.front();
  return timing;
}

Result<Timing> repeat_steps(const RepeatSettings& settings,
                            const std::function<Status(std::uint64_t)>& step,
                            const std::function<Status()>& settle,
                            const std::function<Status()>& finish) {
  const Repetition rep = [&](std::uint64_t i) -> Result<double> {
    FERRY_RETURN_IF_ERROR(step(i));
    return 0.0;
  };
  return repeat(settings, rep, settle, finish);
}

Result<Timing> time_each(const RepeatSettings& settings, const std::function<Status()>& body) {
  return repeat(settings, [&](std::uint64_t) { return wall_time(body); });
}

Result<ListTiming> time_lists(const Queue& queue,
                              const std::function<Result<CommandList>()>& record,
                              const ListSettings& settings) {
  const RepeatSettings repeat_settings{
      .warmup = 1, .min_reps = 3, .max_reps = 100'000, .min_time = settings.min_time};
  FERRY_ASSIGN_OR_RETURN(
      Timing lists, repeat(repeat_settings, [&](std::uint64_t) -> Result<double> {
        FERRY_ASSIGN_OR_RETURN(CommandList list, record());
        return wall_time([&]() -> Status {
          FERRY_ASSIGN_OR_RETURN(TimelinePoint done, queue.submit(std::move(list)));
          return done.wait(kWaitTimeout);
        });
      }));
  return ListTiming{settings.commands, 0, lists};
}

std::uint64_t mix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill_random(std::span<std::byte> bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i < bytes.size(); i += 8) {
    const std::uint64_t z = mix64(seed + i / 8 * 0x9E3779B97F4A7C15ull);
    std::memcpy(bytes.data() + i, &z, std::min<std::size_t>(8, bytes.size() - i));
  }
}

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::string memory_shortfall(const DeviceInfo& device, std::uint64_t device_need,
                             std::uint64_t host_need) {
  std::uint64_t host_available = 0;  // MemAvailable; 0 when unknown
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  for (std::uint64_t kib = 0; meminfo >> key >> kib >> unit;) {
    if (key == "MemAvailable:") host_available = kib * 1024;
  }
  if (device.device_memory_bytes != 0 && device_need > device.device_memory_bytes / 10 * 9) {
    // 10% is left for the driver, the staging pools and fragmentation.
    return "needs " + format_bytes(device_need) + " of device memory, more than 90% of the " +
           format_bytes(device.device_memory_bytes) + " the device has";
  }
  if (device.is_cpu) host_need += device_need;
  if (host_available != 0 && host_need > host_available / 10 * 8) {
    return "needs about " + format_bytes(host_need) + " of host memory, " +
           format_bytes(host_available) + " available";
  }
  return {};
}

Result<std::vector<Buffer>> create_buffers(const Device& device, std::size_t count,
                                           std::uint64_t bytes, MemoryKind kind) {
  std::vector<Buffer> buffers(count);
  for (Buffer& buffer : buffers) {
    FERRY_ASSIGN_OR_RETURN(buffer, device.create_buffer(bytes, kind));
  }
  return buffers;
}

Result<Buffer> pinned_copy(const Device& device, std::span<const std::byte> bytes) {
  FERRY_ASSIGN_OR_RETURN(Buffer buffer,
                         device.create_buffer(bytes.size(), MemoryKind::host_upload));
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> host, buffer.host_span());
  std::memcpy(host.data(), bytes.data(), bytes.size());
  return buffer;
}

Result<StagingPool> reserved_pool(const Device& device, MemoryKind kind, std::uint64_t slab_bytes,
                                  std::uint32_t slabs) {
  return device.create_staging_pool(
      {.kind = kind, .slab_bytes = slab_bytes, .max_slabs = slabs, .reserved_slabs = slabs});
}

Status copy_and_wait(const Queue& queue, const BufferRef& src, const BufferRef& dst,
                     std::uint64_t bytes, const TimelinePoint& after) {
  CommandList commands;
  FERRY_RETURN_IF_ERROR(commands.copy(src, 0, dst, 0, bytes));
  SubmitSync sync;
  if (after.timeline) sync.wait.push_back(after);
  FERRY_ASSIGN_OR_RETURN(TimelinePoint done, queue.submit(std::move(commands), sync));
  return done.wait(kWaitTimeout);
}

Result<std::vector<std::byte>> read_back(const Device& device, const BufferRef& buffer,
                                         std::uint64_t bytes) {
  FERRY_ASSIGN_OR_RETURN(Buffer readback, device.create_buffer(bytes, MemoryKind::host_readback));
  FERRY_RETURN_IF_ERROR(copy_and_wait(device.queue(QueueKind::download), buffer, readback, bytes));
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> host, readback.host_span());
  return std::vector<std::byte>(host.begin(), host.end());
}

double gbps(std::uint64_t bytes, double seconds) {
  return static_cast<double>(bytes) / seconds / 1e9;
}

Status compare_bytes(std::span<const std::byte> actual, std::span<const std::byte> expected,
                     std::string_view what) {
  const std::size_t size = std::min(actual.size(), expected.size());
  if (actual.size() == expected.size() && std::memcmp(actual.data(), expected.data(), size) == 0)
    return ok_status();
  std::size_t first = 0;
  while (first < size && actual[first] == expected[first]) ++first;
  std::uint64_t wrong = 0;
  for (std::size_t i = first; i < size; ++i) wrong += actual[i] != expected[i] ? 1 : 0;
  char detail[160];
  if (first == size) {
    std::snprintf(detail, sizeof detail, ": %zu bytes, expected %zu", actual.size(),
                  expected.size());
  } else {
    std::snprintf(detail, sizeof detail,
                  ": %llu of %zu bytes wrong, first at offset %zu (expected 0x%02x, got 0x%02x)",
                  static_cast<unsigned long long>(wrong), size, first,
                  std::to_integer<unsigned>(expected[first]),
                  std::to_integer<unsigned>(actual[first]));
  }
  return Status(ErrorCode::internal, "data mismatch in " + std::string(what) + detail);
}

Status Bench::progress(const std::string& what) const {
  FERRY_RETURN_IF_ERROR(check_interrupt());
  if (options.flag("--json") || isatty(STDERR_FILENO) == 0) return ok_status();
  static const auto start = std::chrono::steady_clock::now();  // the first progress line
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - start).count();
  std::cerr << "ferry: [" << seconds << " s] " << what << "\n";
  return ok_status();
}

void Bench::publish() {
  if (options.flag("--json")) return;
  render_text_new(report, shown, std::cout);
  std::cout.flush();
}

bool Bench::fits(std::vector<Value> item, std::uint64_t device_need, std::uint64_t host_need) {
  std::string why = memory_shortfall(device.info(), device_need, host_need);
  if (why.empty()) return true;
  item.emplace_back(std::move(why));
  skipped.add_row(std::move(item));
  return false;
}

Status Bench::end_skipped(bool nothing_measured) {
  if (skipped.rows.empty()) return ok_status();
  std::string reasons;
  for (const std::vector<Value>& row : skipped.rows) {
    reasons += "; " + format_value(row.front(), skipped.columns.front().unit) + ": " +
               format_value(row.back(), Unit::text);
  }
  report.sections.push_back(std::move(skipped));
  if (!nothing_measured) return ok_status();
  return Status(ErrorCode::resource_exhausted, "nothing to measure" + reasons);
}

int run_bench(const Options& options, const std::string& command_line, std::string tool,
              std::initializer_list<QueueKind> queues, bool with_reference,
              const std::function<Status(Bench&)>& body) {
  const std::string backend = options.text("--backend");
  const auto index = static_cast<int>(options.number("--device"));
  DeviceOptions traced = device_options();
  traced.trace_path = options.text("--trace");  // the benched device only, not the reference
  Result<Device> device = Device::open(backend, index, traced);
  if (!device.ok()) {
    return library_error(device.status(),
                         "opening " + backend + " device " + std::to_string(index));
  }
  Bench bench{options, std::move(device).value(), {}, {}};
  if (with_reference) {
    Result<Device> reference = Device::open("cpu", 0, device_options());
    if (!reference.ok()) return library_error(reference.status(), "opening the CPU reference");
    bench.reference = std::move(reference).value();
  }
  const DeviceInfo& info = bench.device.info();
  std::string queue_text;
  for (QueueKind kind : queues) {
    queue_text += (queue_text.empty() ? "" : "; ") + std::string(to_string(kind)) + " ?";
    for (const auto& queue : info.queues) {
      if (queue.kind != kind) continue;
      queue_text.back() = 'f';  // "upload family 1 #0 (shared)"
      queue_text += "amily " + std::to_string(queue.family) + " #" + std::to_string(queue.index) +
                    (queue.shared ? " (shared)" : "");
    }
  }
  bench.report.tool = std::move(tool);
  bench.report.header = {
      {"date", "date", utc_timestamp()},
      {"command", "command", command_line},
      {"device", "device",
       std::string(to_string(info.backend)) + ":" + std::to_string(info.index) + " " + info.name +
           (info.is_cpu ? " [CPU implementation]" : "")},
      {"", "backend", std::string(to_string(info.backend)), Unit::text, true},
      {"", "device_index", std::uint64_t(info.index), Unit::count, true},
      {"", "is_cpu", info.is_cpu, Unit::flag, true},
      {"driver", "driver", info.driver.empty() ? "-" : info.driver},
      {"search", "search_path", info.search_path.empty() ? "-" : info.search_path},
      {"memory", "memory",
       "device " + format_bytes(info.device_memory_bytes) + ", host-visible " +
           format_bytes(info.host_visible_memory_bytes)},
      {"", "device_memory_bytes", info.device_memory_bytes, Unit::bytes, true},
      {"queues", "queues", queue_text},
  };
  // Text: what runs is on the screen at once; the tables follow as they are measured.
  const bool json = options.flag("--json");
  const auto start = Clock::now();
  catch_interrupt();
  bench.publish();
  Status status = body(bench);
  const bool stopped = interrupted();
  if (status.ok() || stopped) status = bench.device.wait_idle(kWaitTimeout);
  if (!status.ok()) return library_error(status, bench.report.tool);
  const std::uint64_t validation_messages = bench.device.validation_message_count();
  bench.report.header.push_back(
      {"", "validation_messages", validation_messages, Unit::count, true});
  if (stopped) bench.report.header.push_back({"", "interrupted", true, Unit::flag, true});
  if (bench.reference)
    (void)bench.reference.close(std::chrono::seconds(60));  // it has done its part
  if (Status closed = bench.device.close(std::chrono::seconds(60)); !closed.ok()) {
    return library_error(closed, "closing the device");
  }
  if (json) {
    render_json(bench.report, std::cout);
  } else {
    bench.publish();
    if (stopped) {
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
      std::cout << "\nInterrupted (Ctrl-C) after " << seconds.count()
                << " s: the tables above are what was measured until then.\n";
    } else {
      render_text_summary(bench.report, std::cout);
    }
  }
  std::cout.flush();
  if (const std::string path = options.text("--json-file"); !path.empty()) {
    std::ofstream file(path);
    render_json(bench.report, file);
    errno = 0;
    file.close();
    if (!file) {
      std::cerr << "ferry: error: cannot write " << path << ": "
                << (errno != 0 ? std::strerror(errno) : "write failed") << "\n";
      return kExitFailure;
    }
  }
  if (validation_messages != 0) {
    std::cerr << "ferry: error: " << validation_messages
              << " validation messages during the benchmark\n";
    return kExitFailure;
  }
  return stopped ? kExitInterrupted : kExitOk;
}

}  // namespace ferry::cli
