// CommandList and its copies (ops record through core/op_record.hpp); Queue submission, holding
// back, dispatch and retirement.
#include <algorithm>
#include <string>

#include "core/checked.hpp"
#include "core/faults.hpp"
#include "core/op_record.hpp"
#include "core/state.hpp"
#include "ferry/queue.hpp"

namespace ferry {

using detail::RecordedCommand;

// ---- BufferRef ----

BufferRef::BufferRef(const Buffer& buffer_handle)
    : buffer(buffer_handle.state()), base(0), size(buffer_handle.size()), what("buffer") {}

BufferRef::BufferRef(const Lease& lease_handle) : what("lease") {
  if (const auto& state = lease_handle.state()) {
    buffer = state->buffer;
    lease = state;
    base = state->offset;
    size = state->size;
  }
}

// ---- CommandList ----

CommandList::CommandList() : commands_(std::make_unique<std::vector<RecordedCommand>>()) {}
CommandList::CommandList(CommandList&&) noexcept = default;
CommandList& CommandList::operator=(CommandList&&) noexcept = default;
CommandList::~CommandList() = default;

bool CommandList::empty() const noexcept { return !commands_ || commands_->empty(); }
std::size_t CommandList::size() const noexcept { return commands_ ? commands_->size() : 0; }

using detail::check_open;
using detail::check_range;

Status CommandList::copy(const BufferRef& src, std::uint64_t src_offset, const BufferRef& dst,
                         std::uint64_t dst_offset, std::uint64_t size) {
  static constexpr const char* kCall = "CommandList::copy";
  if (size == 0) return Status(ErrorCode::invalid_argument, "CommandList::copy: size must be > 0");
  FERRY_RETURN_IF_ERROR(check_range(src, kCall, "source", src_offset, size));
  FERRY_RETURN_IF_ERROR(check_range(dst, kCall, "destination", dst_offset, size));
  if (src.buffer->device != dst.buffer->device) {
    return Status(ErrorCode::invalid_argument,
                  "CommandList::copy: source and destination belong to different devices");
  }
  if (device_ && device_ != src.buffer->device) {
    return Status(ErrorCode::invalid_argument,
                  "CommandList::copy: the list already holds commands for another device");
  }
  FERRY_RETURN_IF_ERROR(check_open(*src.buffer->device, kCall));
  const std::uint64_t src_abs = src.base + src_offset;
  const std::uint64_t dst_abs = dst.base + dst_offset;
  if (src.buffer == dst.buffer && detail::ranges_overlap(src_abs, size, dst_abs, size)) {
    return Status(ErrorCode::invalid_argument,
                  "CommandList::copy: source " + detail::describe_range(src_abs, size) +
                      " and destination " + detail::describe_range(dst_abs, size) +
                      " overlap in the same buffer");
  }
  device_ = src.buffer->device;
  RecordedCommand recorded;
  recorded.command = backend::CopyCommand{src.buffer->impl.get(), src_abs, dst.buffer->impl.get(),
                                          dst_abs, size};
  recorded.buffers = {src.buffer, dst.buffer};
  for (const BufferRef* side : {&src, &dst}) {
    if (side->lease) recorded.leases.push_back(side->lease);
  }
  recorded.name = "copy";
  commands_->push_back(std::move(recorded));
  return Status();
}

// ---- submission bookkeeping (detail) ----

namespace detail {

void TimelineState::fail_range(std::uint64_t floor, std::uint64_t value, const Status& status) {
  if (value <= floor) return;
  // Ranges are disjoint by construction (each accepted signal moves `promised` up); an
  // overlapping one can only come from the same values failing twice: keep the first reason.
  const auto next = failed.lower_bound(floor + 1);
  if (next != failed.end() && next->second.first <= value) return;
  failed.emplace(value, FailedRange{floor + 1, status});
  last_failure = status;
}

void fail_points(const std::vector<TimelinePoint>& points, const Status& status) {
  for (const auto& point : points) {
    if (!point.timeline) continue;
    auto& state = *point.timeline.state();
    std::shared_ptr<DeviceState> runtime;  // released after the lock: it may be the last
    {
      std::lock_guard lock(state.device->mutex);
      // Only values nothing accepted has promised: those belong to other work.
      if (point.value <= state.promised) continue;
      state.fail_range(state.promised, point.value, status);
      state.promised = point.value;
      runtime = state.device->runtime.lock();
      if (runtime) runtime->flush_held();
    }
    state.device->changed.notify_all();
  }
}

namespace {

bool ready(const Submission& submission) {
  return std::all_of(submission.waits.begin(), submission.waits.end(), [](const TimelinePoint& w) {
    return w.timeline.state()->submitted >= w.value;
  });
}

// The failure of a wait on a value that will never be reached; ok when none of them is.
Status failed_wait(const Submission& submission) {
  for (const auto& w : submission.waits) {
    const auto& state = *w.timeline.state();
    if (const Status* failure = state.failure_of(w.value)) {
      return Status(ErrorCode::timeline_failed, "waited for value " + std::to_string(w.value) +
                                                    " of a " + state.label +
                                                    " that will never be reached: " +
                                                    failure->message());
    }
  }
  return Status();
}

std::string queue_name(QueueKind kind) { return std::string(to_string(kind)) + " queue"; }

// The trace's counter of a queue's submissions in flight.
void trace_in_flight(DeviceTrace& trace, const QueueState& queue) noexcept {
  static constexpr const char* kNames[kQueueKindCount] = {
      "compute queue: submissions in flight", "upload queue: submissions in flight",
      "download queue: submissions in flight"};
  trace.counter(kNames[static_cast<int>(queue.kind)],
                static_cast<std::int64_t>(queue.in_flight.size()));
}

}  // namespace

Status DeviceState::dispatch(QueueState& queue, Submission&& submission) {
  const std::uint64_t progress_value = submission.progress_value;
  DeviceTrace* const trace = core->trace.get();
  const std::int64_t start_ns = trace != nullptr ? trace_now_ns() : 0;
  const auto command_count = static_cast<std::int64_t>(submission.commands.size());
  // The dispatch's span on the queue's track, and the in-flight counter, however it ends. Its
  // copy bytes let a reader of the trace turn the device execution into GB/s
  // (tools/trace/report.py).
  std::int64_t copy_bytes = 0;
  if (trace != nullptr) {
    for (const auto& c : submission.commands) {
      if (const auto* copy = std::get_if<backend::CopyCommand>(&c.command)) {
        copy_bytes += static_cast<std::int64_t>(copy->size);
      }
    }
  }
  auto traced = [&](const char* name) {
    if (trace == nullptr) return;
    trace->span(DeviceTrace::queue_track(queue.kind), name, start_ns, trace_now_ns(),
                {"submission", static_cast<std::int64_t>(progress_value)},
                {"commands", command_count}, {"copy_bytes", copy_bytes});
    trace_in_flight(*trace, queue);
  };
  if (submission.failure.ok()) {
    std::vector<backend::TimelineValue> waits;
    waits.reserve(submission.waits.size());
    for (const auto& w : submission.waits) waits.push_back({w.timeline.state()->impl.get(), w.value});
    std::vector<backend::TimelineValue> signals;
    signals.reserve(submission.signals.size() + 1);
    for (const auto& s : submission.signals) signals.push_back({s.timeline.state()->impl.get(), s.value});
    signals.push_back({queue.progress->impl.get(), progress_value});
    std::vector<backend::Command> commands;
    commands.reserve(submission.commands.size());
    for (const auto& c : submission.commands) commands.push_back(c.command);

    Status status = injected_fault(FaultSite::submit, "the backend refused the submission");
    // Timed (ExecutionTimes) only when traced and the backend times this queue.
    const bool timed = trace != nullptr && trace->device_timed(queue.kind);
    if (status.ok()) {
      status = core->impl->submit(queue.kind,
                                  {commands, waits, signals, timed ? progress_value : 0});
    }
    if (status.ok()) {
      for (const auto& s : submission.signals) {
        auto& state = *s.timeline.state();
        state.submitted = std::max(state.submitted, s.value);
      }
      queue.progress->submitted = progress_value;
      if (timed) trace->submission_dispatched(queue.kind, progress_value, start_ns);
      queue.in_flight.push_back(std::move(submission));
      traced("dispatch");
      return Status();
    }
    status.with_context("submit to the " + queue_name(queue.kind));
    submission.failure = std::move(status);
  }

  // Failed: its own signals and progress value will never be reached; nothing else is touched.
  for (std::size_t i = 0; i < submission.signals.size(); ++i) {
    submission.signals[i].timeline.state()->fail_range(submission.signal_floors[i],
                                                       submission.signals[i].value,
                                                       submission.failure);
  }
  queue.progress->fail_range(progress_value - 1, progress_value, submission.failure);
  // The queue's progress still passes this value, behind whatever of the submission may have
  // run (CUDA cannot take back work already enqueued): an empty submission signals it, so the
  // submission's memory is kept until then and later work retires in order. Not subject to
  // fault injection: it is ferry's own recovery.
  const backend::TimelineValue fence_signal{queue.progress->impl.get(), progress_value};
  const Status fenced = core->impl->submit(queue.kind, {{}, {}, {&fence_signal, 1}});
  submission.fenced = fenced.ok();
  if (submission.fenced) queue.progress->submitted = progress_value;
  submission.signals.clear();
  submission.waits.clear();
  Status failure = submission.failure;
  queue.in_flight.push_back(std::move(submission));
  traced("failed submission");
  return failure;
}

void DeviceState::flush_held() {
  bool progressed = true;
  while (progressed) {
    progressed = false;
    for (auto& queue : queues) {
      while (!queue.held.empty()) {
        Submission& head = queue.held.front();
        if (head.failure.ok()) head.failure = failed_wait(head);
        if (head.failure.ok() && !ready(head)) break;
        Submission next = std::move(head);
        queue.held.pop_front();
        (void)dispatch(queue, std::move(next));  // a failure is recorded on its own timelines
        progressed = true;
      }
    }
  }
}

void DeviceState::fail_held(const Status& status) {
  for (auto& queue : queues) {
    for (auto& held : queue.held) {
      if (held.failure.ok()) held.failure = status;
    }
  }
  flush_held();  // dispatches them as failed submissions
}

Status DeviceState::accept(QueueState& queue, Submission&& submission) {
  // Argument checks first: a rejected submission leaves every timeline as it was.
  for (const auto& c : submission.commands) {
    if (c.needs_compute && queue.kind != QueueKind::compute) {
      return Status(ErrorCode::invalid_argument,
                    std::string("Queue::submit: ") + c.name + " runs on the compute queue, not the " +
                        queue_name(queue.kind));
    }
  }
  for (const auto& w : submission.waits) {
    if (!w.timeline) return Status(ErrorCode::invalid_argument, "Queue::submit: a wait names no timeline");
    if (w.timeline.state()->device != core) {
      return Status(ErrorCode::invalid_argument,
                    "Queue::submit: a wait names a timeline of another device");
    }
  }
  for (std::size_t i = 0; i < submission.signals.size(); ++i) {
    const auto& s = submission.signals[i];
    if (!s.timeline) return Status(ErrorCode::invalid_argument, "Queue::submit: a signal names no timeline");
    const auto& state = *s.timeline.state();
    if (state.device != core) {
      return Status(ErrorCode::invalid_argument,
                    "Queue::submit: a signal names a timeline of another device");
    }
    if (s.value <= state.promised) {
      return Status(ErrorCode::invalid_argument,
                    "Queue::submit: signal value " + std::to_string(s.value) + " must exceed " +
                        std::to_string(state.promised) +
                        ", the highest value already submitted for that timeline");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (submission.signals[j].timeline.state() == s.timeline.state()) {
        return Status(ErrorCode::invalid_argument,
                      "Queue::submit: the same timeline is signalled twice in one submission");
      }
    }
  }
  // A wait on a value that will never be reached: the submission could never run.
  if (Status failed = failed_wait(submission); !failed.ok()) {
    return Status(ErrorCode::timeline_failed, "Queue::submit: " + failed.message());
  }

  submission.progress_value = queue.next_progress++;
  queue.progress->promised = submission.progress_value;
  submission.signal_floors.reserve(submission.signals.size());
  for (const auto& s : submission.signals) {
    auto& state = *s.timeline.state();
    submission.signal_floors.push_back(state.promised);
    state.promised = s.value;
  }
  Status dispatched;
  if (!queue.held.empty() || !ready(submission)) {
    queue.held.push_back(std::move(submission));
  } else {
    dispatched = dispatch(queue, std::move(submission));
  }
  flush_held();
  return dispatched;
}

void DeviceState::collect_completed(std::vector<Submission>& done) {
  for (auto& queue : queues) {
    if (queue.in_flight.empty()) continue;
    auto reached = queue.progress->impl->value();
    if (!reached.ok()) continue;
    const std::size_t before = done.size();
    while (!queue.in_flight.empty() && queue.in_flight.front().progress_value <= *reached) {
      done.push_back(std::move(queue.in_flight.front()));
      queue.in_flight.pop_front();
    }
    if (core->trace && done.size() != before) trace_in_flight(*core->trace, queue);
  }
}

void DeviceState::retire() {
  std::vector<Submission> done;  // destroyed after the lock is released
  std::lock_guard lock(core->mutex);
  collect_completed(done);
}

std::optional<TimelinePoint> DeviceState::oldest_using(const PoolState* pool) {
  std::lock_guard lock(core->mutex);
  for (auto& queue : queues) {
    for (const auto& submission : queue.in_flight) {
      // Without a fence its progress value is reached only by later work: nothing to wait for.
      if (!submission.fenced) continue;
      for (const auto& c : submission.commands) {
        for (const auto& lease : c.leases) {
          if (lease && lease->pool.get() == pool) {
            return TimelinePoint{Timeline(queue.progress), submission.progress_value};
          }
        }
      }
    }
  }
  return std::nullopt;
}

Status DeviceState::wait_queue_idle(QueueState& queue, const Deadline& deadline,
                                    bool stop_at_close) {
  TraceScope traced(core->trace.get(), "wait for queue idle");
  std::uint64_t handed_over = 0;
  {
    // Until every submission accepted so far has left the held-back list: handed to the backend,
    // or failed. Submissions on a queue leave it in order.
    std::unique_lock lock(core->mutex);
    const std::uint64_t last = queue.next_progress - 1;
    auto settled = [&] {
      return (stop_at_close && core->closed) || queue.held.empty() ||
             queue.held.front().progress_value > last;
    };
    if (!deadline.wait(core->changed, lock, settled)) {
      return Status(ErrorCode::timeout,
                    "the " + queue_name(queue.kind) + " still holds back " +
                        std::to_string(queue.held.size()) +
                        " submission(s) waiting for timeline values nobody has submitted");
    }
    if (stop_at_close && core->closed) return core->closed_error("waiting for the queue");
    handed_over = std::min(last, queue.progress->submitted);
  }
  // Queue order: once the last value handed over is reached, everything before it is done.
  if (handed_over > 0) {
    Status status = queue.progress->impl->host_wait(handed_over, deadline.remaining());
    if (status.code() == ErrorCode::timeout) {
      return Status(ErrorCode::timeout, "the " + queue_name(queue.kind) +
                                            " did not finish its work within the timeout");
    }
    FERRY_RETURN_IF_ERROR(status);
  }
  return Status();
}

}  // namespace detail

// ---- Queue ----

Result<TimelinePoint> Queue::submit(CommandList&& commands, const SubmitSync& sync) const {
  if (!device_) return Status(ErrorCode::released, "Queue::submit: no device");
  auto& core = *device_->core;
  detail::Submission submission;
  submission.waits = sync.wait;
  submission.signals = sync.signal;
  const auto list_device = commands.device();
  submission.commands = std::move(commands.commands());
  commands = CommandList();

  auto& queue = device_->queue(kind_);
  Status status;
  std::uint64_t progress_value = 0;
  std::vector<detail::Submission> completed;  // released after the lock
  detail::DeviceTrace* const trace = core.trace.get();
  detail::TraceScope traced(trace, "Queue::submit");
  const std::size_t command_count = submission.commands.size();
  {
    std::lock_guard lock(core.mutex);
    // The queue's track shows the submission under the device's lock only, so spans of several
    // threads submitting to one queue never overlap there (the thread's own track has the call).
    const std::int64_t locked_ns = trace != nullptr ? detail::trace_now_ns() : 0;
    device_->collect_completed(completed);
    if (core.closing) {
      status = core.closed_error("Queue::submit");
    } else if (list_device && list_device != device_->core) {
      status = Status(ErrorCode::invalid_argument,
                      "Queue::submit: the command list records commands of another device");
    } else {
      // An error here is either a rejection (nothing changed) or a submission that was accepted
      // and then refused by the backend (its own signals failed, nothing else).
      status = device_->accept(queue, std::move(submission));
      progress_value = queue.next_progress - 1;
    }
    if (trace != nullptr) {
      trace->span(detail::DeviceTrace::queue_track(kind_), "submit", locked_ns,
                  detail::trace_now_ns(),
                  {"submission", status.ok() ? static_cast<std::int64_t>(progress_value) : 0},
                  {"commands", static_cast<std::int64_t>(command_count)},
                  {"ok", status.ok() ? 1 : 0});
    }
  }
  core.changed.notify_all();
  if (!status.ok()) return status;
  return TimelinePoint{Timeline(queue.progress), progress_value};
}

Timeline Queue::progress() const {
  if (!device_) return Timeline();
  return Timeline(device_->queue(kind_).progress);
}

Status Queue::wait_idle(Timeout timeout) const {
  if (!device_) return Status(ErrorCode::released, "Queue::wait_idle: no device");
  {
    std::lock_guard lock(device_->core->mutex);
    if (device_->core->closed) return device_->core->closed_error("Queue::wait_idle");
  }
  Status status =
      device_->wait_queue_idle(device_->queue(kind_), detail::Deadline(timeout), true);
  if (!status.ok()) return status.with_context("Queue::wait_idle");
  device_->retire();
  return Status();
}

}  // namespace ferry
