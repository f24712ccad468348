#include "core/trace.hpp"

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "core/state.hpp"

namespace ferry::detail {
namespace {

// Tracks of a device's process: per queue its host side, then its device execution; host
// threads from kFirstThreadTrack, numbered per process in the order they first trace something.
constexpr int kFirstThreadTrack = 100;

struct TraceEvent {
  char phase = 'X';  // X span, C counter, s/f flow start/end, i instant
  int pid = 0;
  int tid = 0;
  const char* name = "";
  std::int64_t ts_ns = 0;
  std::int64_t dur_ns = 0;
  std::uint64_t id = 0;  // flows
  TraceArg args[3];
};

// Names of host threads' tracks, for every file (a thread can trace for several devices).
struct ThreadNames {
  std::mutex mutex;
  std::map<int, std::string> names;
  std::atomic<int> next{kFirstThreadTrack};
};
ThreadNames& thread_names() {
  static ThreadNames* names = new ThreadNames;  // never destroyed: threads may trace at exit
  return *names;
}

thread_local std::string t_thread_name;
thread_local int t_thread_track = 0;

struct FileRegistry {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<TraceFile>> files;
};
FileRegistry& registry() {
  static FileRegistry* files = new FileRegistry;
  return *files;
}

// JSON string contents (names come from ferry and from devices: quotes and control characters
// are escaped, UTF-8 passes through).
void write_escaped(std::FILE* out, std::string_view text) {
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      std::fputc('\\', out);
      std::fputc(c, out);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      std::fprintf(out, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      std::fputc(c, out);
    }
  }
}

// Nanoseconds as the microseconds trace events count in, exactly (three decimals).
void write_us(std::FILE* out, std::int64_t ns) {
  const bool negative = ns < 0;
  const std::uint64_t magnitude =
      negative ? static_cast<std::uint64_t>(-(ns + 1)) + 1 : static_cast<std::uint64_t>(ns);
  std::fprintf(out, "%s%" PRIu64 ".%03" PRIu64, negative ? "-" : "", magnitude / 1000,
               magnitude % 1000);
}

std::string queue_track_name(int tid) {
  const bool device = tid > kQueueKindCount;
  const auto kind = static_cast<QueueKind>(device ? tid - kQueueKindCount - 1 : tid - 1);
  return std::string(to_string(kind)) +
         (device ? " queue: device execution" : " queue: submissions");
}

}  // namespace

// One output file, shared by the devices of the process tracing to its path.
class TraceFile {
 public:
  TraceFile(std::string path, std::FILE* out) : path_(std::move(path)), out_(out) {}
  ~TraceFile() {
    if (out_ != nullptr) std::fclose(out_);
  }

  const std::string& path() const { return path_; }
  std::int64_t epoch_ns() const { return epoch_ns_; }

  // Guarded by the registry's mutex.
  int users = 0;
  int next_pid = 1;

  void add(const TraceEvent& event) noexcept {
    std::lock_guard lock(mutex_);
    if (written_) return;
    try {
      events_.push_back(event);
    } catch (...) {
      ++dropped_;
    }
  }

  const char* intern(std::string text) noexcept {
    std::lock_guard lock(mutex_);
    try {
      return strings_.emplace_back(std::move(text)).c_str();
    } catch (...) {
      return "(name dropped)";
    }
  }

  void name_process(int pid, std::string name) {
    std::lock_guard lock(mutex_);
    processes_.emplace_back(pid, std::move(name));
  }

