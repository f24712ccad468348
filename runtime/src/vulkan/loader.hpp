// Run-time loading of the Vulkan loader (libvulkan.so.1) through volk, once per process.
//
// Instance-level functions come from the loader as trampolines that dispatch on the handle, so
// one process-wide set (volk's globals, loaded once) serves every VkInstance. Device-level
// functions are loaded per VkDevice into a VolkDeviceTable instead (no global state shared by
// devices). Instance extension functions (debug utils) are fetched per instance by their users.
#pragma once

#include <volk.h>

#include "ferry/status.hpp"

namespace ferry::vulkan {

// ErrorCode::unavailable with the reason when libvulkan cannot be loaded or is older than 1.3.
Status load_vulkan_loader();

// Loads the instance-level functions from the first instance created; later calls do nothing.
void load_instance_functions(VkInstance instance);

}  // namespace ferry::vulkan
