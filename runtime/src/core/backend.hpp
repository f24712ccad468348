// The interface every backend implements. Core code talks to backends only through this file;
// backends include it (with the small helpers it brings: checked sizes, deadlines, wording of
// sizes in messages, starting threads, the trace clock) and the public headers, never core
// internals or each other.
//
// What core guarantees to a backend, so that backends stay small:
// - Arguments are validated: commands are in bounds, sizes are non-zero, buffers belong to this
//   device, ops are on the compute queue, no written binding of an op overlaps another.
// - submit() calls are serialized per device (never concurrent with each other).
// - Every size and offset it is given fits 64 bits with its extent (core/checked.hpp, which
//   backends use too for their own arithmetic).
// - Every wait in a submission names a value whose signal was already submitted (or reached), so
//   a device queue never waits on something that might never be signalled.
// - Signal values are strictly increasing per timeline, and host_signal() values exceed every
//   value already submitted.
// - Buffers and timelines named by a submission outlive it (core retains them until the
//   submission's progress value is reached).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/checked.hpp"
#include "core/deadline.hpp"
#include "core/describe.hpp"
#include "core/threads.hpp"
#include "core/trace_clock.hpp"
#include "ferry/device.hpp"
#include "ferry/interop.hpp"
#include "ops/op_list.hpp"
#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry::backend {

class BackendBuffer {
 public:
  virtual ~BackendBuffer() = default;
  // Mapped host address for host_upload / host_readback memory; nullptr for device memory.
  virtual std::byte* host_data() noexcept = 0;
  // The native address of the whole buffer, for interop (ferry/interop.hpp); data null where
  // there is none. The default: host memory at host_data().
  virtual NativeMemory native_memory() noexcept {
    NativeMemory memory;
    memory.data = host_data();
    return memory;
  }
};

class BackendTimeline {
 public:
  virtual ~BackendTimeline() = default;
  // The value reached. On device loss, returns the error.
  virtual Result<std::uint64_t> value() = 0;
  virtual Status host_signal(std::uint64_t value) = 0;
  // Blocks until value() >= value or the timeout runs out (ErrorCode::timeout).
  virtual Status host_wait(std::uint64_t value, Timeout timeout) = 0;
};

struct CopyCommand {
  BackendBuffer* src = nullptr;
  std::uint64_t src_offset = 0;
  BackendBuffer* dst = nullptr;
  std::uint64_t dst_offset = 0;
  std::uint64_t size = 0;
};

// How an op uses a binding (for hazard tracking and core's overlap checks).
enum class Access : std::uint8_t { read, write, read_write };

// A range of a buffer an op reads or writes; ops/<op>.hpp says what each of an op's bindings is.
struct Binding {
  BackendBuffer* buffer = nullptr;
  std::uint64_t offset = 0;  // the first byte the op may touch
  std::uint64_t size = 0;    // bytes from `offset` the op may touch
  Access access = Access::read;
};

// An op (ops/op_list.hpp): its arguments and the memory it touches. Core has checked every
// binding against its buffer and that no written binding overlaps another.
struct OpCommand {
  ops::OpArgs args;
  std::vector<Binding> bindings;

  ops::OpKind kind() const noexcept { return static_cast<ops::OpKind>(args.index()); }
};

using Command = std::variant<CopyCommand, OpCommand>;

// Calls on_copy or on_op with `command`. Backends go through this (never std::get), so a Command
// alternative added without a handler does not compile.
template <typename OnCopy, typename OnOp>
decltype(auto) visit_command(const Command& command, OnCopy&& on_copy, OnOp&& on_op) {
  return std::visit(
      [&](const auto& alternative) -> decltype(auto) {
        using Alternative = std::decay_t<decltype(alternative)>;
        if constexpr (std::is_same_v<Alternative, CopyCommand>) {
          return on_copy(alternative);
        } else {
          static_assert(std::is_same_v<Alternative, OpCommand>, "a Command has no handler");
          return on_op(alternative);
        }
      },
      command);
}

struct TimelineValue {
  BackendTimeline* timeline = nullptr;
  std::uint64_t value = 0;
};

