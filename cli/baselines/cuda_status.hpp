// What the CUDA runtime baselines (cuda_memcpy, cuda_popcount, cuda_gather) share: a CUDA
// runtime error as a ferry Status naming the call, choosing a device, and device memory freed
// whatever happens.
// Included only where FERRY_CLI_HAVE_CUDA is defined.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "ferry/status.hpp"

namespace ferry::cli {

inline Status cuda_status(const char* call, cudaError_t error) {
  if (error == cudaSuccess) return ok_status();
  return Status(ErrorCode::backend_error, std::string(call) + ": " + cudaGetErrorName(error) +
                                              " (" + cudaGetErrorString(error) + ")");
}

// Makes device `index` of the CUDA runtime current (cudaErrorInvalidDevice past the last).
inline Status cuda_use_device(int index) {
  int count = 0;
  FERRY_RETURN_IF_ERROR(cuda_status("cudaGetDeviceCount", cudaGetDeviceCount(&count)));
  return cuda_status("cudaSetDevice",
                     index >= 0 && index < count ? cudaSetDevice(index) : cudaErrorInvalidDevice);
}

struct CudaDeviceMemory {
  void* pointer = nullptr;
  CudaDeviceMemory() = default;
  CudaDeviceMemory(const CudaDeviceMemory&) = delete;
  CudaDeviceMemory& operator=(const CudaDeviceMemory&) = delete;
  ~CudaDeviceMemory() {
    if (pointer != nullptr) cudaFree(pointer);
  }
};

}  // namespace ferry::cli
