// Tracing (DeviceOptions::trace_path, FERRY_TRACE): the file is valid Chrome trace-event JSON,
// spans end after they start and nest per track, every submission of a known workload appears
// exactly once on its queue's track (and on its device track where the backend times execution),
// device and host clocks agree, devices share a file, and no trace writes nothing.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/temp_dir.hpp"
#include "harness.hpp"
#include "test_data.hpp"

using ferry::Buffer;
using ferry::CommandList;
using ferry::Device;
using ferry::ErrorCode;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;
using nlohmann::json;

namespace {

// A span of the trace, in nanoseconds (the file has microseconds with three decimals: exact).
struct Span {
  std::string name;
  std::int64_t start = 0;
  std::int64_t end = 0;
  json args;
};

std::int64_t to_ns(const json& us) {
  return static_cast<std::int64_t>(std::llround(us.get<double>() * 1000.0));
}

class Trace {
 public:
  explicit Trace(const std::filesystem::path& path) {
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), "no trace file at ", path.string());
    file = json::parse(in, nullptr, /*allow_exceptions=*/false);
    REQUIRE_MESSAGE(!file.is_discarded(), "the trace is not valid JSON");
    REQUIRE(file.contains("traceEvents"));
    REQUIRE(file["traceEvents"].is_array());
    for (const json& event : file["traceEvents"]) {
      const std::string phase = event.at("ph").get<std::string>();
      const int pid = event.at("pid").get<int>();
      if (phase == "M") {
        const std::string name = event.at("name").get<std::string>();
        if (name == "process_name") processes[pid] = event["args"]["name"].get<std::string>();
        if (name == "thread_name") {
          track_names[{pid, event.at("tid").get<int>()}] = event["args"]["name"].get<std::string>();
        }
      } else if (phase == "X") {
        Span span{event.at("name").get<std::string>(), to_ns(event.at("ts")), 0,
                  event.value("args", json::object())};
        span.end = span.start + to_ns(event.at("dur"));
        tracks[{pid, event.at("tid").get<int>()}].push_back(span);
      } else if (phase == "C") {
        counters[{pid, event.at("name").get<std::string>()}].push_back(
            event.at("args").at("value").get<std::int64_t>());
      } else if (phase == "i") {
        instants[{pid, event.at("tid").get<int>()}].push_back(event.at("name").get<std::string>());
      }
    }
  }

  // The process of the device whose process name starts with `prefix`; -1 if none.
  int pid_of(const std::string& prefix) const {
    for (const auto& [pid, name] : processes) {
      if (name.rfind(prefix, 0) == 0) return pid;
    }
    return -1;
  }
  // The track of `pid` named `name`; -1 if none.
  int tid_of(int pid, const std::string& name) const {
    for (const auto& [key, track_name] : track_names) {
      if (key.first == pid && track_name == name) return key.second;
    }
    return -1;
  }
  std::vector<Span> spans(int pid, int tid, const std::string& name) const {
    std::vector<Span> out;
    if (auto it = tracks.find({pid, tid}); it != tracks.end()) {
      for (const Span& span : it->second) {
        if (span.name == name) out.push_back(span);
      }
    }
    return out;
  }
  std::vector<Span> spans_anywhere(int pid, const std::string& name) const {
    std::vector<Span> out;
    for (const auto& [key, list] : tracks) {
      if (key.first != pid) continue;
      for (const Span& span : list) {
        if (span.name == name) out.push_back(span);
      }
    }
    return out;
  }

  // Every span ends at or after its start, and spans of one track nest (a span starting inside
  // another ends inside it too).
  void check_nesting() const {
    for (auto [key, list] : tracks) {
      std::sort(list.begin(), list.end(), [](const Span& a, const Span& b) {
        return a.start != b.start ? a.start < b.start : a.end > b.end;
      });
      std::vector<const Span*> open;
      for (const Span& span : list) {
        CHECK(span.end >= span.start);
        while (!open.empty() && open.back()->end <= span.start) open.pop_back();
        if (!open.empty()) {
          INFO("track ", key.second, " of process ", key.first, ": '", span.name,
               "' overlaps '", open.back()->name, "' without nesting in it");
          CHECK(span.end <= open.back()->end);
        }
        open.push_back(&span);
      }
    }
  }

  json file;
  std::map<int, std::string> processes;  // by pid
  std::map<std::pair<int, int>, std::string> track_names;
  std::map<std::pair<int, int>, std::vector<Span>> tracks;
  std::map<std::pair<int, std::string>, std::vector<std::int64_t>> counters;
  std::map<std::pair<int, int>, std::vector<std::string>> instants;
};

