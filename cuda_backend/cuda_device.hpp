// CUDA device: one non-blocking stream per ferry queue (compute, upload, download), so both copy
// engines and the SMs work at once; submissions become stream work plus timeline events.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>

#include "core/backend.hpp"

namespace ferry::backend::cuda {

class CudaBuffer;

class CudaDevice final : public BackendDevice {
 public:
  // `info` describes device `index` (from the driver's probe); opening fills in the queues.
  static Result<std::unique_ptr<CudaDevice>> open(int index, DeviceInfo info);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const DeviceInfo& info() const override { return info_; }
  Result<std::unique_ptr<BackendBuffer>> create_buffer(std::uint64_t size,
                                                       MemoryKind kind) override;
  Result<std::unique_ptr<BackendBuffer>> register_host_memory(std::byte* data, std::uint64_t size,
                                                              MemoryKind kind) override;
  Result<std::unique_ptr<BackendTimeline>> create_timeline(std::uint64_t initial) override;
  Status submit(QueueKind queue, const Submission& submission) override;
  // Synchronizes ferry's streams: work a failed submission had already enqueued may still be
  // running behind the last signal core waited for.
  void finish_teardown_work() override;

 private:
  CudaDevice(int index, DeviceInfo info) : index_(index), info_(std::move(info)) {}
  Status create_streams();
  Status record_copy(const CopyCommand& copy, cudaStream_t stream) const;
  Status record_fill(const FillCommand& fill, cudaStream_t stream) const;
  Status record_normalize(const NormalizeCommand& normalize, cudaStream_t stream) const;

  const int index_;
  DeviceInfo info_;
  std::array<cudaStream_t, kQueueKindCount> streams_{};  // indexed by QueueKind
  unsigned max_blocks_ = 1;  // grid size cap for the backend's kernels
  unsigned normalize_max_blocks_ = 1;  // the normalize kernel's: as many as are resident at once
};

}  // namespace ferry::backend::cuda
