// What a VkDevice's objects (buffers, timelines, queues, pipelines) share: the device handle, its
// function table and the physical device's limits. Owned by VulkanDevice, which outlives every
// object made from it (core destroys buffers and timelines before the device).
#pragma once

#include <volk.h>

#include <cstdint>
#include <vector>

#include "vulkan/fill_plan.hpp"
#include "vulkan/memory_types.hpp"

namespace ferry::vulkan {

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
};

}  // namespace ferry::vulkan