std::string track_prefix(QueueKind kind) {
  return std::string(ferry::to_string(kind)) + " queue: ";
}

// The submission numbers of a list of spans, sorted.
std::vector<std::int64_t> submissions_of(const std::vector<Span>& spans) {
  std::vector<std::int64_t> out;
  for (const Span& span : spans) out.push_back(span.args.at("submission").get<std::int64_t>());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::int64_t> one_to(std::uint64_t count) {
  std::vector<std::int64_t> out;
  for (std::uint64_t i = 1; i <= count; ++i) out.push_back(static_cast<std::int64_t>(i));
  return out;
}

// A known workload: single copies on the upload queue, each waited for; fills on the compute
// queue (one submission of two commands); a chunked upload and download. Returns how many
// submissions each queue got.
struct Workload {
  std::uint64_t bytes = 0;  // of each direct copy, and of the chunked upload and download
  std::uint64_t direct_copies = 0;
  std::uint64_t chunks = 0;
  std::uint64_t submissions[ferry::kQueueKindCount] = {};
};

Workload run_workload(BackendUnderTest& t, const Device& device) {
  Workload w;
  const std::uint64_t bytes = 3 * (64ull << 10) + 4 * (t.rng() % 1000) + 4;
  w.bytes = bytes;
  const Buffer staging = REQUIRE_VALUE(device.create_buffer(bytes, MemoryKind::host_upload));
  const Buffer target = REQUIRE_VALUE(device.create_buffer(bytes, MemoryKind::device));
  w.direct_copies = 3 + t.rng() % 4;
  const ferry::Queue upload_queue = device.queue(QueueKind::upload);
  for (std::uint64_t i = 0; i < w.direct_copies; ++i) {
    CommandList copy;
    REQUIRE_OK(copy.copy(staging, 0, target, 0, bytes));
    const ferry::TimelinePoint done = REQUIRE_VALUE(upload_queue.submit(std::move(copy)));
    REQUIRE_OK(done.wait(ferry_test::kLongWait));
  }
  CommandList fills;
  REQUIRE_OK(ferry::fill(fills, target, 0, bytes / 2, 0x01020304u));
  REQUIRE_OK(ferry::fill(fills, target, bytes / 2, bytes - bytes / 2, 0x05060708u));
  const ferry::TimelinePoint filled =
      REQUIRE_VALUE(device.queue(QueueKind::compute).submit(std::move(fills)));

  // Chunked transfers through small pools: several chunks each.
  const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, bytes);
  const ferry::StagingPool up_pool = REQUIRE_VALUE(device.create_staging_pool(
      ferry_test::small_pool(MemoryKind::host_upload, 64ull << 10, 2)));
  const ferry::StagingPool down_pool = REQUIRE_VALUE(device.create_staging_pool(
      ferry_test::small_pool(MemoryKind::host_readback, 64ull << 10, 2)));
  ferry::TransferOptions options;
  options.chunk_bytes = 64ull << 10;
  w.chunks = (bytes + options.chunk_bytes - 1) / options.chunk_bytes;
  ferry::SubmitSync after_fill;  // the upload overwrites what the fills wrote
  after_fill.wait.push_back(filled);
  const ferry::TimelinePoint uploaded = REQUIRE_VALUE(
      ferry::upload(upload_queue, up_pool, data, target, 0, after_fill, options));
  std::vector<std::byte> back(bytes);
  ferry::SubmitSync after_upload;
  after_upload.wait.push_back(uploaded);
  REQUIRE_OK(ferry::download(device.queue(QueueKind::download), down_pool, target, 0, back,
                             after_upload, options));
  CHECK(back == data);
  REQUIRE_OK(device.wait_idle(ferry_test::kLongWait));
  for (int q = 0; q < ferry::kQueueKindCount; ++q) {
    w.submissions[q] = device.queue(static_cast<QueueKind>(q)).progress().submitted_value();
  }
  CHECK(w.submissions[static_cast<int>(QueueKind::upload)] == w.direct_copies + w.chunks);
  CHECK(w.submissions[static_cast<int>(QueueKind::compute)] == 1);
  CHECK(w.submissions[static_cast<int>(QueueKind::download)] == w.chunks);
  return w;
}

