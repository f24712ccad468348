// CUDA device: one non-blocking stream per ferry queue (compute, upload, download), so both copy
// engines and the SMs work at once; submissions become stream work plus timeline events.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/backend.hpp"
#include "op_kernels.hpp"
#include "stream_timer.hpp"

namespace ferry::cuda {

class CudaBuffer;

class CudaDevice final : public backend::BackendDevice {
 public:
  // `info` describes device `index` (from the driver's probe); opening fills in the queues.
  static Result<std::unique_ptr<CudaDevice>> open(int index, DeviceInfo info);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const DeviceInfo& info() const override { return info_; }
  Result<std::unique_ptr<backend::BackendBuffer>> create_buffer(std::uint64_t size,
                                                                MemoryKind kind) override;
  Result<std::unique_ptr<backend::BackendBuffer>> register_host_memory(std::byte* data,
                                                                       std::uint64_t size,
                                                                       MemoryKind kind) override;
  Result<std::unique_ptr<backend::BackendTimeline>> create_timeline(
      std::uint64_t initial) override;
  // Interop (ferry/interop.hpp): device memory of this device and page-locked host memory are
  // borrowed as they are, other host memory is registered.
  Result<std::unique_ptr<backend::BackendBuffer>> wrap_memory(std::byte* data, std::uint64_t size,
                                                              MemoryKind kind) override;
  Status stream_wait(backend::BackendTimeline& timeline, std::uint64_t value,
                     std::uintptr_t stream) override;
  Status queue_wait_stream(QueueKind queue, std::uintptr_t stream) override;
  // ibp_decode copies a host stream's tables to the scratch (ops/ibp_decode_kernel.cpp);
  // hamming_topk's pooled search keeps its pools there (ops/hamming_topk_kernel.cpp).
  bool uses_optional_scratch(ops::OpKind op) const override {
    return op == ops::OpKind::ibp_decode ||
           (op == ops::OpKind::hamming_topk && kernel_for<ops::HammingTopkArgs>(kernels_).pools());
  }
  Status submit(QueueKind queue, const backend::Submission& submission) override;
  // From another CUDA device's buffer: one copy on a stream of this device, over NVLink or PCIe
  // peer access where the two GPUs have it (enabled on first use), else staged by the driver;
  // within one GPU (two ferry devices over it), a device copy.
  Result<bool> copy_from_device(backend::BackendDevice& source, backend::BackendBuffer& src,
                                std::uint64_t src_offset, backend::BackendBuffer& dst,
                                std::uint64_t dst_offset, std::uint64_t size) override;
  // Timing events around each submission on every stream (stream_timer.hpp).
  Status enable_execution_timing(backend::ExecutionTimes* times) override;
  void report_execution_times() override;
  // Synchronizes ferry's streams: work a failed submission had already enqueued may still be
  // running behind the last signal core waited for.
  void finish_teardown_work() override;

 private:
  CudaDevice(int index, DeviceInfo info) : index_(index), info_(std::move(info)) {}
  Status create_streams();
  Status record_copy(const backend::CopyCommand& copy, cudaStream_t stream) const;

  const int index_;
  DeviceInfo info_;
  std::array<cudaStream_t, kQueueKindCount> streams_{};  // indexed by QueueKind
  // queue_wait_stream's event per queue, made on first use and re-recorded on each (a wait
  // captures the event's state when it is enqueued; calls are serialized with submit()).
  std::array<cudaEvent_t, kQueueKindCount> stream_wait_events_{};
  std::mutex peer_mutex_;            // guards peer_stream_, and copies from other devices
  cudaStream_t peer_stream_ = nullptr;  // made on the first copy from another device
  std::array<StreamTimer, kQueueKindCount> timers_;      // inactive unless tracing
  unsigned max_blocks_ = 1;  // grid size cap for the backend's own copy kernel
  OpKernels kernels_;        // every op's kernel (op_kernels.hpp)
};

}  // namespace ferry::cuda
