// CommandList recording and validation; Queue submission, holding back, dispatch and retirement.
#include <algorithm>
#include <string>

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

namespace {

std::string range_text(std::uint64_t offset, std::uint64_t size) {
  std::string text = "[";
  text += std::to_string(offset);
  text += ", ";
  text += std::to_string(offset);
  text += " + ";
  text += std::to_string(size);
  text += ")";
  return text;
}

// Checks that `ref` is live and that [offset, offset + size) lies inside it.
Status check_range(const BufferRef& ref, const char* call, const char* role,
                   std::uint64_t offset, std::uint64_t size) {
  if (!ref.buffer) {
    return Status(ErrorCode::released, std::string(call) + ": the " + role + " " + ref.what +
                                           " was released or moved from");
  }
  if (offset > ref.size || size > ref.size - offset) {
    return Status(ErrorCode::out_of_range, std::string(call) + ": " + role + " range " +
                                               range_text(offset, size) + " is outside the " +
                                               std::to_string(ref.size) + "-byte " + ref.what);
  }
  return Status();
}

Status check_open(detail::DeviceCore& device, const char* call) {
  std::lock_guard lock(device.mutex);
  return device.closed ? device.closed_error(call) : Status();
}

}  // namespace

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
  if (src.buffer == dst.buffer && src_abs < dst_abs + size && dst_abs < src_abs + size) {
    return Status(ErrorCode::invalid_argument,
                  "CommandList::copy: source " + range_text(src_abs, size) + " and destination " +
                      range_text(dst_abs, size) + " overlap in the same buffer");
  }
  device_ = src.buffer->device;
  RecordedCommand recorded;
  recorded.command = backend::CopyCommand{src.buffer->impl.get(), src_abs, dst.buffer->impl.get(),
                                          dst_abs, size};
  recorded.buffers = {src.buffer, dst.buffer};
  recorded.leases = {src.lease, dst.lease};
  recorded.name = "copy";
  commands_->push_back(std::move(recorded));
  return Status();
}

Status CommandList::fill(const BufferRef& dst, std::uint64_t offset, std::uint64_t size,
                         std::uint32_t pattern) {
  static constexpr const char* kCall = "CommandList::fill";
  if (size == 0) return Status(ErrorCode::invalid_argument, "CommandList::fill: size must be > 0");
  FERRY_RETURN_IF_ERROR(check_range(dst, kCall, "destination", offset, size));
  if (device_ && device_ != dst.buffer->device) {
    return Status(ErrorCode::invalid_argument,
                  "CommandList::fill: the list already holds commands for another device");
  }
  FERRY_RETURN_IF_ERROR(check_open(*dst.buffer->device, kCall));
  device_ = dst.buffer->device;
  RecordedCommand recorded;
  recorded.command = backend::FillCommand{dst.buffer->impl.get(), dst.base + offset, size, pattern};
  recorded.buffers = {dst.buffer, nullptr};
  recorded.leases = {dst.lease, nullptr};
  recorded.needs_compute = true;
  recorded.name = "fill";
  commands_->push_back(std::move(recorded));
  return Status();
}