  // Writes everything recorded; later events are dropped.
  Status write() {
    std::vector<TraceEvent> events;
    std::vector<std::pair<int, std::string>> processes;
    std::uint64_t dropped = 0;
    {
      std::lock_guard lock(mutex_);
      written_ = true;
      events.swap(events_);
      processes = processes_;
      dropped = dropped_;
    }
    std::FILE* out = std::exchange(out_, nullptr);
    if (out == nullptr) {
      return Status(ErrorCode::internal, "trace file '" + path_ + "' written twice");
    }
    std::map<int, std::string> thread_track_names;
    {
      std::lock_guard lock(thread_names().mutex);
      thread_track_names = thread_names().names;
    }

    std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out);
    bool first = true;
    auto begin_event = [&] {
      std::fputs(first ? "" : ",\n", out);
      first = false;
    };
    auto metadata = [&](const char* what, int pid, int tid, std::string_view key,
                        std::string_view text) {
      begin_event();
      std::fprintf(out, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"", pid,
                   tid, what);
      write_escaped(out, key);
      std::fputs("\":\"", out);
      write_escaped(out, text);
      std::fputs("\"}}", out);
    };
    for (const auto& [pid, name] : processes) {
      metadata("process_name", pid, 0, "name", name);
      begin_event();
      std::fprintf(out, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\","
                        "\"args\":{\"sort_index\":%d}}", pid, pid);
    }
    std::set<std::pair<int, int>> tracks;
    for (const TraceEvent& event : events) {
      if (event.phase != 'C') tracks.emplace(event.pid, event.tid);
    }
    for (const auto& [pid, tid] : tracks) {
      std::string name;
      if (tid < kFirstThreadTrack) {
        name = queue_track_name(tid);
      } else if (auto it = thread_track_names.find(tid); it != thread_track_names.end()) {
        name = it->second;
      } else {
        name = "host thread " + std::to_string(tid - kFirstThreadTrack);
      }
      metadata("thread_name", pid, tid, "name", name);
      begin_event();
      std::fprintf(out, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\","
                        "\"args\":{\"sort_index\":%d}}", pid, tid, tid);
    }
    for (const TraceEvent& event : events) {
      begin_event();
      std::fprintf(out, "{\"ph\":\"%c\",\"cat\":\"ferry\",\"pid\":%d,\"tid\":%d,\"name\":\"",
                   event.phase, event.pid, event.tid);
      write_escaped(out, event.name);
      std::fputs("\",\"ts\":", out);
      write_us(out, event.ts_ns - epoch_ns_);
      if (event.phase == 'X') {
        std::fputs(",\"dur\":", out);
        write_us(out, event.dur_ns);
      } else if (event.phase == 's' || event.phase == 'f') {
        std::fprintf(out, ",\"id\":%" PRIu64 "%s", event.id,
                     event.phase == 'f' ? ",\"bp\":\"e\"" : "");
      } else if (event.phase == 'i') {
        std::fputs(",\"s\":\"t\"", out);
      }
      if (event.args[0].key != nullptr) {
        std::fputs(",\"args\":{", out);
        for (int i = 0; i < 3 && event.args[i].key != nullptr; ++i) {
          std::fprintf(out, "%s\"%s\":%" PRId64, i == 0 ? "" : ",", event.args[i].key,
                       event.args[i].value);
        }
        std::fputs("}", out);
      }
      std::fputs("}", out);
    }
    std::fprintf(out, "\n],\"otherData\":{\"dropped_events\":%" PRIu64 "}}\n", dropped);
    const bool failed = std::ferror(out) != 0;
    const int write_errno = errno;
    if (std::fclose(out) != 0 || failed) {
      return Status(ErrorCode::unavailable,
                    "writing the trace file '" + path_ + "' failed: " +
                        std::strerror(failed ? write_errno : errno));
    }
    return Status();
  }

 private:
  const std::string path_;
  std::FILE* out_;
  const std::int64_t epoch_ns_ = trace_now_ns();

  std::mutex mutex_;
  std::vector<TraceEvent> events_;
  std::deque<std::string> strings_;  // interned names; a deque never moves them
  std::vector<std::pair<int, std::string>> processes_;
  std::uint64_t dropped_ = 0;
  bool written_ = false;
};

DeviceTrace* trace_of(const Device& device) noexcept {
  return device.state() ? device.state()->core->trace.get() : nullptr;
}

void name_this_thread(std::string_view name) {
  try {
    t_thread_name = name;
  } catch (...) {  // the track is then "host thread N"
  }
}

int DeviceTrace::this_thread_track() noexcept {
  if (t_thread_track == 0) {
    auto& names = thread_names();
    t_thread_track = names.next.fetch_add(1);
    if (!t_thread_name.empty()) {
      std::lock_guard lock(names.mutex);
      try {
        names.names.emplace(t_thread_track, t_thread_name);
      } catch (...) {
      }
    }
  }
  return t_thread_track;
}

int DeviceTrace::queue_track(QueueKind queue) noexcept { return 1 + static_cast<int>(queue); }
int DeviceTrace::device_track(QueueKind queue) noexcept {
  return 1 + kQueueKindCount + static_cast<int>(queue);
}

Result<std::unique_ptr<DeviceTrace>> DeviceTrace::open(
    const std::string& path, const DeviceInfo& info,
    std::function<void(MessageSeverity, std::string_view)> sink) {
  auto& files = registry();
  std::lock_guard lock(files.mutex);
  std::shared_ptr<TraceFile> file = files.files[path].lock();
  if (!file) {
    // Created now, so that a path that cannot be written fails the device's open instead of
    // losing the trace at the end.
    std::FILE* out = std::fopen(path.c_str(), "w");
    if (out == nullptr) {
      const int open_errno = errno;
      files.files.erase(path);
      return Status(ErrorCode::unavailable,
                    "cannot create the trace file '" + path + "': " + std::strerror(open_errno));
    }
    file = std::make_shared<TraceFile>(path, out);
    files.files[path] = file;
  }
  const int pid = file->next_pid++;
  ++file->users;
  file->name_process(pid, "ferry " + std::string(to_string(info.backend)) + " " +
                              std::to_string(info.index) + ": " + info.name);
  return std::unique_ptr<DeviceTrace>(new DeviceTrace(std::move(file), pid, std::move(sink)));
}