ferry::DeviceOptions traced_options(const BackendUnderTest& t, const std::filesystem::path& path) {
  ferry::DeviceOptions options = t.options;
  options.trace_path = path.string();
  return options;
}

// Whether the queue's device execution is timed: else its device track says it cannot be.
bool device_timed(const Trace& trace, int pid, QueueKind kind) {
  const int device_tid = trace.tid_of(pid, track_prefix(kind) + "device execution");
  const auto said = trace.instants.find({pid, device_tid});
  if (said == trace.instants.end()) return true;
  for (const std::string& instant : said->second) {
    if (instant.find("cannot time") != std::string::npos) return false;
  }
  return true;
}

// What a backend's trace shows of device execution.
struct Expected {
  bool timed = false;          // every queue's submissions (else each queue says it cannot be)
  bool command_spans = false;  // each command's too
};
Expected expected_of(ferry::Backend backend) {
  // FERRY_VULKAN_TIMESTAMP_BITS=0 (a ctest variant): no Vulkan queue family has timestamps.
  const char* bits = std::getenv("FERRY_VULKAN_TIMESTAMP_BITS");
  const bool vulkan_timed = bits == nullptr || std::string_view(bits) != "0";
  return {backend != ferry::Backend::vulkan || vulkan_timed, backend == ferry::Backend::cpu};
}

