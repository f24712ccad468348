#include "vulkan/physical_devices.hpp"

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <charconv>
#include <cstring>
#include <span>

#include "vulkan/ops/hamming_topk.hpp"
#include "vulkan/status.hpp"

namespace ferry::vulkan {
namespace {

int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

std::string version_string(std::uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
         std::to_string(VK_API_VERSION_MINOR(version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(version));
}

Result<bool> has_device_extension(VkPhysicalDevice device, const char* name) {
  std::uint32_t count = 0;
  FERRY_VK_RETURN_IF_ERROR(vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr));
  std::vector<VkExtensionProperties> extensions(count);
  FERRY_VK_RETURN_IF_ERROR(
      vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data()));
  for (std::uint32_t i = 0; i < count; ++i) {
    if (std::strcmp(extensions[i].extensionName, name) == 0) return true;
  }
  return false;
}

// Whether ferry's buffers (kBufferUsage) can live in imported host allocations: the extension,
// importable, and not dedicated-only (host-pointer imports cannot be dedicated allocations).
Result<HostMemoryImport> describe_host_memory_import(VkPhysicalDevice handle) {
  HostMemoryImport import;
  FERRY_ASSIGN_OR_RETURN(const bool extension,
                         has_device_extension(handle, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME));
  if (!extension) {
    import.unsupported_reason = "the device lacks VK_EXT_external_memory_host";
    return import;
  }
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host_properties{};
  host_properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &host_properties;
  vkGetPhysicalDeviceProperties2(handle, &properties);
  import.pointer_alignment = host_properties.minImportedHostPointerAlignment;

  VkPhysicalDeviceExternalBufferInfo buffer_info{};
  buffer_info.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO;
  buffer_info.usage = kBufferUsage;
  buffer_info.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkExternalBufferProperties buffer_properties{};
  buffer_properties.sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES;
  vkGetPhysicalDeviceExternalBufferProperties(handle, &buffer_info, &buffer_properties);
  const VkExternalMemoryFeatureFlags features =
      buffer_properties.externalMemoryProperties.externalMemoryFeatures;
  if ((features & VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT) == 0) {
    import.unsupported_reason = "the device cannot import host allocations as buffer memory";
  } else if ((features & VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT) != 0) {
    import.unsupported_reason =
        "the device imports host allocations only as dedicated allocations";
  } else if (import.pointer_alignment == 0) {
    import.unsupported_reason = "the device reports no minImportedHostPointerAlignment";
  } else {
    import.supported = true;
  }
  return import;
}

// For tests, FERRY_VULKAN_HIDE_FEATURES: the device acts as if it lacked these optional features
// (comma-separated Vulkan names), so that the ops needing them are refused as on such a device.
Status hide_features(std::string_view names, DeviceFeatures& features,
                     CooperativeMatrixSupport& cooperative_matrix,
                     const char*& calibrated_timestamps) {
  while (!names.empty()) {
    const std::size_t comma = names.find(',');
    const std::string_view name = names.substr(0, comma);
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    if (name == "shaderInt64") {
      features.shader_int64 = false;
    } else if (name == "storageBuffer8BitAccess") {
      features.storage_buffer_8bit = false;
    } else if (name == "storageBuffer16BitAccess") {
      features.storage_buffer_16bit = false;
    } else if (name == "cooperativeMatrix") {
      cooperative_matrix.feature = false;  // hamming_topk's scan takes its portable path
    } else if (name == "calibratedTimestamps") {
      calibrated_timestamps = nullptr;  // traces line device time up by dispatch times
    } else if (!name.empty()) {
      return Status(ErrorCode::invalid_argument,
                    "FERRY_VULKAN_HIDE_FEATURES: '" + std::string(name) +
                        "' is no optional feature ferry uses (shaderInt64, "
                        "storageBuffer8BitAccess, storageBuffer16BitAccess, cooperativeMatrix, "
                        "calibratedTimestamps)");
    }
  }
  return Status();
}

// For tests, FERRY_VULKAN_TIMESTAMP_BITS: every queue family's timestamps keep at most this many
// valid bits (0 to 64), so that traces meet counters that wrap (32 on lavapipe's nanoseconds
// since boot), or families that cannot be timed (0).
Status limit_timestamp_bits(std::string_view text, std::vector<QueueFamilyInfo>& families) {
  std::uint32_t bits = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), bits);
  if (error != std::errc() || end != text.data() + text.size() || bits > 64) {
    return Status(ErrorCode::invalid_argument,
                  "FERRY_VULKAN_TIMESTAMP_BITS: '" + std::string(text) + "' is not 0 to 64");
  }
  for (QueueFamilyInfo& family : families) {
    family.timestamp_valid_bits = std::min(family.timestamp_valid_bits, bits);
  }
  return Status();
}

