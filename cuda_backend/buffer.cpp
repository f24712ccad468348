#include "buffer.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "status.hpp"

namespace ferry::cuda {

Result<std::unique_ptr<CudaBuffer>> CudaBuffer::allocate(int device, std::uint64_t size,
                                                         MemoryKind kind) {
  void* data = nullptr;
  cudaError_t error = cudaSuccess;
  const char* call = "cudaMalloc";
  if (kind == MemoryKind::device) {
    error = cudaMalloc(&data, static_cast<std::size_t>(size));
  } else {
    // Portable: usable from every device's context. Mapped: kernels (fill, host-to-host copy)
    // reach it at its host address; implied by unified addressing, stated for clarity.
    // Not write-combined, not even for host_upload: write-combined memory is uncached for the
    // host, so every host read of it (a user reading back what it staged, host_span checks in
    // tests) is an order of magnitude slower, and on the PCIe Gen5 host we measure, plain pinned
    // memory already reaches the link's copy bandwidth (docs/TIMELINE.md, CUDA section).
    call = "cudaHostAlloc";
    error = cudaHostAlloc(&data, static_cast<std::size_t>(size),
                          cudaHostAllocPortable | cudaHostAllocMapped);
  }
  if (error != cudaSuccess) {
    return cuda_status(error, std::string(call) + " of " + detail::describe_bytes(size) + " of " +
                                  std::string(to_string(kind)) + " memory");
  }
  return std::unique_ptr<CudaBuffer>(
      new CudaBuffer(device, static_cast<std::byte*>(data), size, kind, Origin::allocated));
}

Result<std::unique_ptr<CudaBuffer>> CudaBuffer::register_host(int device, std::byte* data,
                                                              std::uint64_t size, MemoryKind kind) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaHostRegister(data, static_cast<std::size_t>(size),
                                              cudaHostRegisterPortable | cudaHostRegisterMapped));
  // Kernels (fill, host-to-host copies) use one address for host and device; with unified
  // addressing the registered range is mapped at its host address. Refuse rather than guess.
  void* mapped = nullptr;
  const cudaError_t error = cudaHostGetDevicePointer(&mapped, data, 0);
  if (error != cudaSuccess || mapped != data) {
    (void)cudaHostUnregister(data);
    (void)cudaGetLastError();
    return Status(ErrorCode::unavailable,
                  "cudaHostRegister: registered memory of " + detail::describe_bytes(size) +
                      " is not mapped at its host address on this device");
  }
  return std::unique_ptr<CudaBuffer>(new CudaBuffer(device, data, size, kind, Origin::registered));
}

std::unique_ptr<CudaBuffer> CudaBuffer::borrow(int device, std::byte* data, std::uint64_t size,
                                               MemoryKind kind) {
  return std::unique_ptr<CudaBuffer>(new CudaBuffer(device, data, size, kind, Origin::borrowed));
}

NativeMemory CudaBuffer::native_memory() noexcept {
  NativeMemory memory;
  memory.kind = is_host() ? NativeMemoryKind::cuda_pinned_host : NativeMemoryKind::cuda_device;
  memory.data = data_;
  memory.size = size_;
  memory.device_ordinal = device_;
  return memory;
}

CudaBuffer::~CudaBuffer() {
  // May run on any thread; core guarantees no submission still uses the memory. Errors cannot
  // be reported from here (a sticky error has already been reported by the work that caused it).
  if (origin_ == Origin::borrowed) return;
  (void)cudaSetDevice(device_);
  if (origin_ == Origin::registered) {
    (void)cudaHostUnregister(data_);
  } else if (is_host()) {
    (void)cudaFreeHost(data_);
  } else {
    (void)cudaFree(data_);
  }
  (void)cudaGetLastError();
}

Result<std::byte*> binding_address(const backend::Binding& binding, const char* role) {
  auto* buffer = dynamic_cast<CudaBuffer*>(binding.buffer);
  if (buffer == nullptr) {
    return Status(ErrorCode::internal, std::string("CUDA: the ") + role + " is not a CUDA buffer");
  }
  if (!detail::range_within(binding.offset, binding.size, buffer->size())) {
    return Status(ErrorCode::internal, std::string("CUDA: the ") + role + " range " +
                                           detail::describe_range(binding.offset, binding.size) +
                                           " exceeds its " + std::to_string(buffer->size()) +
                                           "-byte buffer");
  }
  return buffer->data() + binding.offset;
}

}  // namespace ferry::cuda
