// Interop with native APIs (ferry/interop.hpp): thin calls that validate, then ask the backend.
#include "ferry/interop.hpp"

#include <mutex>
#include <string>
#include <utility>

#include "core/backend.hpp"
#include "core/describe.hpp"
#include "core/faults.hpp"
#include "core/state.hpp"

namespace ferry {

std::string_view to_string(NativeMemoryKind kind) noexcept {
  switch (kind) {
    case NativeMemoryKind::host: return "host";
    case NativeMemoryKind::cuda_pinned_host: return "cuda_pinned_host";
    case NativeMemoryKind::cuda_device: return "cuda_device";
  }
  return "unknown native memory kind";
}

Result<NativeMemory> native_memory(const BufferRef& memory) {
  if (!memory.buffer) {
    return Status(ErrorCode::released,
                  std::string("native_memory: the ") + memory.what + " was released");
  }
  NativeMemory native = memory.buffer->impl->native_memory();
  if (native.data == nullptr) {
    return Status(ErrorCode::unavailable,
                  std::string("native_memory: the ") + memory.what + " is " +
                      std::string(to_string(memory.buffer->kind)) + " memory of a " +
                      std::string(to_string(memory.buffer->device->info.backend)) +
                      " device, which has no address outside its API (ferry does not export "
                      "Vulkan device memory to other APIs; use a host buffer or a lease, or the "
                      "CUDA backend)");
  }
  native.data += memory.base;
  native.size = memory.size;
  return native;
}

Result<Buffer> wrap_native_memory(const Device& device, std::span<std::byte> memory,
                                  MemoryKind kind, std::shared_ptr<void> owner) {
  const std::string call = "wrap_native_memory(" + detail::describe_bytes(memory.size()) + " as " +
                           std::string(to_string(kind)) + ")";
  if (!device) return Status(ErrorCode::released, call + ": no device");
  auto& core = device.state()->core;
  {
    std::lock_guard lock(core->mutex);
    if (core->closing) return core->closed_error(call.c_str());
  }
  if (memory.empty() || memory.data() == nullptr) {
    return Status(ErrorCode::invalid_argument, call + ": empty memory range");
  }
  if (kind != MemoryKind::device && kind != MemoryKind::host_upload &&
      kind != MemoryKind::host_readback) {
    return Status(ErrorCode::invalid_argument, call + ": unknown memory kind");
  }
  auto impl = detail::allocate_unless_injected("wrapping native memory", [&] {
    return core->impl->wrap_memory(memory.data(), memory.size(), kind);
  });
  if (!impl.ok()) return std::move(impl).status().with_context(call);
  auto state = std::make_shared<detail::BufferState>();
  state->device = core;
  state->owner = std::move(owner);
  state->impl = std::move(impl).value();
  state->size = memory.size();
  state->kind = kind;
  return Buffer(std::move(state));
}

Status native_stream_wait(const TimelinePoint& point, std::uintptr_t stream, Timeout timeout) {
  if (!point.timeline) return Status();
  const auto& timeline = *point.timeline.state();
  auto& core = *timeline.device;
  {
    std::lock_guard lock(core.mutex);
    if (core.closed) return core.closed_error("native_stream_wait");
    if (const Status* failure = timeline.failure_of(point.value)) {
      return timeline.wait_error(point.value, "native_stream_wait", *failure);
    }
    // Handed to the backend: a device-side wait. Under the device's lock, so serialized with
    // submit() as backends expect.
    if (timeline.submitted >= point.value) {
      Status status = core.impl->stream_wait(*timeline.impl, point.value, stream);
      if (status.code() != ErrorCode::unavailable) {
        return status.ok() ? status : std::move(status).with_context("native_stream_wait");
      }
    }
  }
  // No stream wait possible (another backend, or the signal is still held back): the host waits.
  return point.wait(timeout);
}

Result<TimelinePoint> native_stream_point(const Queue& queue, std::uintptr_t stream) {
  if (!queue) return Status(ErrorCode::released, "native_stream_point: no queue");
  auto& core = *queue.state()->core;
  {
    std::lock_guard lock(core.mutex);
    if (core.closing) return core.closed_error("native_stream_point");
    // Under the device's lock: serialized with submit(). The wait sits on the queue's stream
    // ahead of the empty submission below (and of anything submitted meanwhile, which is only
    // more ordered than it needs to be).
    Status status = core.impl->queue_wait_stream(queue.kind(), stream);
    if (!status.ok()) return std::move(status).with_context("native_stream_point");
  }
  return queue.submit(CommandList());
}

}  // namespace ferry