// Checks one device's part of the trace against the workload it ran.
void check_device_trace(const Trace& trace, int pid, const Workload& w, const Expected& expected) {
  REQUIRE(pid > 0);
  const bool command_spans = expected.command_spans;
  for (int q = 0; q < ferry::kQueueKindCount; ++q) {
    const auto kind = static_cast<QueueKind>(q);
    INFO("queue ", ferry::to_string(kind));
    const int host_tid = trace.tid_of(pid, track_prefix(kind) + "submissions");
    REQUIRE(host_tid > 0);
    const std::vector<Span> dispatches = trace.spans(pid, host_tid, "dispatch");
    CHECK(submissions_of(dispatches) == one_to(w.submissions[q]));
    std::int64_t commands = 0;
    for (const Span& d : dispatches) commands += d.args.at("commands").get<std::int64_t>();
    CHECK(static_cast<std::uint64_t>(commands) ==
          (kind == QueueKind::compute ? 2 : w.submissions[q]));
    // The bytes each dispatch copies: the direct copies and the chunked transfer's.
    std::int64_t copy_bytes = 0;
    for (const Span& d : dispatches) copy_bytes += d.args.at("copy_bytes").get<std::int64_t>();
    const std::uint64_t copied = kind == QueueKind::upload     ? (w.direct_copies + 1) * w.bytes
                                 : kind == QueueKind::download ? w.bytes
                                                               : 0;
    CHECK(static_cast<std::uint64_t>(copy_bytes) == copied);
    CHECK(submissions_of(trace.spans(pid, host_tid, "submit")) == one_to(w.submissions[q]));
    CHECK(device_timed(trace, pid, kind) == expected.timed);
    if (!expected.timed) continue;
    const int device_tid = trace.tid_of(pid, track_prefix(kind) + "device execution");
    REQUIRE(device_tid > 0);
    const std::vector<Span> executions = trace.spans(pid, device_tid, "execution");
    CHECK(submissions_of(executions) == one_to(w.submissions[q]));
    // Clocks agree: no submission runs before it was handed to the backend (within the bound a
    // device clock's calibration may be off by).
    constexpr std::int64_t kClockBoundNs = 1'000'000;
    std::map<std::int64_t, const Span*> dispatch_of;
    for (const Span& d : dispatches) dispatch_of[d.args.at("submission").get<std::int64_t>()] = &d;
    for (const Span& e : executions) {
      const Span* d = dispatch_of[e.args.at("submission").get<std::int64_t>()];
      REQUIRE(d != nullptr);
      CHECK(e.start >= d->start - kClockBoundNs);
    }
    // Its commands, within it (checked by the nesting), where the backend times them.
    const std::size_t timed_commands = trace.spans(pid, device_tid, "copy").size() +
                                       trace.spans(pid, device_tid, "fill").size();
    CHECK(timed_commands == (!command_spans ? 0 : kind == QueueKind::compute ? 2 : w.submissions[q]));
  }
  // ... and nothing runs after the host saw it done: each direct copy's wait ends after it.
  if (expected.timed) {
    const int upload_device =
        trace.tid_of(pid, track_prefix(QueueKind::upload) + "device execution");
    std::map<std::int64_t, std::int64_t> ends;
    for (const Span& e : trace.spans(pid, upload_device, "execution")) {
      ends[e.args.at("submission").get<std::int64_t>()] = e.end;
    }
    // The direct copies' waits are those before the chunked upload (which waits on others).
    const std::vector<Span> uploads = trace.spans_anywhere(pid, "ferry::upload");
    REQUIRE(uploads.size() == 1);
    std::size_t waits_checked = 0;
    for (const Span& wait : trace.spans_anywhere(pid, "Timeline::wait")) {
      if (wait.start >= uploads[0].start) continue;
      const std::int64_t value = wait.args.at("value").get<std::int64_t>();
      CHECK(ends.at(value) <= wait.end + 1'000'000);
      ++waits_checked;
    }
    CHECK(waits_checked >= w.direct_copies);
  }
  // Host tracks: the chunked transfers and their chunks.
  CHECK(trace.spans_anywhere(pid, "ferry::upload").size() == 1);
  CHECK(trace.spans_anywhere(pid, "upload chunk").size() == w.chunks);
  CHECK(trace.spans_anywhere(pid, "ferry::download").size() == 1);
  CHECK(trace.spans_anywhere(pid, "download chunk: submit").size() == w.chunks);
  CHECK(trace.spans_anywhere(pid, "StagingPool::acquire").size() >= w.chunks);
  // Counters: each staging pool back to 0 bytes once everything retired; queues' in flight.
  std::size_t pools = 0;
  for (const auto& [key, values] : trace.counters) {
    if (key.first != pid) continue;
    for (const std::int64_t value : values) CHECK(value >= 0);
    if (key.second.rfind("staging pool", 0) == 0) {
      ++pools;
      CHECK(values.back() == 0);
    }
  }
  CHECK(pools == 2);
  CHECK(trace.counters.count({pid, "upload queue: submissions in flight"}) == 1);
}

}  // namespace

