// What a VkDevice's objects (buffers, timelines, queues, pipelines) share: the device handle, its
// function table and the physical device's limits. Owned by VulkanDevice, which outlives every
// object made from it (core destroys buffers and timelines before the device).
#pragma once

#include <volk.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "vulkan/memory_types.hpp"

namespace ferry::vulkan {

// Every ferry buffer: a copy source and target, and a storage buffer for the shaders.
inline constexpr VkBufferUsageFlags kBufferUsage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                                   VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;

// VK_EXT_external_memory_host as ferry uses it: host allocations imported as buffer memory.
struct HostMemoryImport {
  bool supported = false;               // on a VkDevice: the extension is enabled
  std::string unsupported_reason;       // why not, when !supported
  std::uint64_t pointer_alignment = 0;  // minImportedHostPointerAlignment
};

// The optional device features an op's shader may need, and the compute limits above Vulkan's
// minimums it relies on. Each op's pipeline says which it needs (kNeeds); physical_devices.cpp
// reads which the device has; the VkDevice enables the features of the ops it can run, and an op
// whose needs are not all there is refused when recorded (and by Device::supports), naming what
// is missing. A new op needing a feature not listed here adds it here and in those two places.
struct DeviceFeatures {
  bool shader_int64 = false;           // shaderInt64
  bool storage_buffer_8bit = false;    // storageBuffer8BitAccess
  bool storage_buffer_16bit = false;   // storageBuffer16BitAccess
  std::uint32_t compute_shared_bytes = 0;    // maxComputeSharedMemorySize, at least
  std::uint32_t workgroup_invocations = 0;   // maxComputeWorkGroupInvocations, at least

  // Every feature either has, the larger of each limit.
  DeviceFeatures operator|(const DeviceFeatures& other) const {
    return {shader_int64 || other.shader_int64, storage_buffer_8bit || other.storage_buffer_8bit,
            storage_buffer_16bit || other.storage_buffer_16bit,
            std::max(compute_shared_bytes, other.compute_shared_bytes),
            std::max(workgroup_invocations, other.workgroup_invocations)};
  }
  // The Vulkan names of the features this has and `available` lacks, and of the limits it
  // needs above `available`'s, comma separated; empty when none.
  std::string missing_from(const DeviceFeatures& available) const {
    std::string missing;
    auto add = [&](const std::string& what) {
      if (!missing.empty()) missing += ", ";
      missing += what;
    };
    auto check = [&](bool needed, bool present, const char* name) {
      if (needed && !present) add(name);
    };
    auto check_limit = [&](std::uint32_t needed, std::uint32_t present, const char* name) {
      if (needed > present) {
        add(std::string(name) + " of " + std::to_string(needed) + " (it has " +
            std::to_string(present) + ")");
      }
    };
    check(shader_int64, available.shader_int64, "shaderInt64");
    check(storage_buffer_8bit, available.storage_buffer_8bit, "storageBuffer8BitAccess");
    check(storage_buffer_16bit, available.storage_buffer_16bit, "storageBuffer16BitAccess");
    check_limit(compute_shared_bytes, available.compute_shared_bytes, "maxComputeSharedMemorySize");
    check_limit(workgroup_invocations, available.workgroup_invocations,
                "maxComputeWorkGroupInvocations");
    return missing;
  }
};

// Compute subgroups as the device offers them (no Vulkan types: ops choose shader variants from
// it in pure, unit-tested functions). Optional: faster paths only, never a reason to refuse an op.
struct SubgroupSupport {
  std::uint32_t size = 0;  // subgroupSize: what a shader gets without a required size
  // A compute pipeline can require a size in [min_size, max_size] with full subgroups
  // (requiredSubgroupSizeStages has compute, subgroupSizeControl and computeFullSubgroups are
  // enabled); else min_size = max_size = size and the size may still vary (SPIR-V 1.6) unless the
  // device has one size.
  bool size_control = false;
  std::uint32_t min_size = 0;
  std::uint32_t max_size = 0;
  std::uint32_t max_workgroup_subgroups = 0;  // maxComputeWorkgroupSubgroups (with size control)
  bool arithmetic = false;  // VK_SUBGROUP_FEATURE_ARITHMETIC_BIT in compute shaders
  bool ballot = false;      // VK_SUBGROUP_FEATURE_BALLOT_BIT in compute shaders
};

struct DeviceContext {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VolkDeviceTable vk{};  // device-level functions of this VkDevice

  std::string device_name;
  VkPhysicalDeviceType device_type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  VkDriverId driver_id = static_cast<VkDriverId>(0);  // 0: not reported
  VkPhysicalDeviceLimits limits{};
  // Compute units (NVIDIA: SMs) and the threads each runs at a time, when the driver says
  // (VK_NV_shader_sm_builtins); 0 when unknown. Ops size their grids by them.
  std::uint32_t compute_units = 0;
  std::uint32_t threads_per_compute_unit = 0;
  DeviceFeatures features;  // the optional features the device has (enabled if an op needs them)
  SubgroupSupport subgroups;  // size control enabled where size_control says so
  // VK_NV_cooperative_matrix and what hamming_topk's cooperative-matrix scan needs besides are
  // enabled (only where hamming_coopmat_unsupported finds nothing missing).
  bool cooperative_matrix = false;

  std::vector<MemoryTypeInfo> memory_types;
  std::uint32_t usable_memory_type_bits = 0;
  std::uint64_t max_memory_allocation_size = 0;
  std::uint64_t max_buffer_size = 0;
  // Distinct queue families in use; buffers are shared CONCURRENTly across them when > 1.
  std::vector<std::uint32_t> queue_families;
  HostMemoryImport host_memory_import;
  // Timing submissions for traces (vulkan/timestamps.hpp): hostQueryReset is enabled; the
  // calibrated-timestamps call (KHR or EXT) or null.
  float timestamp_period = 0;
  bool host_query_reset = false;
  PFN_vkGetCalibratedTimestampsEXT get_calibrated_timestamps = nullptr;
};

}  // namespace ferry::vulkan