DeviceTrace::DeviceTrace(std::shared_ptr<TraceFile> file, int pid,
                         std::function<void(MessageSeverity, std::string_view)> sink)
    : file_(std::move(file)), pid_(pid), sink_(std::move(sink)) {}

DeviceTrace::~DeviceTrace() { finish_or_report(); }

void DeviceTrace::finish_or_report() noexcept {
  try {
    const Status status = finish();
    if (status.ok()) return;
    // Nobody to return it to: the device's message sink hears it, else stderr (a trace the user
    // asked for must not go missing in silence).
    if (sink_) {
      sink_(MessageSeverity::error, status.message());
    } else {
      std::fprintf(stderr, "ferry: %s\n", status.message().c_str());
    }
  } catch (...) {  // an allocation for the message: nothing more can be said
  }
}

Status DeviceTrace::finish() {
  bool last = false;
  {
    auto& files = registry();
    std::lock_guard lock(files.mutex);
    if (finished_) return Status();
    finished_ = true;
    last = --file_->users == 0;
    if (last) {
      // A device opened later with this path starts a new file.
      auto it = files.files.find(file_->path());
      if (it != files.files.end() && it->second.lock() == file_) files.files.erase(it);
    }
  }
  return last ? file_->write() : Status();
}

void DeviceTrace::span(int track, const char* name, std::int64_t start_ns, std::int64_t end_ns,
                       TraceArg a, TraceArg b, TraceArg c) noexcept {
  TraceEvent event;
  event.phase = 'X';
  event.pid = pid_;
  event.tid = track;
  event.name = name;
  event.ts_ns = start_ns;
  event.dur_ns = end_ns >= start_ns ? end_ns - start_ns : 0;
  event.args[0] = a;
  event.args[1] = b;
  event.args[2] = c;
  file_->add(event);
}

void DeviceTrace::counter(const char* name, std::int64_t value) noexcept {
  TraceEvent event;
  event.phase = 'C';
  event.pid = pid_;
  event.name = name;
  event.ts_ns = trace_now_ns();
  event.args[0] = {"value", value};
  file_->add(event);
}

void DeviceTrace::submission_dispatched(QueueKind queue, std::uint64_t submission,
                                        std::int64_t ts_ns) noexcept {
  submission_arrow('s', queue_track(queue), queue, submission, ts_ns);
}

const char* DeviceTrace::intern(std::string text) noexcept {
  return file_->intern(std::move(text));
}

void DeviceTrace::submission_arrow(char phase, int track, QueueKind queue,
                                   std::uint64_t submission, std::int64_t ts_ns) noexcept {
  TraceEvent event;
  event.phase = phase;
  event.pid = pid_;
  event.tid = track;
  event.name = "submission";
  // Unique in the file: the process, the queue and the submission's number on it.
  event.id = (static_cast<std::uint64_t>(pid_) << 48) |
             (static_cast<std::uint64_t>(queue) << 44) | (submission & ((1ull << 44) - 1));
  event.ts_ns = ts_ns;
  file_->add(event);
}

void DeviceTrace::submission_ran(QueueKind queue, std::uint64_t submission, std::int64_t start_ns,
                                 std::int64_t end_ns) noexcept {
  span(device_track(queue), "execution", start_ns, end_ns,
       {"submission", static_cast<std::int64_t>(submission)});
  // The arrow from the queue's dispatch (recorded by core) to the execution.
  submission_arrow('f', device_track(queue), queue, submission, start_ns);
}

void DeviceTrace::command_ran(QueueKind queue, std::uint64_t submission, std::size_t command,
                              const char* name, std::int64_t start_ns,
                              std::int64_t end_ns) noexcept {
  span(device_track(queue), name, start_ns, end_ns,
       {"submission", static_cast<std::int64_t>(submission)},
       {"command", static_cast<std::int64_t>(command)});
}

void DeviceTrace::cannot_time(QueueKind queue, std::string_view reason) noexcept {
  untimed_[static_cast<int>(queue)].store(true, std::memory_order_relaxed);
  TraceEvent event;
  event.phase = 'i';
  event.pid = pid_;
  event.tid = device_track(queue);
  try {
    event.name = intern("cannot time this queue: " + std::string(reason));
  } catch (...) {
    event.name = "cannot time this queue";
  }
  event.ts_ns = trace_now_ns();
  file_->add(event);
}

}  // namespace ferry::detail
