// CUDA buffer: cudaMalloc'd device memory, or pinned host memory from cudaHostAlloc that the
// device reaches at the same address (unified virtual addressing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/backend.hpp"

namespace ferry::cuda {

class CudaBuffer final : public backend::BackendBuffer {
 public:
  // Allocates on `device` (the caller has made it current). Failure: ErrorCode::out_of_memory
  // naming the size, or the converted CUDA error.
  static Result<std::unique_ptr<CudaBuffer>> allocate(int device, std::uint64_t size,
                                                      MemoryKind kind);
  // Pins user memory in place (cudaHostRegister); destruction unregisters it, never frees it.
  static Result<std::unique_ptr<CudaBuffer>> register_host(int device, std::byte* data,
                                                           std::uint64_t size, MemoryKind kind);
  // Memory another library owns (ferry/interop.hpp): used as it is; destruction leaves it alone.
  static std::unique_ptr<CudaBuffer> borrow(int device, std::byte* data, std::uint64_t size,
                                            MemoryKind kind);
  ~CudaBuffer() override;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  std::byte* host_data() noexcept override { return is_host() ? data_ : nullptr; }
  NativeMemory native_memory() noexcept override;

  // The address kernels and copies use (for host kinds, also the host address).
  std::byte* data() const noexcept { return data_; }
  std::uint64_t size() const noexcept { return size_; }
  MemoryKind kind() const noexcept { return kind_; }
  bool is_host() const noexcept { return kind_ != MemoryKind::device; }

 private:
  enum class Origin : std::uint8_t {
    allocated,   // cudaMalloc / cudaHostAlloc: freed here
    registered,  // user memory pinned by cudaHostRegister: unregistered here
    borrowed,    // memory another library owns: left alone
  };
  CudaBuffer(int device, std::byte* data, std::uint64_t size, MemoryKind kind, Origin origin)
      : device_(device), data_(data), size_(size), kind_(kind), origin_(origin) {}

  int device_;
  std::byte* data_;
  std::uint64_t size_;
  MemoryKind kind_;
  Origin origin_;
};

// The address of `binding`'s first byte, after checking that it is a CUDA buffer and that the
// range lies inside it (core checked it; checked again because a bad range here is memory
// corruption). ErrorCode::internal naming `role` otherwise.
Result<std::byte*> binding_address(const backend::Binding& binding, const char* role);

}  // namespace ferry::cuda
