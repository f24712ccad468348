// The physical devices ferry can use, best first, each described as a DeviceInfo. probe() and
// open() both call this, so a device's index is the same in both.
#pragma once

#include <volk.h>

#include <string>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/status.hpp"
#include "vulkan/memory_types.hpp"
#include "vulkan/queue_families.hpp"
#include "vulkan/context.hpp"
#include "vulkan/cooperative_matrix.hpp"

namespace ferry::vulkan {

struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  VkDriverId driver_id = static_cast<VkDriverId>(0);  // 0: not reported
  DeviceInfo info;  // index = rank in the list; queues = the planned assignments
  QueuePlan queue_plan;
  VkPhysicalDeviceLimits limits{};
  std::uint64_t max_memory_allocation_size = 0;
  std::uint64_t max_buffer_size = 0;
  std::vector<MemoryTypeInfo> memory_types;       // indexed like VkPhysicalDeviceMemoryProperties
  std::uint32_t unusable_memory_type_bits = 0;    // protected / lazily allocated / AMD-specific
  HostMemoryImport host_memory_import;            // optional: for register_host_memory
  DeviceFeatures features;                        // optional features ops may need
  // Optional, for faster paths only (never a reason to refuse an op): hamming_topk's scan.
  CooperativeMatrixSupport cooperative_matrix;
  // Optional, for faster paths only: subgroup operations and size control (ibp_decode).
  SubgroupSupport subgroups;
  // Compute units (NVIDIA: SMs) and the threads each runs at a time, when the driver says
  // (VK_NV_shader_sm_builtins); 0 when unknown. Ops size their grids by them.
  std::uint32_t compute_units = 0;
  std::uint32_t threads_per_compute_unit = 0;
  // Optional, for traces only (vulkan/timestamps.hpp): timing submissions needs hostQueryReset
  // (queries are reset on the host); calibrated timestamps (VK_KHR_ or VK_EXT_, with the device
  // and CLOCK_MONOTONIC time domains) line device time up with the host's, else the submissions'
  // dispatch times bound it.
  float timestamp_period = 0;
  bool host_query_reset = false;
  const char* calibrated_timestamps = nullptr;  // the extension's name, or null
};

struct PhysicalDeviceList {
  std::vector<PhysicalDevice> usable;  // discrete, integrated, virtual, cpu, other; then order found
  std::string rejected;                // "name: why; name: why" for the devices left out
};

// Requirements: Vulkan 1.3, timelineSemaphore, synchronization2, VK_KHR_push_descriptor, a
// compute queue.
Result<PhysicalDeviceList> list_physical_devices(VkInstance instance);

}  // namespace ferry::vulkan
