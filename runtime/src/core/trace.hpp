// Tracing: a Chrome trace-event JSON file (DeviceOptions::trace_path, FERRY_TRACE) that the
// Perfetto UI and chrome://tracing open. Each device is a "process" of the file; its tracks
// ("threads") are the host side of each ferry queue (submissions and their dispatch to the
// backend), each queue's device execution (as the backend reports it, ExecutionTimes in
// backend.hpp), and one per host thread that does traced work (waits, staging-pool acquires,
// pipelines, chunked transfers).
//
// Cost: everything goes through a DeviceTrace pointer that is null when tracing is off, so off
// costs one branch and nothing else. On, an event is appended to the file's buffer under a mutex
// (no I/O); the file is written once, when its last device is done with it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/backend.hpp"
#include "core/trace_clock.hpp"
#include "ferry/device.hpp"
#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry::detail {

class TraceFile;

// Names the calling thread's track in traces ("the ingress pipeline's producer thread"); threads
// ferry starts are named by start_thread. Others are "host thread N".
void name_this_thread(std::string_view name);

// A numeric argument of an event; a null key is no argument.
struct TraceArg {
  const char* key = nullptr;
  std::int64_t value = 0;
};

// One device's part of a trace file. Thread-safe; every recording call is noexcept (an event
// that cannot be stored is dropped and counted, never an exception: some callers are noexcept).
class DeviceTrace final : public backend::ExecutionTimes {
 public:
  // Joins the file at `path` (shared by every device of the process tracing to that path) as a
  // process named after the device. `sink` receives the error if the file cannot be written when
  // this device turns out to be its last user in the destructor.
  static Result<std::unique_ptr<DeviceTrace>> open(
      const std::string& path, const DeviceInfo& info,
      std::function<void(MessageSeverity, std::string_view)> sink);
  ~DeviceTrace() override;
  DeviceTrace(const DeviceTrace&) = delete;
  DeviceTrace& operator=(const DeviceTrace&) = delete;

  // This device is done with the file (idempotent); the last one writes it. The error names the
  // path. Events recorded afterwards are dropped.
  Status finish();
  // finish(), with an error sent to the message sink given at open (else stderr), for callers
  // with nobody to return it to (the last handle going).
  void finish_or_report() noexcept;

  // The host track of a ferry queue (its submissions), the track of its execution on the device,
  // and the calling thread's own track.
  static int queue_track(QueueKind queue) noexcept;
  static int device_track(QueueKind queue) noexcept;
  static int this_thread_track() noexcept;

  // A complete span [start_ns, end_ns] on `track`. `name` must outlive the trace (a literal, or
  // intern()).
  void span(int track, const char* name, std::int64_t start_ns, std::int64_t end_ns,
            TraceArg a = {}, TraceArg b = {}, TraceArg c = {}) noexcept;
  // A counter's value from now on (a track of its own, per name).
  void counter(const char* name, std::int64_t value) noexcept;
  // The start of an arrow to the device execution of a queue's submission (submission_ran ends
  // it), from the span enclosing `ts_ns` on the queue's track: its dispatch.
  void submission_dispatched(QueueKind queue, std::uint64_t submission,
                             std::int64_t ts_ns) noexcept;
  // A stable copy of `text`, for names made at run time (a pool's counter).
  const char* intern(std::string text) noexcept;

  // Whether the backend reports device execution (BackendDevice::enable_execution_timing), on
  // this queue (not said to be untimed by cannot_time).
  void set_device_timed(bool timed) noexcept { device_timed_ = timed; }
  bool device_timed(QueueKind queue) const noexcept {
    return device_timed_ && !untimed_[static_cast<int>(queue)].load(std::memory_order_relaxed);
  }

  // backend::ExecutionTimes: spans on the queue's device track, from the dispatch's arrow.
  void submission_ran(QueueKind queue, std::uint64_t submission, std::int64_t start_ns,
                      std::int64_t end_ns) noexcept override;
  void command_ran(QueueKind queue, std::uint64_t submission, std::size_t command,
                   const char* name, std::int64_t start_ns, std::int64_t end_ns) noexcept override;
  void cannot_time(QueueKind queue, std::string_view reason) noexcept override;

 private:
  DeviceTrace(std::shared_ptr<TraceFile> file, int pid,
              std::function<void(MessageSeverity, std::string_view)> sink);

  std::shared_ptr<TraceFile> file_;
  int pid_;
  std::function<void(MessageSeverity, std::string_view)> sink_;
  bool finished_ = false;  // guarded by the file registry's lock
  bool device_timed_ = false;  // set once, before any submission
  std::atomic<bool> untimed_[kQueueKindCount] = {};

  // One end (phase 's' or 'f') of the arrow of a queue's submission (its progress value).
  void submission_arrow(char phase, int track, QueueKind queue, std::uint64_t submission,
                        std::int64_t ts_ns) noexcept;
};

// The device's trace, or null when it is not traced (for code built on the public API: the
// pipelines).
DeviceTrace* trace_of(const Device& device) noexcept;

// A span on the calling thread's track for the lifetime of the scope; nothing without a trace.
class TraceScope {
 public:
  TraceScope(DeviceTrace* trace, const char* name) noexcept : trace_(trace), name_(name) {
    if (trace_ != nullptr) start_ns_ = trace_now_ns();
  }
  ~TraceScope() {
    if (trace_ != nullptr) {
      trace_->span(DeviceTrace::this_thread_track(), name_, start_ns_, trace_now_ns(), a_, b_);
    }
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

  // Up to two arguments, shown with the span.
  void arg(const char* key, std::int64_t value) noexcept {
    (a_.key == nullptr ? a_ : b_) = {key, value};
  }

 private:
  DeviceTrace* trace_;
  const char* name_;
  std::int64_t start_ns_ = 0;
  TraceArg a_, b_;
};

}  // namespace ferry::detail