struct Submission {
  std::span<const Command> commands;
  std::span<const TimelineValue> waits;
  // Never empty: the last is the queue's progress value, which core adds (one higher with each
  // submission to the queue; backends may count on it, Vulkan recycles command buffers by it).
  std::span<const TimelineValue> signals;
  // The submission's number on its queue (its progress value) when its execution is to be timed
  // (ExecutionTimes); 0 when not: tracing off, a queue the backend cannot time, core's fences.
  std::uint64_t id = 0;
};

// The name of a command in traces: "copy", or the op's name (ops/op_list.hpp).
inline const char* command_name(const Command& command) {
  return visit_command(
      command, [](const CopyCommand&) { return "copy"; },
      // The op names are string literals: data() is null-terminated.
      [](const OpCommand& op) { return ops::op_name(op.kind()).data(); });
}

// Where a backend reports when its submissions ran on the device, once tracing asks for it
// (BackendDevice::enable_execution_timing). Times are host std::chrono::steady_clock nanoseconds
// (core/trace_clock.hpp): a backend with a device clock converts its timestamps (Vulkan:
// timestamp queries, lined up with VK_KHR/EXT_calibrated_timestamps; CUDA: timing events, apart
// from the timeline's non-timing ones, against an event recorded at a known host time). Thread-
// safe and non-blocking; may be called from any thread, late (when the backend reads its
// timestamps back), but before finish_teardown_work() returns.
class ExecutionTimes {
 public:
  virtual ~ExecutionTimes() = default;
  // A submission's device execution: from its first command starting to its last one ending.
  virtual void submission_ran(QueueKind queue, std::uint64_t submission, std::int64_t start_ns,
                              std::int64_t end_ns) noexcept = 0;
  // One command of it (index into Submission::commands), where the backend can time commands.
  virtual void command_ran(QueueKind queue, std::uint64_t submission, std::size_t command,
                           const char* name, std::int64_t start_ns,
                           std::int64_t end_ns) noexcept = 0;
  // The backend cannot time this queue (a queue family without timestamps, say): said once.
  virtual void cannot_time(QueueKind queue, std::string_view reason) noexcept = 0;
};

class BackendDevice {
 public:
  virtual ~BackendDevice() = default;

  // Filled in on open, including the queue assignments.
  virtual const DeviceInfo& info() const = 0;

  virtual Result<std::unique_ptr<BackendBuffer>> create_buffer(std::uint64_t size,
                                                               MemoryKind kind) = 0;
  virtual Result<std::unique_ptr<BackendTimeline>> create_timeline(std::uint64_t initial) = 0;

  // Makes existing host memory usable by the device in place (pinned for DMA), without a copy.
  // The returned buffer's host_data() is `data`; destroying it unregisters, never frees.
  virtual Result<std::unique_ptr<BackendBuffer>> register_host_memory(std::byte* data,
                                                                      std::uint64_t size,
                                                                      MemoryKind kind) {
    (void)data;
    (void)size;
    (void)kind;
    return Status(ErrorCode::unavailable, "this backend cannot register host memory");
  }

  // Interop (ferry/interop.hpp). A buffer over memory another library owns, without copying;
  // destroying it never frees the memory. The default: host kinds are registered like
  // register_host_memory, device memory cannot be.
  virtual Result<std::unique_ptr<BackendBuffer>> wrap_memory(std::byte* data, std::uint64_t size,
                                                             MemoryKind kind) {
    if (kind != MemoryKind::device) return register_host_memory(data, size, kind);
    return Status(ErrorCode::unavailable,
                  "this backend cannot use device memory it did not allocate");
  }
  // Makes the native stream `stream` wait for `value` of `timeline`, which core has checked to be
  // handed over already (submitted to this backend). Serialized with submit(). Where the backend
  // has no streams: unavailable (core then waits on the host).
  virtual Status stream_wait(BackendTimeline& timeline, std::uint64_t value, std::uintptr_t stream) {
    (void)timeline, (void)value, (void)stream;
    return Status(ErrorCode::unavailable, "this backend has no native streams");
  }
  // Makes `queue` wait (on the device) for everything enqueued on the native stream `stream` so
  // far, before any work submitted to it afterwards. Serialized with submit().
  virtual Status queue_wait_stream(QueueKind queue, std::uintptr_t stream) {
    (void)queue, (void)stream;
    return Status(ErrorCode::unavailable, "this backend has no native streams to order behind");
  }

