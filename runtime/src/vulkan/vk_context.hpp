// What a VkDevice's objects (buffers, timelines, queues, pipelines) share: the device handle, its
// function table and the physical device's limits. Owned by VulkanDevice, which outlives every
// object made from it (core destroys buffers and timelines before the device).
#pragma once

#include <volk.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vulkan/fill_plan.hpp"
#include "vulkan/memory_types.hpp"
#include "vulkan/normalize_plan.hpp"

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

// Whether the device has what shaders/normalize.comp needs: shaderInt64 (the integer arithmetic
// of its lookup table), storageBuffer8BitAccess (byte loads) and storageBuffer16BitAccess (16-bit
// stores). On a VkDevice: the features are enabled.
struct NormalizeSupport {
  bool supported = false;
  std::string unsupported_reason;  // what is missing, when !supported
};

struct DeviceContext {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VolkDeviceTable vk{};  // device-level functions of this VkDevice

  std::vector<MemoryTypeInfo> memory_types;
  std::uint32_t usable_memory_type_bits = 0;
  std::uint64_t max_memory_allocation_size = 0;
  std::uint64_t max_buffer_size = 0;
  // Distinct queue families in use; buffers are shared CONCURRENTly across them when > 1.
  std::vector<std::uint32_t> queue_families;
  FillLimits fill_limits;
  NormalizeLimits normalize_limits;
  NormalizeSupport normalize_support;
  HostMemoryImport host_memory_import;
};

}  // namespace ferry::vulkan