Status CommandList::normalize(const BufferRef& src, std::uint64_t src_offset,
                              const BufferRef& dst, std::uint64_t dst_offset,
                              const NormalizeParams& params) {
  static constexpr const char* kCall = "CommandList::normalize";
  // Parameter errors read "normalize: ..." (resolve_normalize's wording).
  FERRY_ASSIGN_OR_RETURN(const NormalizeShape shape_value, resolve_normalize(params));
  FERRY_ASSIGN_OR_RETURN(const NormalizeFactors factors_value, normalize_factors(params));
  const NormalizeShape* shape = &shape_value;
  const NormalizeFactors* factors = &factors_value;
  FERRY_RETURN_IF_ERROR(check_range(src, kCall, "source", src_offset, shape->input_bytes));
  FERRY_RETURN_IF_ERROR(check_range(dst, kCall, "destination", dst_offset, shape->output_bytes));
  const std::uint32_t element = element_size(params.output_type);
  if ((dst.base + dst_offset) % element != 0) {
    return Status(ErrorCode::invalid_argument,
                  std::string(kCall) + ": destination offset " +
                      std::to_string(dst.base + dst_offset) + " is not a multiple of the " +
                      std::to_string(element) + "-byte " +
                      std::string(to_string(params.output_type)) + " element");
  }
  if (src.buffer->device != dst.buffer->device) {
    return Status(ErrorCode::invalid_argument,
                  std::string(kCall) + ": source and destination belong to different devices");
  }
  if (device_ && device_ != src.buffer->device) {
    return Status(ErrorCode::invalid_argument,
                  std::string(kCall) + ": the list already holds commands for another device");
  }
  FERRY_RETURN_IF_ERROR(check_open(*src.buffer->device, kCall));
  const std::uint64_t src_abs = src.base + src_offset;
  const std::uint64_t dst_abs = dst.base + dst_offset;
  if (src.buffer == dst.buffer && src_abs < dst_abs + shape->output_bytes &&
      dst_abs < src_abs + shape->input_bytes) {
    return Status(ErrorCode::invalid_argument,
                  std::string(kCall) + ": source " + range_text(src_abs, shape->input_bytes) +
                      " and destination " + range_text(dst_abs, shape->output_bytes) +
                      " overlap in the same buffer");
  }

  backend::NormalizeCommand command;
  command.pixel_stride = static_cast<std::uint32_t>(shape->pixel_stride);
  command.channel_stride = shape->channel_stride;
  command.row_stride = shape->row_stride;
  command.image_stride = shape->image_stride;
  command.src = src.buffer->impl.get();
  command.src_offset = src_abs + std::uint64_t{params.crop.y} * command.row_stride +
                       std::uint64_t{params.crop.x} * command.pixel_stride;
  command.dst = dst.buffer->impl.get();
  command.dst_offset = dst_abs;
  command.batch = shape->batch;
  command.channels = shape->channels;
  command.height = shape->height;
  command.width = shape->width;
  command.mirror = params.mirror;
  command.output_type = params.output_type;
  command.output_layout = params.output_layout;
  command.scale = factors->scale;
  command.bias = factors->bias;

  device_ = src.buffer->device;
  RecordedCommand recorded;
  recorded.command = command;
  recorded.buffers = {src.buffer, dst.buffer};
  recorded.leases = {src.lease, dst.lease};
  recorded.needs_compute = true;
  recorded.name = "normalize";
  commands_->push_back(std::move(recorded));
  return Status();
}

// ---- submission bookkeeping (detail) ----

