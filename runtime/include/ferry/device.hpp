// Device: a backend's GPU (or the CPU reference), opened by backend name and index.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"
#include "ferry/types.hpp"

namespace ferry {

namespace detail {
struct DeviceState;
}

class Buffer;
class Queue;
class StagingPool;
class Timeline;
struct StagingPoolOptions;

struct QueueFamilyInfo {
  std::uint32_t index = 0;
  std::uint32_t queue_count = 0;
  bool graphics = false;
  bool compute = false;
  bool transfer = false;
  // Bits of the family's device timestamps (Vulkan timestampValidBits): 0 where its queues
  // cannot be timed (a trace then says so), below 64 where the counter wraps.
  std::uint32_t timestamp_valid_bits = 0;
};

// Which native queue serves one of ferry's queues.
struct QueueAssignment {
  QueueKind kind = QueueKind::compute;
  std::uint32_t family = 0;
  std::uint32_t index = 0;
  bool shared = false;  // another of ferry's queues uses the same native queue
};

struct DeviceInfo {
  Backend backend = Backend::cpu;
  int index = 0;
  std::string name;
  std::string driver;           // driver / API version, as the backend reports it
  bool is_cpu = false;          // a software implementation (CPU reference, lavapipe)
  std::uint32_t cpu_threads = 0;  // the CPU backend: the threads an op runs on; 0 elsewhere
  std::uint64_t device_memory_bytes = 0;
  std::uint64_t host_visible_memory_bytes = 0;
  std::vector<QueueFamilyInfo> queue_families;  // empty where the backend has no such notion
  std::vector<QueueAssignment> queues;          // one entry per QueueKind, once opened or planned
  // Where the device sits on the host: its PCI address ("0000:3b:00.0", lower case; empty where
  // the backend cannot tell: the CPU reference, lavapipe, a Vulkan driver without
  // VK_EXT_pci_bus_info) and the host's NUMA node it is attached to (sysfs; -1 when unknown).
  std::string pci_bus_id;
  int numa_node = -1;
  // Devices of the same backend (their indices) this one reads and writes directly, GPU to GPU
  // (CUDA peer access: NVLink or PCIe peer-to-peer): copy_between_devices is fastest between
  // these. Empty where the backend has no such path (the CPU reference, Vulkan).
  std::vector<int> peer_devices;
  // Vulkan: the physical devices in this one's device group, itself included (1: a group of its
  // own); 0 for other backends. ferry opens each physical device on its own: groups of several
  // are reported, not used (copies between their devices stage through host memory).
  std::uint32_t device_group_size = 0;
  // The largest buffer range one op binds at once (Vulkan: maxStorageBufferRange, within
  // maxMemoryAllocationSize); 0 where only
  // memory limits it (the CPU reference, CUDA). BinaryIndex sizes its device segments by it.
  std::uint64_t max_op_binding_bytes = 0;
  // How hamming_topk (and so BinaryIndex's search) scans on this device, in words: the units or
  // the instruction set its distances come from (docs/OPS.md, "hamming_topk"), and why not a
  // faster one where the device lacks it. Empty where the backend does not say.
  std::string search_path;
};

struct BackendInfo {
  Backend backend = Backend::cpu;
  bool available = false;
  std::string reason;  // why it is unavailable; empty when available
  std::vector<DeviceInfo> devices;
};

// Every backend compiled in, whether it can be used here, and its devices.
std::vector<BackendInfo> list_backends();

// The names of the ops every backend implements (ferry/ops/: "fill", "normalize",
// "binary_quantize"), for Device::supports.
std::vector<std::string_view> list_ops();

enum class MessageSeverity : std::uint8_t { info, warning, error };

// Whether ferry keeps a device's host-side work on the device's NUMA node (DeviceOptions).
enum class NumaPlacement : std::uint8_t { automatic, off };

struct DeviceOptions {
  // Enable the API's validation (Vulkan: Khronos validation layer with synchronization
  // validation). Also enabled by the environment variable FERRY_VALIDATION set to anything but
  // "" or "0".
  bool validation = false;
  // Receives validation and driver messages. May be called from any thread.
  std::function<void(MessageSeverity, std::string_view)> message_sink;
  // Device memory that ops needing scratch space (multi-pass kernels) take per command: slabs of
  // this size, at most this many, made when an op first asks and reused after.
  std::uint64_t scratch_slab_bytes = 64ull << 20;
  std::uint32_t scratch_max_slabs = 4;
  // Writes a trace of the device's work to this file, in Chrome's trace-event JSON (open it in
  // ui.perfetto.dev or chrome://tracing): each ferry queue's submissions on the host and their
  // execution on the device, host waits, staging-pool acquires, pipelines and chunked transfers,
  // pool and in-flight counters. Empty: the environment variable FERRY_TRACE names the file, or
  // there is no trace. Devices of one process tracing to the same path share the file (one
  // process of the trace each); it is created when the first opens (Device::open fails if it
  // cannot be) and written when the last is closed or released. A write error is returned by
  // that Device::close, or sent to message_sink (else stderr) when the last handle goes.
  std::string trace_path;
  // On a host of several NUMA nodes, automatic keeps the host side of this device's work on the
  // node the device is attached to (DeviceInfo::numa_node): staging pools' and host buffers'
  // pinned memory is allocated from a thread running on that node's CPUs (so its pages are the
  // node's), and the threads ferry starts for the device (pipelines' producer and workers,
  // ShardedIndex's per-shard steps) run there, so that several GPUs' transfers each use their
  // own node's memory instead of crossing the link between sockets. Nothing changes on a host
  // of one node, where the node is unknown, or where the process may not run on that node's
  // CPUs. The environment variable FERRY_NUMA=off turns it off as well.
  NumaPlacement numa_placement = NumaPlacement::automatic;
  // The CPUs (as the OS numbers them) for this device's host-side work, instead of its node's:
  // the same placement on any host (to keep ferry off the cores an application reserves, say).
  // Empty: numa_placement decides. CPUs the process may not use are left out; if none is left,
  // the work runs anywhere. Each must be 0 to 2^20 - 1.
  std::vector<int> host_cpus;
};

// A handle to an open device; copies share the same device. The device stays alive while any
// handle, buffer, timeline or pool made from it exists; close() ends its use explicitly.
class Device {
 public:
  // backend: "auto", "cpu", "vulkan" or "cuda". "auto" takes the first backend whose device 0 is
  // a GPU (cuda, then vulkan), else the CPU reference backend: it is much faster than a Vulkan
  // implementation that runs on the CPU (Mesa's lavapipe), which must be asked for by name.
  static Result<Device> open(std::string_view backend = "auto", int index = 0,
                             const DeviceOptions& options = {});

