// The CUDA driver entry: probing and opening devices through the statically linked CUDA runtime,
// which loads libcuda at run time, so a machine without an NVIDIA driver just reports CUDA
// unavailable with the runtime's reason.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cctype>
#include <memory>
#include <string>
#include <utility>

#include "core/backend.hpp"
#include "device.hpp"
#include "status.hpp"

namespace ferry::cuda {
namespace {

using backend::BackendDevice;
using backend::Driver;
using backend::ProbeResult;

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

// Why the first runtime call failed, in words. cudaErrorInsufficientDriver means either no driver
// at all or one too old, and its own text blames the version in both cases: tell them apart.
std::string why_no_device(cudaError_t error) {
  int driver_version = 0;
  int runtime_version = 0;
  (void)cudaDriverGetVersion(&driver_version);
  (void)cudaRuntimeGetVersion(&runtime_version);
  (void)cudaGetLastError();
  if (driver_version == 0) return "no NVIDIA driver found (libcuda.so.1 could not be loaded)";
  if (error == cudaErrorInsufficientDriver) {
    return "the NVIDIA driver supports CUDA " + version_text(driver_version) +
           ", this build of ferry needs " + version_text(runtime_version) + " or newer";
  }
  return "cudaGetDeviceCount failed: " + describe(error);
}

// sysfs names PCI devices in lower case; CUDA gives upper case ("0000:3B:00.0").
std::string lower_case(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

Result<DeviceInfo> describe_device(int index) {
  cudaDeviceProp properties{};
  FERRY_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, index));
  int driver_version = 0;
  int runtime_version = 0;
  FERRY_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&driver_version));
  FERRY_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&runtime_version));

  DeviceInfo info;
  info.backend = Backend::cuda;
  info.index = index;
  info.name = properties.name;
  info.driver = "CUDA driver " + version_text(driver_version) + ", runtime " +
                version_text(runtime_version) + ", sm_" + std::to_string(properties.major) +
                std::to_string(properties.minor);
  info.is_cpu = false;
  info.device_memory_bytes = properties.totalGlobalMem;
  // Pinned host memory comes from system RAM; its real limit is what the OS lets us lock.
  info.host_visible_memory_bytes = physical_memory_bytes();
  char bus_id[32] = {};
  FERRY_CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, index));
  info.pci_bus_id = lower_case(bus_id);
  int count = 0;
  FERRY_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  for (int other = 0; other < count; ++other) {
    int can_access = 0;
    if (other != index) FERRY_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can_access, index, other));
    if (can_access != 0) info.peer_devices.push_back(other);
  }
  // No queue families in CUDA; queues are filled in when the device is opened (three streams).
  for (int kind = 0; kind < kQueueKindCount; ++kind) {
    QueueAssignment assignment;
    assignment.kind = static_cast<QueueKind>(kind);
    assignment.index = static_cast<std::uint32_t>(kind);
    info.queues.push_back(assignment);
  }
  return info;
}

class CudaDriver final : public Driver {
 public:
  Backend backend() const override { return Backend::cuda; }

  ProbeResult probe() override {
    ProbeResult result;
    int count = 0;
    // The first runtime call: loads libcuda.so.1. No driver, an old driver or no GPU all end
    // up here as an error code, never as a crash.
    if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
      result.reason = why_no_device(error);
      (void)cudaGetLastError();
      return result;
    }
    if (count <= 0) {
      result.reason = "no CUDA device found";
      return result;
    }
    for (int index = 0; index < count; ++index) {
      auto info = describe_device(index);
      if (!info.ok()) {
        result.devices.clear();
        result.reason = "CUDA device " + std::to_string(index) + ": " + info.status().message();
        return result;
      }
      result.devices.push_back(std::move(*info));
    }
    result.available = true;
    return result;
  }

  Result<std::unique_ptr<BackendDevice>> open(int index, const DeviceOptions& options) override {
    // Validation has no CUDA counterpart inside the process (compute-sanitizer wraps the whole
    // program from outside); the message sink gets nothing from this backend.
    (void)options;
    int count = 0;
    FERRY_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
    if (index < 0 || index >= count) {
      return Status(ErrorCode::out_of_range, "CUDA device index " + std::to_string(index) +
                                                 " is out of range: " + std::to_string(count) +
                                                 " device(s)");
    }
    FERRY_ASSIGN_OR_RETURN(DeviceInfo info, describe_device(index));
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device,
                           CudaDevice::open(index, std::move(info)));
    return std::unique_ptr<BackendDevice>(std::move(device));
  }
};

}  // namespace
}  // namespace ferry::cuda

namespace ferry::backend {

std::unique_ptr<Driver> create_cuda_driver() { return std::make_unique<cuda::CudaDriver>(); }

}  // namespace ferry::backend