namespace detail {

void fail_timeline(TimelineState& timeline, std::uint64_t value, const Status& status) {
  if (!timeline.failed_at || value < *timeline.failed_at) {
    timeline.failed_at = value;
    timeline.failure = status;
  }
}

void fail_unsent_signal(TimelineState& timeline, std::uint64_t value, const Status& status) {
  // Never below what accepted submissions already promised: those still complete normally.
  fail_timeline(timeline, std::max(value, timeline.promised + 1), status);
}

void fail_points(const std::vector<TimelinePoint>& points, const Status& status) {
  for (const auto& point : points) {
    if (!point.timeline) continue;
    auto& state = *point.timeline.state();
    std::shared_ptr<DeviceState> runtime;
    {
      std::lock_guard lock(state.device->mutex);
      fail_unsent_signal(state, point.value, status);
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

}  // namespace

Status DeviceState::dispatch(QueueState& queue, Submission&& submission) {
  const std::uint64_t progress_value = submission.progress_value;
  std::vector<backend::TimelineValue> signals;
  signals.reserve(submission.signals.size() + 1);
  std::vector<backend::TimelineValue> waits;
  std::vector<backend::Command> commands;

  if (submission.failure.ok()) {
    for (const auto& w : submission.waits) waits.push_back({w.timeline.state()->impl.get(), w.value});
    for (const auto& s : submission.signals) signals.push_back({s.timeline.state()->impl.get(), s.value});
    commands.reserve(submission.commands.size());
    for (const auto& c : submission.commands) commands.push_back(c.command);
  } else {
    // A held-back submission whose wait failed: run nothing, fail its signals, but still advance
    // the queue's progress so the queue keeps its order and later work is not stuck behind it.
    for (const auto& s : submission.signals) {
      fail_timeline(*s.timeline.state(), s.value, submission.failure);
    }
    submission.commands.clear();
    submission.signals.clear();
  }
  signals.push_back({queue.progress->impl.get(), progress_value});

  backend::Submission native{commands, waits, signals};
  Status status = core->impl->submit(queue.kind, native);
  if (!status.ok()) {
    status.with_context(std::string("submit to the ") + std::string(to_string(queue.kind)) +
                        " queue");
    for (const auto& s : submission.signals) fail_timeline(*s.timeline.state(), s.value, status);
    fail_timeline(*queue.progress, progress_value, status);
    return status;
  }
  for (const auto& s : submission.signals) {
    auto& state = *s.timeline.state();
    state.submitted = std::max(state.submitted, s.value);
  }
  queue.progress->submitted = progress_value;
  queue.in_flight.push_back(std::move(submission));
  return Status();
}

void DeviceState::flush_held() {
  bool progressed = true;
  while (progressed) {
    progressed = false;
    for (auto& queue : queues) {
      while (!queue.held.empty()) {
        Submission& head = queue.held.front();
        if (head.failure.ok()) {
          for (const auto& w : head.waits) {
            const auto& state = *w.timeline.state();
            if (state.submitted < w.value && state.fails(w.value)) {
              head.failure = Status(ErrorCode::timeline_failed,
                                    "waited for value " + std::to_string(w.value) +
                                        " of a failed " + state.label + ": " +
                                        state.failure.message());
              break;
            }
          }
        }
        if (head.failure.ok() && !ready(head)) break;
        Submission next = std::move(head);
        queue.held.pop_front();
        (void)dispatch(queue, std::move(next));  // a failure is recorded on its timelines
        progressed = true;
      }
    }
  }
}

Status DeviceState::accept(QueueState& queue, Submission&& submission) {
  if (queue.progress->failed_at) {
    return Status(ErrorCode::timeline_failed,
                  std::string("the ") + std::string(to_string(queue.kind)) +
                      " queue failed earlier and accepts no more work: " +
                      queue.progress->failure.message());
  }
  for (const auto& c : submission.commands) {
    if (c.needs_compute && queue.kind != QueueKind::compute) {
      return Status(ErrorCode::invalid_argument,
                    std::string("Queue::submit: ") + c.name + " runs on the compute queue, not the " +
                        std::string(to_string(queue.kind)) + " queue");
    }
  }
  for (const auto& w : submission.waits) {
    if (!w.timeline) return Status(ErrorCode::invalid_argument, "Queue::submit: a wait names no timeline");
    const auto& state = *w.timeline.state();
    if (state.device != core) {
      return Status(ErrorCode::invalid_argument,
                    "Queue::submit: a wait names a timeline of another device");
    }
    if (state.submitted < w.value && state.fails(w.value)) {
      return Status(ErrorCode::timeline_failed,
                    "Queue::submit: waits for value " + std::to_string(w.value) +
                        " of a failed timeline: " + state.failure.message());
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
    if (state.failed_at) {
      return Status(ErrorCode::timeline_failed,
                    "Queue::submit: signals a failed timeline: " + state.failure.message());
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

  submission.progress_value = queue.next_progress++;
  queue.progress->promised = submission.progress_value;
  for (const auto& s : submission.signals) s.timeline.state()->promised = s.value;
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
    while (!queue.in_flight.empty() && queue.in_flight.front().progress_value <= *reached) {
      done.push_back(std::move(queue.in_flight.front()));
      queue.in_flight.pop_front();
    }
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
  {
    std::lock_guard lock(core.mutex);
    device_->collect_completed(completed);
    if (core.closed) {
      status = core.closed_error("Queue::submit");
    } else if (list_device && list_device != device_->core) {
      status = Status(ErrorCode::invalid_argument,
                      "Queue::submit: the command list records commands of another device");
    } else {
      status = device_->accept(queue, std::move(submission));
      progress_value = queue.next_progress - 1;
    }
    if (!status.ok()) {
      // Nothing was submitted; whoever waits for these signals must not hang.
      for (const auto& s : sync.signal) {
        if (!s.timeline || s.timeline.state()->device != device_->core) continue;
        detail::fail_unsent_signal(*s.timeline.state(), s.value, status);
      }
      device_->flush_held();
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
  std::uint64_t last = 0;
  {
    std::lock_guard lock(device_->core->mutex);
    if (device_->core->closed) return device_->core->closed_error("Queue::wait_idle");
    last = device_->queue(kind_).next_progress - 1;
  }
  if (last > 0) FERRY_RETURN_IF_ERROR(progress().wait(last, timeout));
  device_->retire();
  return Status();
}

}  // namespace ferry
