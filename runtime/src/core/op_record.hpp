// Recording an op into a CommandList: the checks every op shares, over any number of bindings.
// An op's public call (runtime/src/ops/<op>.cpp) validates its own parameters, says which ranges
// of which memory it reads and writes, and hands its lowered arguments here.
#pragma once

#include <cstdint>
#include <span>

#include "core/backend.hpp"
#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

struct DeviceCore;

// One range of the caller's memory an op touches.
struct BindingRequest {
  const BufferRef* memory = nullptr;
  std::uint64_t offset = 0;  // relative to `memory`, as the caller gave it
  std::uint64_t size = 0;
  backend::Access access = backend::Access::read;
  const char* role = "buffer";  // "source", "destination": for messages
};

// Checks that `ref` is live and that [offset, offset + size) lies inside it.
Status check_range(const BufferRef& ref, const char* call, const char* role, std::uint64_t offset,
                   std::uint64_t size);
// device_closed once the device is closing.
Status check_open(DeviceCore& device, const char* call);

// The scratch memory one command may take on the device of `memory`
// (DeviceOptions::scratch_slab_bytes), for ops that plan their passes to fit it.
Result<std::uint64_t> scratch_slab_bytes(const BufferRef& memory, const char* call);
// Whether the backend of `memory`'s device uses the optional scratch `op` may offer it
// (BackendDevice::uses_optional_scratch).
Result<bool> uses_optional_scratch(const BufferRef& memory, ops::OpKind op, const char* call);

struct OpRecorder {
  // Checks, in order: every binding is live and inside its memory; all belong to one open device
  // (and the list's); no written binding overlaps another in the same buffer; the device
  // supports the op (ErrorCode::unavailable with the reason); the backend can run these
  // arguments (its record-time limits). With `scratch_bytes`, the command also gets that much of
  // the device's scratch memory (acquire_scratch) as a last, read-write binding. Then appends the
  // command, which keeps every buffer and lease (scratch included) alive until its submission
  // completes. On error nothing is recorded. `call` names the public call in messages.
  // `preferred_scratch_bytes` (above scratch_bytes: scratch a backend can use but does without,
  // as hamming_topk's pools) is tried first; where the device's scratch cannot give it (held by
  // commands recorded and not yet submitted), the command takes scratch_bytes, so that a list of
  // many searches records as it did without it.
  static Status record(CommandList& list, const char* call, ops::OpArgs args,
                       std::span<const BindingRequest> bindings, std::uint64_t scratch_bytes = 0,
                       std::uint64_t preferred_scratch_bytes = 0);
};

}  // namespace ferry::detail
