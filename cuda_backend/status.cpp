#include "status.hpp"

namespace ferry::cuda {

bool is_sticky(cudaError_t error) noexcept {
  switch (error) {
    // The CUDA documentation says of each of these that the process is left in an inconsistent
    // state and any further CUDA work will return the same error.
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorExternalDevice:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

ErrorCode error_code_for(cudaError_t error) noexcept {
  if (error == cudaSuccess) return ErrorCode::ok;
  if (error == cudaErrorMemoryAllocation) return ErrorCode::out_of_memory;
  if (is_sticky(error)) return ErrorCode::device_lost;
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorNoKernelImageForDevice:
      return ErrorCode::unavailable;
    default:
      return ErrorCode::backend_error;
  }
}

std::string describe(cudaError_t error) {
  // Both return static strings, also for codes this runtime does not know.
  const char* name = cudaGetErrorName(error);
  const char* text = cudaGetErrorString(error);
  // Appends only: GCC 12 at -O3 reports a false -Wrestrict on `"literal" + std::string&&`.
  std::string out = name ? name : "cudaError";
  out += ' ';
  out += std::to_string(static_cast<int>(error));
  out += " (";
  out += text ? text : "no description";
  out += ')';
  return out;
}

Status cuda_status(cudaError_t error, std::string_view call, std::source_location where) {
  (void)cudaGetLastError();
  std::string message(call);
  message += " failed: ";
  message += describe(error);
  return Status(error_code_for(error), std::move(message), where);
}

}  // namespace ferry::cuda
