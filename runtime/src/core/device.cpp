// Device and Buffer: opening backends, creating objects, draining, closing.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/drivers.hpp"
#include "core/faults.hpp"
#include "core/numa.hpp"
#include "core/state.hpp"
#include "ferry/buffer.hpp"
#include "ferry/device.hpp"
#include "ferry/queue.hpp"
#include "ferry/timeline.hpp"

namespace ferry {
namespace detail {

Status DeviceCore::closed_error(const char* call) const {
  return Status(ErrorCode::device_closed,
                std::string(call) + ": device '" + info.name + "' (" +
                    std::string(to_string(info.backend)) + ") was closed");
}

DeviceState::~DeviceState() {
  // The last Device/Queue handle is gone: nothing can flush held-back submissions any more.
  {
    std::lock_guard lock(core->mutex);
    fail_held(Status(ErrorCode::failed_precondition,
                     "device handle released while the submission was held back waiting for a "
                     "timeline value that was never submitted"));
  }
  core->changed.notify_all();
  // Wait for everything in flight so the retained resources are released in order.
  for (auto& queue : queues) {
    if (queue.progress) (void)wait_queue_idle(queue, Deadline::forever(), false);
  }
  if (core->trace) {
    std::lock_guard lock(core->mutex);  // serialized with submissions, as backends expect
    core->impl->report_execution_times();
  }
  core->impl->finish_teardown_work();
  retire();
  if (core->trace) core->trace->finish_or_report();
}

}  // namespace detail

namespace {

// FERRY_VALIDATION and other switches: on when set to anything but "" or "0". Read here only, so
// every backend sees one rule.
bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' && std::string(value) != "0";
}

// An environment variable's text; empty when unset.
std::string env_text(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

Result<Backend> parse_backend(std::string_view name) {
  if (name == "cpu") return Backend::cpu;
  if (name == "vulkan") return Backend::vulkan;
  if (name == "cuda") return Backend::cuda;
  return Status(ErrorCode::invalid_argument,
                "Device::open: unknown backend '" + std::string(name) +
                    "'; expected auto, cpu, vulkan or cuda");
}

}  // namespace

std::vector<BackendInfo> list_backends() {
  std::vector<BackendInfo> out;
  for (const auto& entry : detail::drivers()) {
    BackendInfo info;
    info.backend = entry.driver->backend();
    info.available = entry.probe->available;
    info.reason = entry.probe->reason;
    info.devices = entry.probe->devices;
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<std::string_view> list_ops() {
  return {std::begin(ops::kOpNames), std::end(ops::kOpNames)};
}

Result<Device> Device::open(std::string_view backend_name, int index,
                            const DeviceOptions& options) {
  const detail::DriverEntry* chosen = nullptr;
  if (backend_name == "auto") {
    for (const auto& entry : detail::drivers()) {
      // A malformed setting is an error, not a reason to fall back to the next backend.
      if (!entry.probe->config_error.ok()) {
        return entry.probe->config_error.with_context("Device::open(auto)");
      }
      if (entry.probe->available && !entry.probe->devices.empty() &&
          (!entry.probe->devices.front().is_cpu || entry.driver->backend() == Backend::cpu)) {
        chosen = &entry;
        break;
      }
    }
    if (chosen == nullptr) {
      return Status(ErrorCode::unavailable, "Device::open(auto): no backend is available");
    }
  } else {
    FERRY_ASSIGN_OR_RETURN(Backend wanted, parse_backend(backend_name));
    for (const auto& entry : detail::drivers()) {
      if (entry.driver->backend() == wanted) chosen = &entry;
    }
    if (chosen == nullptr) {
      return Status(ErrorCode::unavailable, "Device::open: backend '" + std::string(backend_name) +
                                                "' is not built into this ferry");
    }
    if (!chosen->probe->config_error.ok()) {
      return chosen->probe->config_error.with_context("Device::open");
    }
    if (!chosen->probe->available) {
      return Status(ErrorCode::unavailable, "Device::open: backend '" +
                                                std::string(backend_name) +
                                                "' cannot run here: " + chosen->probe->reason);
    }
  }
  const auto device_count = static_cast<int>(chosen->probe->devices.size());
  if (index < 0 || index >= device_count) {
    return Status(ErrorCode::out_of_range,
                  "Device::open: device index " + std::to_string(index) + " is out of range; " +
                      std::string(to_string(chosen->driver->backend())) + " has " +
                      std::to_string(device_count) + " device(s)");
  }

  for (std::size_t i = 0; i < options.host_cpus.size(); ++i) {
    if (options.host_cpus[i] < 0 || options.host_cpus[i] >= (1 << 20)) {
      return Status(ErrorCode::invalid_argument,
                    "Device::open: DeviceOptions::host_cpus[" + std::to_string(i) + "] is " +
                        std::to_string(options.host_cpus[i]) + ", outside 0..1048575");
    }
  }
  FERRY_RETURN_IF_ERROR(detail::apply_fault_environment());
  DeviceOptions effective = options;
  if (env_flag("FERRY_VALIDATION")) effective.validation = true;
  FERRY_ASSIGN_OR_RETURN(auto impl, chosen->driver->open(index, effective));

  auto core = std::make_shared<detail::DeviceCore>();
  core->info = impl->info();
  core->info.numa_node = detail::pci_numa_node(core->info.pci_bus_id);
  if (!options.host_cpus.empty()) {
    core->host_cpus = options.host_cpus;
    std::sort(core->host_cpus.begin(), core->host_cpus.end());
    core->host_cpus.erase(std::unique(core->host_cpus.begin(), core->host_cpus.end()),
                          core->host_cpus.end());
  } else {
    core->host_cpus = detail::placement_cpus(
        env_text("FERRY_NUMA") == "off" ? NumaPlacement::off : options.numa_placement,
        core->info.numa_node);
  }
  core->impl = std::move(impl);
  if (const std::string trace_path = options.trace_path.empty() ? env_text("FERRY_TRACE")
                                                                : options.trace_path;
      !trace_path.empty()) {
    auto trace = detail::DeviceTrace::open(trace_path, core->info, options.message_sink);
    if (!trace.ok()) return trace.status().with_context("Device::open");
    core->trace = std::move(trace).value();
    // Host tracks always; device execution where the backend can time it (it says where not).
    core->trace->set_device_timed(core->impl->enable_execution_timing(core->trace.get()).ok());
  }
  auto state = std::make_shared<detail::DeviceState>();
  state->core = core;
  state->scratch_options = {options.scratch_slab_bytes, options.scratch_max_slabs};
  core->runtime = state;
  for (int q = 0; q < kQueueKindCount; ++q) {
    auto& queue = state->queues[q];
    queue.kind = static_cast<QueueKind>(q);
    FERRY_ASSIGN_OR_RETURN(auto timeline, core->impl->create_timeline(0));
    queue.progress = std::make_shared<detail::TimelineState>();
    queue.progress->device = core;
    queue.progress->impl = std::move(timeline);
    queue.progress->label = q == 0 ? "compute queue progress"
                                   : (q == 1 ? "upload queue progress" : "download queue progress");
  }
  return Device(std::move(state));
}

const DeviceInfo& Device::info() const {
  static const DeviceInfo none{};
  return state_ ? state_->core->info : none;
}

Queue Device::queue(QueueKind kind) const { return Queue(state_, kind); }

namespace {

Status check_accepting(const detail::DeviceCore& core, const char* call) {
  return core.closing ? core.closed_error(call) : Status();
}

Status check_memory_kind(MemoryKind kind, const char* call) {
  if (kind != MemoryKind::device && kind != MemoryKind::host_upload &&
      kind != MemoryKind::host_readback) {
    return Status(ErrorCode::invalid_argument, std::string(call) + ": unknown memory kind " +
                                                   std::to_string(static_cast<int>(kind)));
  }
  return Status();
}

}  // namespace

Result<Buffer> Device::create_buffer(std::uint64_t size, MemoryKind kind) const {
  static constexpr const char* kCall = "Device::create_buffer";
  if (!state_) return Status(ErrorCode::released, "Device::create_buffer: no device");
  auto& core = state_->core;
  {
    std::lock_guard lock(core->mutex);
    FERRY_RETURN_IF_ERROR(check_accepting(*core, kCall));
  }
  if (size == 0) {
    return Status(ErrorCode::invalid_argument, "Device::create_buffer: size must be > 0");
  }
  FERRY_RETURN_IF_ERROR(check_memory_kind(kind, kCall));
  auto impl = detail::allocate_unless_injected("allocating a buffer", [&] {
    // Host memory's pages come from the node of the thread that allocates (and pins) them.
    static const std::vector<int> kAnywhere;
    detail::ScopedCpuPlacement placed(kind == MemoryKind::device ? kAnywhere : core->host_cpus);
    return core->impl->create_buffer(size, kind);
  });
  if (!impl.ok()) {
    Status status = impl.status();
    status.with_context("Device::create_buffer(" + detail::describe_bytes(size) + ", " +
                        std::string(to_string(kind)) + ")");
    return status;
  }
  auto state = std::make_shared<detail::BufferState>();
  state->device = core;
  state->impl = std::move(impl).value();
  state->size = size;
  state->kind = kind;
  return Buffer(std::move(state));
}

Result<Buffer> Device::register_host_memory(std::span<std::byte> memory, MemoryKind kind) const {
  if (!state_) return Status(ErrorCode::released, "Device::register_host_memory: no device");
  auto& core = state_->core;
  {
    std::lock_guard lock(core->mutex);
    FERRY_RETURN_IF_ERROR(check_accepting(*core, "Device::register_host_memory"));
  }
  if (memory.empty()) {
    return Status(ErrorCode::invalid_argument, "Device::register_host_memory: empty memory range");
  }
  if (kind == MemoryKind::device) {
    return Status(ErrorCode::invalid_argument,
                  "Device::register_host_memory: kind must be host_upload or host_readback");
  }
  auto impl = detail::allocate_unless_injected("registering host memory", [&] {
    return core->impl->register_host_memory(memory.data(), memory.size(), kind);
  });
  if (!impl.ok()) {
    Status status = impl.status();
    status.with_context("Device::register_host_memory(" + detail::describe_bytes(memory.size()) + ")");
    return status;
  }
  auto state = std::make_shared<detail::BufferState>();
  state->device = core;
  state->impl = std::move(impl).value();
  state->size = memory.size();
  state->kind = kind;
  return Buffer(std::move(state));
}

Result<Timeline> Device::create_timeline(std::uint64_t initial_value) const {
  if (!state_) return Status(ErrorCode::released, "Device::create_timeline: no device");
  auto& core = state_->core;
  {
    std::lock_guard lock(core->mutex);
    FERRY_RETURN_IF_ERROR(check_accepting(*core, "Device::create_timeline"));
  }
  FERRY_ASSIGN_OR_RETURN(auto impl,
                         detail::allocate_unless_injected("creating a timeline", [&] {
                           return core->impl->create_timeline(initial_value);
                         }));
  auto state = std::make_shared<detail::TimelineState>();
  state->device = core;
  state->impl = std::move(impl);
  state->promised = state->submitted = initial_value;
  return Timeline(std::move(state));
}

Status Device::wait_idle(Timeout timeout) const {
  if (!state_) return Status(ErrorCode::released, "Device::wait_idle: no device");
  {
    std::lock_guard lock(state_->core->mutex);
    if (state_->core->closed) return state_->core->closed_error("Device::wait_idle");
  }
  const detail::Deadline deadline(timeout);
  for (auto& queue : state_->queues) {
    Status status = state_->wait_queue_idle(queue, deadline, true);
    if (!status.ok()) return status.with_context("Device::wait_idle");
  }
  state_->retire();
  return Status();
}

Status Device::close(Timeout timeout) {
  if (!state_) return Status(ErrorCode::released, "Device::close: no device");
  auto& core = *state_->core;
  {
    std::lock_guard lock(core.mutex);
    if (core.closed) return Status();  // closing twice is harmless
    if (!core.closing) {
      // From here on nothing can release a held-back submission (host signals and new
      // submissions are refused), so fail them now instead of waiting for them forever.
      core.closing = true;
      state_->fail_held(core.closed_error("submission held back at Device::close"));
    }
  }
  core.changed.notify_all();
  // Work in flight completes (and can still be waited for) before the device counts as closed.
  const detail::Deadline deadline(timeout);
  Status drained;
  for (auto& queue : state_->queues) {
    Status status = state_->wait_queue_idle(queue, deadline, false);
    if (!status.ok() && drained.ok()) drained = status.with_context("Device::close");
  }
  {
    std::lock_guard lock(core.mutex);
    core.closed = true;
  }
  core.changed.notify_all();
  state_->retire();
  if (core.trace) {
    {
      std::lock_guard lock(core.mutex);  // serialized with submissions, as backends expect
      core.impl->report_execution_times();
    }
    // The device's part of the trace ends here; the file is written if it was the last one.
    Status written = core.trace->finish();
    if (!written.ok() && drained.ok()) drained = written.with_context("Device::close");
  }
  return drained;
}

Status Device::supports(std::string_view op) const {
  if (!state_) return Status(ErrorCode::released, "Device::supports: no device");
  for (std::size_t kind = 0; kind < ops::kOpCount; ++kind) {
    if (ops::kOpNames[kind] == op) {
      return state_->core->impl->op_support(static_cast<ops::OpKind>(kind));
    }
  }
  return Status(ErrorCode::invalid_argument,
                "Device::supports: '" + std::string(op) + "' is no op of this ferry");
}

bool Device::is_open() const {
  if (!state_) return false;
  std::lock_guard lock(state_->core->mutex);
  return !state_->core->closing;
}

std::uint64_t Device::validation_message_count() const {
  return state_ ? state_->core->impl->validation_message_count() : 0;
}

// ---- Buffer ----

std::uint64_t Buffer::size() const noexcept { return state_ ? state_->size : 0; }

MemoryKind Buffer::memory_kind() const noexcept {
  return state_ ? state_->kind : MemoryKind::device;
}

Result<std::span<std::byte>> Buffer::host_span() const {
  if (!state_) return Status(ErrorCode::released, "Buffer::host_span: the buffer was released");
  {
    std::lock_guard lock(state_->device->mutex);
    if (state_->device->closed) return state_->device->closed_error("Buffer::host_span");
  }
  std::byte* data = state_->impl->host_data();
  if (data == nullptr) {
    return Status(ErrorCode::invalid_argument,
                  "Buffer::host_span: a " + std::string(to_string(state_->kind)) +
                      " buffer is not host visible; use host_upload or host_readback memory");
  }
  return std::span<std::byte>(data, state_->size);
}

}  // namespace ferry