  Device() = default;

  const DeviceInfo& info() const;
  Backend backend() const { return info().backend; }

  Queue queue(QueueKind kind) const;

  Result<Buffer> create_buffer(std::uint64_t size, MemoryKind kind = MemoryKind::device) const;
  // Pins existing host memory in place (cudaHostRegister, VK_EXT_external_memory_host) and
  // returns a Buffer over it, usable as a copy source or target without a staging copy. The
  // memory must stay valid until the Buffer and every submission using it are gone. kind is
  // host_upload or host_readback. Backends may require page alignment (the error says so).
  Result<Buffer> register_host_memory(std::span<std::byte> memory,
                                      MemoryKind kind = MemoryKind::host_upload) const;
  Result<Timeline> create_timeline(std::uint64_t initial_value = 0) const;
  Result<StagingPool> create_staging_pool(const StagingPoolOptions& options) const;

  // Whether this device can run the op named `op` (list_ops()): ok, or ErrorCode::unavailable
  // with the reason (a device feature the op's kernel needs, say), known when the device opens;
  // recording the op then fails with the same error. invalid_argument for a name that is no op.
  Status supports(std::string_view op) const;

  // Waits until every submission made so far on every queue has completed or failed, and retires
  // their resources. Ok either way: a failure was reported to the work that failed.
  Status wait_idle(Timeout timeout = kInfinite) const;

  // Refuses new work from here on and fails submissions held back on timeline values nobody has
  // submitted (nothing could release them any more), waits for the work in flight (it completes
  // and can still be waited for), then marks the device closed: later calls on it or on any of
  // its objects return ErrorCode::device_closed. Never waits for work that cannot complete; the
  // timeout bounds the wait for work in flight. Native resources are freed with the last handle.
  Status close(Timeout timeout = kInfinite);

  bool is_open() const;
  // Number of validation messages of warning or error severity seen so far.
  std::uint64_t validation_message_count() const;

  explicit operator bool() const { return state_ != nullptr; }
  const std::shared_ptr<detail::DeviceState>& state() const { return state_; }

 private:
  explicit Device(std::shared_ptr<detail::DeviceState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::DeviceState> state_;
};

}  // namespace ferry