TEST_CASE("trace: a known workload, each submission once, spans nested, clocks agreeing") {
  ferry_test::for_each_backend({"fill"}, [](BackendUnderTest& t) {
    const ferry::test::TempDir dir("ferry-trace");
    const std::filesystem::path path = dir / "trace.json";
    Workload w;
    {
      Device device = REQUIRE_VALUE(Device::open(ferry::to_string(t.backend), 0,
                                                 traced_options(t, path)));
      w = run_workload(t, device);
      REQUIRE_OK(device.close());
    }
    const Trace trace(path);
    trace.check_nesting();
    const Device& reference = t.device;
    const int pid = trace.pid_of("ferry " + std::string(ferry::to_string(t.backend)) + " 0: " +
                                 reference.info().name);
    check_device_trace(trace, pid, w, expected_of(t.backend));
  });
}

TEST_CASE("trace: devices share a file, written when the last is done; FERRY_TRACE; off writes "
          "nothing") {
  ferry_test::for_each_backend({"fill"}, [](BackendUnderTest& t) {
    const ferry::test::TempDir dir("ferry-trace");
    const std::filesystem::path path = dir / "shared.json";
    Workload first_work, second_work;
    {
      Device first = REQUIRE_VALUE(Device::open(ferry::to_string(t.backend), 0,
                                                traced_options(t, path)));
      Device second = REQUIRE_VALUE(Device::open(ferry::to_string(t.backend), 0,
                                                 traced_options(t, path)));
      first_work = run_workload(t, first);
      second_work = run_workload(t, second);
      REQUIRE_OK(first.close());
      // Not written yet: the second device still traces into it.
      CHECK(json::parse(std::ifstream(path), nullptr, false).is_discarded());
      // The last handle going (no close) writes it too.
    }
    {
      const Trace trace(path);
      trace.check_nesting();
      REQUIRE(trace.processes.size() == 2);
      // Which process is which: the first opened is process 1.
      check_device_trace(trace, 1, first_work, expected_of(t.backend));
      check_device_trace(trace, 2, second_work, expected_of(t.backend));
    }

    // The environment variable, when the option is empty.
    if (std::getenv("FERRY_TRACE") == nullptr) {
      const std::filesystem::path env_path = dir / "from_env.json";
      REQUIRE(::setenv("FERRY_TRACE", env_path.c_str(), 1) == 0);
      ferry::Result<Device> opened = Device::open(ferry::to_string(t.backend), 0, t.options);
      ::unsetenv("FERRY_TRACE");
      Device device = REQUIRE_VALUE(std::move(opened));
      const Workload w = run_workload(t, device);
      REQUIRE_OK(device.close());
      const Trace trace(env_path);
      check_device_trace(trace, 1, w, expected_of(t.backend));
    }

    // No trace asked for (FERRY_TRACE set but empty counts as unset): nothing is written, the
    // files of the traces above stay as they were.
    if (std::getenv("FERRY_TRACE") == nullptr) {
      std::map<std::filesystem::path, std::uintmax_t> before;
      for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        before[entry.path()] = entry.file_size();
      }
      REQUIRE(::setenv("FERRY_TRACE", "", 1) == 0);
      ferry::Result<Device> opened = Device::open(ferry::to_string(t.backend), 0, t.options);
      ::unsetenv("FERRY_TRACE");
      Device device = REQUIRE_VALUE(std::move(opened));
      (void)run_workload(t, device);
      REQUIRE_OK(device.close());
      std::map<std::filesystem::path, std::uintmax_t> after;
      for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        after[entry.path()] = entry.file_size();
      }
      CHECK(after == before);
    }
  });
}

TEST_CASE("trace: a file that cannot be created fails Device::open, naming it") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::test::TempDir dir("ferry-trace");
    const std::filesystem::path path = dir / "no such folder" / "trace.json";
    const ferry::Result<Device> device =
        Device::open(ferry::to_string(t.backend), 0, traced_options(t, path));
    REQUIRE_FALSE(device.ok());
    CHECK(device.status().code() == ErrorCode::unavailable);
    CHECK(device.status().message().find(path.string()) != std::string::npos);
  });
}
