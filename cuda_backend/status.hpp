// CUDA errors as ferry::Status: every cudaError_t is converted at its call site, keeping the call
// text, the error's name and description, and the file:line (Status::where) of the call.
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>
#include <string>
#include <string_view>

#include "ferry/status.hpp"

namespace ferry::cuda {

// True for errors that corrupt the CUDA context: every later call in the process fails the same
// way, so the device is lost (cudaErrorIllegalAddress, cudaErrorLaunchFailure, ...).
bool is_sticky(cudaError_t error) noexcept;

// out_of_memory for allocation failures, device_lost for sticky errors, unavailable for a missing
// driver or device, backend_error for everything else.
ErrorCode error_code_for(cudaError_t error) noexcept;

// "cudaErrorIllegalAddress (an illegal memory access was encountered)".
std::string describe(cudaError_t error);

// "<call> failed: <describe(error)>" as a Status created at `where`. Also clears the runtime's
// per-thread last error (a no-op for sticky errors), so a later launch check does not report a
// failure that was already handled.
Status cuda_status(cudaError_t error, std::string_view call,
                   std::source_location where = std::source_location::current());

}  // namespace ferry::cuda

// Returns the converted error from the enclosing function (Status or Result<T>) when `call` fails.
#define FERRY_CUDA_RETURN_IF_ERROR(call)                                                    \
  do {                                                                                      \
    if (const cudaError_t ferry_cuda_error_ = (call); ferry_cuda_error_ != cudaSuccess) {   \
      return ::ferry::cuda::cuda_status(ferry_cuda_error_, #call,                  \
                                                 std::source_location::current());          \
    }                                                                                       \
  } while (0)
