#include "core/op_record.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "core/describe.hpp"
#include "core/state.hpp"

namespace ferry::detail {

Status check_range(const BufferRef& ref, const char* call, const char* role, std::uint64_t offset,
                   std::uint64_t size) {
  if (!ref.buffer) {
    return Status(ErrorCode::released, std::string(call) + ": the " + role + " " + ref.what +
                                           " was released or moved from");
  }
  if (!range_within(offset, size, ref.size)) {
    return Status(ErrorCode::out_of_range, std::string(call) + ": " + role + " range " +
                                               describe_range(offset, size) + " is outside the " +
                                               std::to_string(ref.size) + "-byte " + ref.what);
  }
  return Status();
}

Status check_open(DeviceCore& device, const char* call) {
  std::lock_guard lock(device.mutex);
  return device.closing ? device.closed_error(call) : Status();
}

Result<std::uint64_t> scratch_slab_bytes(const BufferRef& memory, const char* call) {
  if (!memory.buffer) {
    return Status(ErrorCode::released,
                  std::string(call) + ": the " + memory.what + " was released or moved from");
  }
  const std::shared_ptr<DeviceCore>& device = memory.buffer->device;
  const std::shared_ptr<DeviceState> runtime = device->runtime.lock();
  if (!runtime) return device->closed_error(call);
  return runtime->scratch_options.slab_bytes;
}

Result<bool> uses_optional_scratch(const BufferRef& memory, ops::OpKind op, const char* call) {
  if (!memory.buffer) {
    return Status(ErrorCode::released,
                  std::string(call) + ": the " + memory.what + " was released or moved from");
  }
  return memory.buffer->device->impl->uses_optional_scratch(op);
}

Status OpRecorder::record(CommandList& list, const char* call, ops::OpArgs args,
                          std::span<const BindingRequest> bindings, std::uint64_t scratch_bytes,
                          std::uint64_t preferred_scratch_bytes) {
  const std::shared_ptr<DeviceCore>* device = nullptr;
  for (const BindingRequest& binding : bindings) {
    FERRY_RETURN_IF_ERROR(
        check_range(*binding.memory, call, binding.role, binding.offset, binding.size));
    const auto& owner = binding.memory->buffer->device;
    if (device != nullptr && *device != owner) {
      return Status(ErrorCode::invalid_argument,
                    std::string(call) + ": the " + binding.role +
                        " belongs to another device than the " + bindings.front().role);
    }
    device = &owner;
  }
  if (device == nullptr) return Status(ErrorCode::internal, std::string(call) + ": no binding");
  if (list.device_ && list.device_ != *device) {
    return Status(ErrorCode::invalid_argument,
                  std::string(call) + ": the list already holds commands for another device");
  }
  FERRY_RETURN_IF_ERROR(check_open(**device, call));

  backend::OpCommand command;
  command.args = std::move(args);
  command.bindings.reserve(bindings.size());
  for (const BindingRequest& binding : bindings) {
    // Cannot overflow: check_range put the range inside the memory, itself inside its buffer.
    command.bindings.push_back({binding.memory->buffer->impl.get(),
                                binding.memory->base + binding.offset, binding.size,
                                binding.access});
  }
  // A written binding may not overlap any other in the same buffer: the op would read what it
  // writes, in an order no backend defines.
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    for (std::size_t j = i + 1; j < bindings.size(); ++j) {
      const backend::Binding& a = command.bindings[i];
      const backend::Binding& b = command.bindings[j];
      const bool writes = a.access != backend::Access::read || b.access != backend::Access::read;
      if (writes && a.buffer == b.buffer && ranges_overlap(a.offset, a.size, b.offset, b.size)) {
        return Status(ErrorCode::invalid_argument,
                      std::string(call) + ": " + bindings[i].role + " " +
                          describe_range(a.offset, a.size) + " and " + bindings[j].role + " " +
                          describe_range(b.offset, b.size) + " overlap in the same buffer");
      }
    }
  }
  const backend::BackendDevice& backend = *(*device)->impl;
  if (Status supported = backend.op_support(command.kind()); !supported.ok()) {
    return supported.with_context(call);
  }
  if (Status runnable = backend.check_command(command); !runnable.ok()) {
    return runnable.with_context(call);
  }

  RecordedCommand recorded;
  std::optional<Lease> scratch;
  if (std::max(scratch_bytes, preferred_scratch_bytes) > 0) {
    const std::shared_ptr<DeviceState> runtime = (*device)->runtime.lock();
    if (!runtime) return (*device)->closed_error(call);
    if (preferred_scratch_bytes > scratch_bytes) {
      Result<Lease> preferred = acquire_scratch(*runtime, preferred_scratch_bytes, call);
      if (preferred.ok()) {
        scratch = std::move(preferred).value();
      } else if (preferred.status().code() != ErrorCode::resource_exhausted) {
        return preferred.status();
      }
    }
    if (!scratch && scratch_bytes > 0) {
      FERRY_ASSIGN_OR_RETURN(scratch, acquire_scratch(*runtime, scratch_bytes, call));
    }
  }
  if (scratch) {
    const std::shared_ptr<LeaseState>& lease = scratch->state();
    command.bindings.push_back({lease->buffer->impl.get(), lease->offset, lease->size,
                                backend::Access::read_write});
    recorded.buffers.push_back(lease->buffer);
    recorded.leases.push_back(lease);
  }
  recorded.name = ops::kOpNames[static_cast<std::size_t>(command.kind())].data();
  recorded.needs_compute = true;
  for (const BindingRequest& binding : bindings) {
    recorded.buffers.push_back(binding.memory->buffer);
    if (binding.memory->lease) recorded.leases.push_back(binding.memory->lease);
  }
  recorded.command = std::move(command);
  list.device_ = *device;
  list.commands_->push_back(std::move(recorded));
  return Status();
}

}  // namespace ferry::detail