MatrixComponent component_of(VkComponentTypeNV type) {
  switch (type) {
    case VK_COMPONENT_TYPE_SINT8_NV: return MatrixComponent::sint8;
    case VK_COMPONENT_TYPE_UINT8_NV: return MatrixComponent::uint8;
    case VK_COMPONENT_TYPE_SINT32_NV: return MatrixComponent::sint32;
    case VK_COMPONENT_TYPE_UINT32_NV: return MatrixComponent::uint32;
    default: return MatrixComponent::other;
  }
}

// The Vulkan 1.1 and 1.3 properties, where subgroups are described.
struct SubgroupProperties {
  VkPhysicalDeviceVulkan11Properties v11{};
  VkPhysicalDeviceVulkan13Properties v13{};
};

SubgroupProperties query_subgroup_properties(VkPhysicalDevice handle) {
  SubgroupProperties p;
  p.v13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES;
  p.v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES;
  p.v11.pNext = &p.v13;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &p.v11;
  vkGetPhysicalDeviceProperties2(handle, &properties);
  p.v11.pNext = nullptr;  // it pointed into this copy
  return p;
}

// VK_NV_cooperative_matrix: the feature, the shapes the driver lists, and what a shader using
// them needs besides (int8, the Vulkan memory model, subgroups). Left empty without the extension.
Status describe_cooperative_matrix(VkPhysicalDevice handle,
                                   const VkPhysicalDeviceVulkan12Features& features12,
                                   PhysicalDevice& device) {
  CooperativeMatrixSupport& support = device.cooperative_matrix;
  FERRY_ASSIGN_OR_RETURN(support.extension,
                         has_device_extension(handle, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME));
  if (!support.extension || vkGetPhysicalDeviceCooperativeMatrixPropertiesNV == nullptr) {
    support.extension = false;
    return Status();
  }
  VkPhysicalDeviceCooperativeMatrixFeaturesNV matrix_features{};
  matrix_features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &matrix_features;
  vkGetPhysicalDeviceFeatures2(handle, &features);
  support.feature = matrix_features.cooperativeMatrix == VK_TRUE;
  support.shader_int8 = features12.shaderInt8 == VK_TRUE;
  support.vulkan_memory_model = features12.vulkanMemoryModel == VK_TRUE;
  support.vulkan_memory_model_device_scope = features12.vulkanMemoryModelDeviceScope == VK_TRUE;

  const SubgroupProperties subgroup_properties = query_subgroup_properties(handle);
  const VkPhysicalDeviceVulkan11Properties& properties11 = subgroup_properties.v11;
  const VkPhysicalDeviceVulkan13Properties& properties13 = subgroup_properties.v13;
  support.subgroup_vote =
      (properties11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
      (properties11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT) != 0;
  support.subgroup_size = properties11.subgroupSize;
  // Without subgroup size control a shader gets the default size.
  const bool size_control =
      (properties13.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  support.min_subgroup_size = size_control ? properties13.minSubgroupSize : properties11.subgroupSize;
  support.max_subgroup_size = size_control ? properties13.maxSubgroupSize : properties11.subgroupSize;
  support.compute_shared_bytes = device.limits.maxComputeSharedMemorySize;

  std::uint32_t count = 0;
  FERRY_VK_RETURN_IF_ERROR(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(handle, &count, nullptr));
  std::vector<VkCooperativeMatrixPropertiesNV> shapes(count);
  for (VkCooperativeMatrixPropertiesNV& shape : shapes) {
    shape.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  }
  FERRY_VK_RETURN_IF_ERROR(
      vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(handle, &count, shapes.data()));
  shapes.resize(count);
  for (const VkCooperativeMatrixPropertiesNV& shape : shapes) {
    support.shapes.push_back({component_of(shape.AType), component_of(shape.BType),
                              component_of(shape.CType), component_of(shape.DType), shape.MSize,
                              shape.NSize, shape.KSize, shape.scope == VK_SCOPE_SUBGROUP_NV});
  }
  return Status();
}

// Compute subgroups: their size, whether a pipeline can require one (with full subgroups), and
// the operations ferry's shaders use.
void describe_subgroups(VkPhysicalDevice handle, const VkPhysicalDeviceVulkan13Features& features13,
                        SubgroupSupport& support) {
  const SubgroupProperties subgroup_properties = query_subgroup_properties(handle);
  const VkPhysicalDeviceVulkan11Properties& properties11 = subgroup_properties.v11;
  const VkPhysicalDeviceVulkan13Properties& properties13 = subgroup_properties.v13;
  const bool compute = (properties11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  support.size = properties11.subgroupSize;
  support.arithmetic =
      compute && (properties11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;
  support.ballot =
      compute && (properties11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT) != 0;
  support.size_control = features13.subgroupSizeControl == VK_TRUE &&
                         features13.computeFullSubgroups == VK_TRUE &&
                         (properties13.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  support.min_size = support.size_control ? properties13.minSubgroupSize : support.size;
  support.max_size = support.size_control ? properties13.maxSubgroupSize : support.size;
  support.max_workgroup_subgroups =
      support.size_control ? properties13.maxComputeWorkgroupSubgroups : 0;
}

// SM count and threads per SM from VK_NV_shader_sm_builtins, when the device has it.
Status describe_compute_units(VkPhysicalDevice handle, PhysicalDevice& device) {
  FERRY_ASSIGN_OR_RETURN(const bool sm_builtins,
                         has_device_extension(handle, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME));
  if (!sm_builtins) return Status();
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{};
  sm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV;
  VkPhysicalDeviceVulkan11Properties properties11{};
  properties11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES;
  properties11.pNext = &sm;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &properties11;
  vkGetPhysicalDeviceProperties2(handle, &properties);
  device.compute_units = sm.shaderSMCount;
  device.threads_per_compute_unit = sm.shaderWarpsPerSM * properties11.subgroupSize;
  return Status();
}

// The PCI address from VK_EXT_pci_bus_info, when the device has it (a software device has not),
// written as sysfs names it, so that core finds the device's NUMA node.
Status describe_pci_bus(VkPhysicalDevice handle, PhysicalDevice& device) {
  FERRY_ASSIGN_OR_RETURN(const bool offered,
                         has_device_extension(handle, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME));
  if (!offered) return Status();
  VkPhysicalDevicePCIBusInfoPropertiesEXT bus{};
  bus.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &bus;
  vkGetPhysicalDeviceProperties2(handle, &properties);
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", bus.pciDomain, bus.pciBus, bus.pciDevice,
                bus.pciFunction);
  device.info.pci_bus_id = text;
  return Status();
}

void describe_memory(VkPhysicalDevice handle, PhysicalDevice& device) {
  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(handle, &memory);
  std::vector<bool> heap_is_host_visible(memory.memoryHeapCount, false);
  for (std::uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags flags = memory.memoryTypes[i].propertyFlags;
    const std::uint32_t heap = memory.memoryTypes[i].heapIndex;
    MemoryTypeInfo type;
    type.heap_size = memory.memoryHeaps[heap].size;
    type.device_local = (flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0;
    type.host_visible = (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) != 0;
    type.host_coherent = (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
    type.host_cached = (flags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) != 0;
    device.memory_types.push_back(type);
    if (flags & (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT |
                 VK_MEMORY_PROPERTY_DEVICE_COHERENT_BIT_AMD)) {
      device.unusable_memory_type_bits |= 1u << i;
    } else if (type.host_visible) {
      heap_is_host_visible[heap] = true;
    }
  }
  // Host-visible bytes: the system-memory heaps the device can reach. Where every heap is
  // device local (a CPU device, unified memory), the device-local heaps that are host visible.
  std::uint64_t host_only = 0;
  std::uint64_t host_visible_local = 0;
  for (std::uint32_t heap = 0; heap < memory.memoryHeapCount; ++heap) {
    const bool local = (memory.memoryHeaps[heap].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
    if (local) device.info.device_memory_bytes += memory.memoryHeaps[heap].size;
    if (heap_is_host_visible[heap]) {
      (local ? host_visible_local : host_only) += memory.memoryHeaps[heap].size;
    }
  }
  device.info.host_visible_memory_bytes = host_only != 0 ? host_only : host_visible_local;
}

// The calibrated-timestamps extension to enable (EXT, else KHR: the same calls; EXT first, since
// validation layers older than the KHR promotion warn about an extension they do not know, and
// NVIDIA's driver offers both), where the device can calibrate its own time domain against
// CLOCK_MONOTONIC (std::chrono::steady_clock here); null otherwise.
Result<const char*> describe_calibrated_timestamps(VkPhysicalDevice handle) {
  const char* extension = nullptr;
  for (const char* name :
       {VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME, "VK_KHR_calibrated_timestamps"}) {
    FERRY_ASSIGN_OR_RETURN(const bool offered, has_device_extension(handle, name));
    if (offered) {
      extension = name;
      break;
    }
  }
  // The KHR query has the EXT one's signature and values; an instance offering either has this.
  if (extension == nullptr || vkGetPhysicalDeviceCalibrateableTimeDomainsEXT == nullptr) {
    return nullptr;
  }
  std::uint32_t count = 0;
  FERRY_VK_RETURN_IF_ERROR(vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(handle, &count, nullptr));
  std::vector<VkTimeDomainEXT> domains(count);
  FERRY_VK_RETURN_IF_ERROR(
      vkGetPhysicalDeviceCalibrateableTimeDomainsEXT(handle, &count, domains.data()));
  domains.resize(count);
  auto has = [&](VkTimeDomainEXT domain) {
    return std::find(domains.begin(), domains.end(), domain) != domains.end();
  };
  return has(VK_TIME_DOMAIN_DEVICE_EXT) && has(VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT) ? extension
                                                                                   : nullptr;
}

void describe_queue_families(VkPhysicalDevice handle, PhysicalDevice& device) {
  std::uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(handle, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(handle, &count, families.data());
  for (std::uint32_t i = 0; i < count; ++i) {
    QueueFamilyInfo family;
    family.index = i;
    family.queue_count = families[i].queueCount;
    family.graphics = (families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) != 0;
    family.compute = (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) != 0;
    family.transfer = (families[i].queueFlags & VK_QUEUE_TRANSFER_BIT) != 0;
    family.timestamp_valid_bits = families[i].timestampValidBits;
    device.info.queue_families.push_back(family);
  }
}

// Fills `device` from `handle`; returns why the device cannot be used, or "" when it can.
Result<std::string> describe(VkPhysicalDevice handle, PhysicalDevice& device) {
  device.handle = handle;

  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  maintenance3.pNext = &driver;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &maintenance3;
  vkGetPhysicalDeviceProperties2(handle, &properties);
  const VkPhysicalDeviceProperties& core = properties.properties;

  device.info.backend = Backend::vulkan;
  device.info.name = core.deviceName;
  device.info.is_cpu = core.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  device.type = core.deviceType;
  device.driver_id = driver.driverID;
  device.limits = core.limits;
  device.max_memory_allocation_size = maintenance3.maxMemoryAllocationSize;
  // No buffer is larger than one allocation.
  device.info.max_op_binding_bytes = std::min<std::uint64_t>(
      core.limits.maxStorageBufferRange, maintenance3.maxMemoryAllocationSize);
  describe_memory(handle, device);
  describe_queue_families(handle, device);

  if (core.apiVersion < VK_API_VERSION_1_3) {
    device.info.driver = "Vulkan " + version_string(core.apiVersion);
    return "supports Vulkan " + version_string(core.apiVersion) + ", ferry needs 1.3";
  }
  device.info.driver = "Vulkan " + version_string(core.apiVersion) + ", " + driver.driverName;
  if (driver.driverInfo[0] != '\0') device.info.driver += std::string(" ") + driver.driverInfo;

  VkPhysicalDeviceMaintenance4Properties maintenance4{};
  maintenance4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES;
  VkPhysicalDeviceProperties2 properties13{};
  properties13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties13.pNext = &maintenance4;
  vkGetPhysicalDeviceProperties2(handle, &properties13);
  device.max_buffer_size = maintenance4.maxBufferSize;

  VkPhysicalDeviceVulkan13Features features13{};
  features13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
  VkPhysicalDeviceVulkan12Features features12{};
  features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  features12.pNext = &features13;
  VkPhysicalDeviceVulkan11Features features11{};
  features11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  features11.pNext = &features12;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &features11;
  vkGetPhysicalDeviceFeatures2(handle, &features);
  if (!features12.timelineSemaphore) return std::string("no timelineSemaphore feature");
  if (!features13.synchronization2) return std::string("no synchronization2 feature");

  FERRY_ASSIGN_OR_RETURN(const bool push_descriptor,
                         has_device_extension(handle, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME));
  if (!push_descriptor) return std::string("no VK_KHR_push_descriptor extension");

  Result<QueuePlan> plan = plan_queues(device.info.queue_families);
  if (!plan.ok()) return plan.status().message();
  if (const char* spec = std::getenv("FERRY_VULKAN_QUEUES"); spec != nullptr && spec[0] != '\0') {
    plan = override_queues(device.info.queue_families, *plan, spec);
    // A malformed variable is the user's error on every device: fail, do not fall back.
    if (!plan.ok() && plan.status().code() == ErrorCode::invalid_argument) return plan.status();
    if (!plan.ok()) return plan.status().message();
  }
  device.queue_plan = std::move(plan).value();
  FERRY_ASSIGN_OR_RETURN(device.host_memory_import, describe_host_memory_import(handle));
  device.features.shader_int64 = features.features.shaderInt64 == VK_TRUE;
  device.features.storage_buffer_8bit = features12.storageBuffer8BitAccess == VK_TRUE;
  device.features.storage_buffer_16bit = features11.storageBuffer16BitAccess == VK_TRUE;
  device.features.compute_shared_bytes = device.limits.maxComputeSharedMemorySize;
  device.features.workgroup_invocations = device.limits.maxComputeWorkGroupInvocations;
  FERRY_RETURN_IF_ERROR(describe_cooperative_matrix(handle, features12, device));
  device.timestamp_period = core.limits.timestampPeriod;
  device.host_query_reset = features12.hostQueryReset == VK_TRUE;
  FERRY_ASSIGN_OR_RETURN(device.calibrated_timestamps, describe_calibrated_timestamps(handle));
  if (const char* hidden = std::getenv("FERRY_VULKAN_HIDE_FEATURES");
      hidden != nullptr && hidden[0] != '\0') {
    FERRY_RETURN_IF_ERROR(hide_features(hidden, device.features, device.cooperative_matrix,
                                        device.calibrated_timestamps));
  }
  if (const char* bits = std::getenv("FERRY_VULKAN_TIMESTAMP_BITS");
      bits != nullptr && bits[0] != '\0') {
    FERRY_RETURN_IF_ERROR(limit_timestamp_bits(bits, device.info.queue_families));
  }
  device.cooperative_matrix.requested = true;
  if (const char* scan = std::getenv("FERRY_VULKAN_HAMMING_SCAN"); scan != nullptr && scan[0] != '\0') {
    const std::string_view value(scan);
    // pooled (the default, as FERRY_CUDA_HAMMING_SCAN's): pools where they apply, filled with
    // cooperative matrices where the device offers them; portable: the same without them;
    // buffered, pooled-exact, coopmat: for tests and measurements (vulkan/ops/hamming_topk.hpp).
    if (value != "coopmat" && value != "portable" && value != "pooled" && value != "buffered" &&
        value != "pooled-exact") {
      return Status(ErrorCode::invalid_argument,
                    "FERRY_VULKAN_HAMMING_SCAN: '" + std::string(value) +
                        "' is not portable, pooled, buffered, pooled-exact or coopmat");
    }
    device.cooperative_matrix.requested = value != "portable";
  }
  FERRY_RETURN_IF_ERROR(describe_compute_units(handle, device));
  FERRY_RETURN_IF_ERROR(describe_pci_bus(handle, device));
  describe_subgroups(handle, features13, device.subgroups);
  device.info.search_path = hamming_search_path(device.cooperative_matrix, device.features);
  device.info.queues.assign(device.queue_plan.queues.begin(), device.queue_plan.queues.end());
  return std::string();
}

// How many physical devices share each usable device's group (reported; ferry does not use
// groups of several: each device is opened on its own).
Status describe_device_groups(VkInstance instance, PhysicalDeviceList& list) {
  std::uint32_t count = 0;
  FERRY_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDeviceGroups(instance, &count, nullptr));
  std::vector<VkPhysicalDeviceGroupProperties> groups(count);
  for (VkPhysicalDeviceGroupProperties& group : groups) {
    group.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GROUP_PROPERTIES;
  }
  FERRY_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDeviceGroups(instance, &count, groups.data()));
  groups.resize(count);
  for (PhysicalDevice& device : list.usable) {
    device.info.device_group_size = 1;
    for (const VkPhysicalDeviceGroupProperties& group : groups) {
      const auto members = std::span(group.physicalDevices).first(group.physicalDeviceCount);
      if (std::find(members.begin(), members.end(), device.handle) != members.end()) {
        device.info.device_group_size = group.physicalDeviceCount;
      }
    }
  }
  return Status();
}

}  // namespace

Result<PhysicalDeviceList> list_physical_devices(VkInstance instance) {
  std::uint32_t count = 0;
  FERRY_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDevices(instance, &count, nullptr));
  std::vector<VkPhysicalDevice> handles(count);
  FERRY_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDevices(instance, &count, handles.data()));
  handles.resize(count);

  PhysicalDeviceList list;
  for (VkPhysicalDevice handle : handles) {
    PhysicalDevice device;
    FERRY_ASSIGN_OR_RETURN(const std::string why_not, describe(handle, device));
    if (!why_not.empty()) {
      if (!list.rejected.empty()) list.rejected += "; ";
      list.rejected += device.info.name + ": " + why_not;
      continue;
    }
    list.usable.push_back(std::move(device));
  }
  FERRY_RETURN_IF_ERROR(describe_device_groups(instance, list));
  std::stable_sort(list.usable.begin(), list.usable.end(),
                   [](const PhysicalDevice& a, const PhysicalDevice& b) {
                     return type_rank(a.type) < type_rank(b.type);
                   });
  for (std::size_t i = 0; i < list.usable.size(); ++i) {
    list.usable[i].info.index = static_cast<int>(i);
  }
  return list;
}

}  // namespace ferry::vulkan