  // Whether this device can run `op` at all: ok, or ErrorCode::unavailable saying what is
  // missing (a device feature the op's shader needs, say). Known when the device opens; asked by
  // Device::supports and before recording each op. The default: every op runs.
  virtual Status op_support(ops::OpKind op) const {
    (void)op;
    return Status();
  }

  // Whether the backend uses the scratch memory an op may offer it but does not need (ibp_decode's
  // copy of a host stream's tables, hamming_topk's pools): core asks for scratch only then, since
  // acquiring it can wait or fail. The default: no.
  virtual bool uses_optional_scratch(ops::OpKind op) const {
    (void)op;
    return false;
  }

  // Checks, when a supported op is recorded, what the backend already knows it cannot run with
  // these arguments (a limit such as Vulkan's storage-buffer window), so the error goes to the
  // caller recording it instead of failing a submission later. May run on any thread,
  // concurrently with everything else. The default accepts every command.
  virtual Status check_command(const OpCommand& command) const {
    (void)command;
    return Status();
  }

  // Enqueues the submission and returns without waiting for it. On error none of its signals
  // may ever be set, and whatever of it was already enqueued (CUDA cannot take work back) must
  // still finish before anything submitted later on the same queue: core then hands the queue
  // an empty submission that signals the failed one's progress value, and keeps its buffers
  // alive until that value is reached. A failed submission never stops the queue.
  virtual Status submit(QueueKind queue, const Submission& submission) = 0;

  // Copies `size` bytes from `src` (a buffer of `source`, another open device, perhaps of another
  // backend) at `src_offset` into this device's `dst` at `dst_offset` without staging through
  // ferry's host memory, where the backend can (CUDA: between two CUDA devices), and returns
  // true once dst holds them; false, having done nothing, where it cannot (core then stages the
  // copy through host memory). Core has checked the ranges and that the two devices differ.
  virtual Result<bool> copy_from_device(BackendDevice& source, BackendBuffer& src,
                                        std::uint64_t src_offset, BackendBuffer& dst,
                                        std::uint64_t dst_offset, std::uint64_t size) {
    (void)source, (void)src, (void)src_offset, (void)dst, (void)dst_offset, (void)size;
    return false;
  }

  // Tracing is on: from now on report the device execution of every submission with an id to
  // `times` (which outlives the device), and tell it (cannot_time) which queues cannot be timed
  // and why. ErrorCode::unavailable where no queue can be (the trace has host tracks only).
  virtual Status enable_execution_timing(ExecutionTimes* times) {
    constexpr const char* kWhy = "this backend does not time its submissions yet";
    for (int q = 0; q < kQueueKindCount; ++q) times->cannot_time(static_cast<QueueKind>(q), kWhy);
    return Status(ErrorCode::unavailable, kWhy);
  }

  // Tracing: report the times of every submission that has completed (core calls it once all
  // have, before the trace is written). Serialized with submit().
  virtual void report_execution_times() {}

  // Called at teardown once every submission has completed, before core destroys the queues'
  // timelines: afterwards the implementation must no longer touch anything those submissions
  // used. (lavapipe's queue thread still releases a semaphore's lock just after signalling it.)
  virtual void finish_teardown_work() {}

  // Validation-layer messages of warning/error severity counted so far (0 where not applicable).
  virtual std::uint64_t validation_message_count() const { return 0; }
};

struct ProbeResult {
  bool available = false;
  std::string reason;  // why not, when unavailable
  std::vector<DeviceInfo> devices;
  // A ferry setting for this backend is malformed (an environment variable such as
  // FERRY_VULKAN_QUEUES): Device::open fails with it rather than passing over the backend.
  Status config_error;
};

class Driver {
 public:
  virtual ~Driver() = default;
  virtual Backend backend() const = 0;
  // Loads what the backend needs at run time (loader, driver) and lists devices; never fails
  // hard: a missing loader or driver is reported in ProbeResult::reason.
  virtual ProbeResult probe() = 0;
  virtual Result<std::unique_ptr<BackendDevice>> open(int index, const DeviceOptions& options) = 0;
};

// Factories, one per backend compiled in; listed explicitly in core/drivers.cpp (no static
// registration that a linker could drop).
std::unique_ptr<Driver> create_cpu_driver();
std::unique_ptr<Driver> create_vulkan_driver();
std::unique_ptr<Driver> create_cuda_driver();

}  // namespace ferry::backend

