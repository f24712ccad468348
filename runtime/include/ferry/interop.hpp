// Interop: ferry memory as native addresses, other libraries' memory as ferry buffers, and
// ordering between ferry's timelines and native CUDA streams. What the Python module's DLPack
// exchange (python/) is built on; usable from C++ the same way (a cuBLAS call between two ferry
// submissions, say).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "ferry/buffer.hpp"
#include "ferry/device.hpp"
#include "ferry/queue.hpp"
#include "ferry/status.hpp"
#include "ferry/timeline.hpp"
#include "ferry/types.hpp"

namespace ferry {

// What a native address points to.
enum class NativeMemoryKind : std::uint8_t {
  host,              // ordinary host memory the CPU reads and writes (DLPack kDLCPU)
  cuda_pinned_host,  // page-locked host memory CUDA reaches at the same address (kDLCUDAHost)
  cuda_device,       // CUDA device memory of device `device_ordinal` (kDLCUDA)
};
std::string_view to_string(NativeMemoryKind kind) noexcept;

struct NativeMemory {
  NativeMemoryKind kind = NativeMemoryKind::host;
  std::byte* data = nullptr;
  std::uint64_t size = 0;
  int device_ordinal = 0;  // the CUDA device (cudaSetDevice's number) for the cuda kinds; else 0
};

// The native address of the range `memory` names (a whole buffer, or a lease's range). The CPU
// backend's memory, device kind included, is host memory; the CUDA backend's is CUDA device
// memory or CUDA-pinned host memory; Vulkan host buffers and leases are host memory (mapped).
// The memory stays valid while `memory`'s buffer or lease is held; the host may read it only once
// the work writing it has completed (or, on CUDA, after ordering a stream behind that work with
// native_stream_wait). Errors: released; unavailable for Vulkan device memory, which has no
// address outside Vulkan (ferry does not export Vulkan memory to other APIs).
Result<NativeMemory> native_memory(const BufferRef& memory);

// A Buffer over memory another library owns, without copying. `owner` is kept (its deleter may
// run on any thread, after the last submission using the memory has completed) until the Buffer
// and every submission using it are gone; the memory must stay valid that long.
//   kind device: the CPU backend takes any host memory; the CUDA backend takes CUDA device memory
//     of its own device (checked: cudaPointerGetAttributes; the size is the caller's word);
//     Vulkan cannot (unavailable: importing memory into Vulkan device memory is not supported).
//   kind host_upload / host_readback: CPU backend: any host memory; CUDA: memory that is already
//     page-locked (cudaHostAlloc, a PyTorch pinned tensor) is used as it is, other host memory is
//     registered (cudaHostRegister, undone when the Buffer goes); Vulkan: registered
//     (VK_EXT_external_memory_host, page-aligned; the error says so).
// Errors: invalid_argument for an empty range or memory of the wrong kind (host memory given as
// CUDA device memory, another GPU's memory), unavailable where the backend cannot, and the
// backend's error where registering fails.
Result<Buffer> wrap_native_memory(const Device& device, std::span<std::byte> memory,
                                  MemoryKind kind, std::shared_ptr<void> owner = nullptr);

// Orders a native CUDA stream after `point`: work enqueued on `stream` from now on starts once
// the point is reached, without a host wait (cudaStreamWaitEvent on the event of the point's
// signal). `stream` is a cudaStream_t of the point's device, as an integer (1: the legacy default
// stream, 2: the per-thread default stream, as in DLPack). Where no stream wait is possible (the
// CPU and Vulkan backends, or a point whose submission ferry still holds back) it waits on the
// host until the point is reached, which orders any stream too. A point without a timeline, or
// one already reached, returns at once. Errors: timeline_failed (the point will never be
// reached), timeout, device_closed, and CUDA's error for a bad stream.
Status native_stream_wait(const TimelinePoint& point, std::uintptr_t stream,
                          Timeout timeout = kInfinite);

// The point on `queue`'s progress timeline at which everything enqueued on the native CUDA
// stream `stream` so far has completed: the queue's stream waits for an event recorded on
// `stream` (no host wait), then an empty submission is made on the queue. Later submissions on
// the queue run after the stream's work; other queues order behind it by waiting on the point.
// Errors: unavailable on backends other than CUDA (they have no streams to order behind), and
// what Queue::submit returns.
Result<TimelinePoint> native_stream_point(const Queue& queue, std::uintptr_t stream);

}  // namespace ferry
