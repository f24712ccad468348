#include "vulkan/vk_device.hpp"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "fill_push_constants.h"
#include "vulkan/vk_buffer.hpp"
#include "vulkan/vk_recorder.hpp"
#include "vulkan/vk_status.hpp"
#include "vulkan/vk_timeline.hpp"

namespace ferry::vulkan {
namespace {

// normalize.comp's grids. Each workgroup builds a lookup table before it streams (about a
// microsecond of integer arithmetic on a GPU), so a grid is at most what the device keeps
// resident, and grid-stride loops cover the rest.
// - Element path: 256 invocations, as many workgroups as the device keeps resident.
// - Vector path: 1024 invocations, as many workgroups as fill half of what the device keeps
//   resident. Half is plenty for invocations that keep 48 source bytes loading while they store
//   earlier ones; it builds the table about once per compute unit, and stays one wave as long as
//   the shader needs at most 64 registers an invocation (it likely needs more than 32, which
//   would make a full grid two waves).
// Without the device's shape: 2^18 invocations.
constexpr std::uint32_t kNormalizeElementWorkgroupSize = 256;
constexpr std::uint32_t kNormalizeVectorWorkgroupSize = 1024;
constexpr std::uint32_t kNormalizeVectorResidentShare = 2;  // its grid fills 1/2 of the resident
constexpr std::uint32_t kNormalizeDefaultInvocations = 1u << 18;

// For measurements (see override_normalize_limits).
constexpr const char* kNormalizeGridVariable = "FERRY_VULKAN_NORMALIZE_GRID";

// A grid of `workgroup_size` (capped by the device) filling 1/share of the resident invocations.
NormalizeGrid normalize_grid(const PhysicalDevice& physical, std::uint32_t workgroup_size,
                             std::uint32_t share, std::uint32_t max_workgroup_size,
                             std::uint32_t max_groups) {
  NormalizeGrid grid;
  grid.workgroup_size = std::min(workgroup_size, max_workgroup_size);
  std::uint32_t groups =
      std::max<std::uint32_t>(kNormalizeDefaultInvocations / grid.workgroup_size, 1);
  if (physical.compute_units != 0 && physical.threads_per_compute_unit != 0) {
    const std::uint32_t groups_per_unit = std::max<std::uint32_t>(
        physical.threads_per_compute_unit / share / grid.workgroup_size, 1);
    groups = physical.compute_units * groups_per_unit;
  }
  grid.max_group_count = std::min(groups, max_groups);
  return grid;
}

Result<NormalizeLimits> normalize_limits(const PhysicalDevice& physical) {
  const VkPhysicalDeviceLimits& limits = physical.limits;
  NormalizeLimits normalize;
  normalize.offset_alignment = limits.minStorageBufferOffsetAlignment;
  normalize.max_window_bytes = limits.maxStorageBufferRange;
  const std::uint32_t max_workgroup_size =
      std::min(limits.maxComputeWorkGroupSize[0], limits.maxComputeWorkGroupInvocations);
  const std::uint32_t max_groups =
      std::min<std::uint32_t>(limits.maxComputeWorkGroupCount[0], 65535);
  normalize.element_grid = normalize_grid(physical, kNormalizeElementWorkgroupSize, 1,
                                          max_workgroup_size, max_groups);
  normalize.vector_grid = normalize_grid(physical, kNormalizeVectorWorkgroupSize,
                                         kNormalizeVectorResidentShare, max_workgroup_size,
                                         max_groups);
  // A CPU implementation has no load latency to hide; one run at a time also keeps each vector
  // path pipeline's compile short (several times 0.1 s on lavapipe otherwise).
  if (physical.type == VK_PHYSICAL_DEVICE_TYPE_CPU) normalize.source_bytes_in_flight = 1;
  if (const char* spec = std::getenv(kNormalizeGridVariable); spec != nullptr && spec[0] != 0) {
    Status overridden = override_normalize_limits(spec, max_workgroup_size, max_groups, normalize);
    if (!overridden.ok()) return overridden.with_context(kNormalizeGridVariable);
  }
  return normalize;
}

}  // namespace

Result<std::unique_ptr<VulkanDevice>> VulkanDevice::create(
    std::unique_ptr<VulkanInstance> instance, const PhysicalDevice& physical) {
  std::unique_ptr<VulkanDevice> device(new VulkanDevice());
  device->instance_ = std::move(instance);
  // On failure the destructor releases whatever was created.
  FERRY_RETURN_IF_ERROR(device->initialize(physical));
  return device;
}

Status VulkanDevice::initialize(const PhysicalDevice& physical) {
  info_ = physical.info;
  const QueuePlan& plan = physical.queue_plan;

  std::vector<std::vector<float>> priorities;
  std::vector<VkDeviceQueueCreateInfo> queue_infos;
  for (const QueuePlan::FamilyQueues& family : plan.families) {
    priorities.emplace_back(family.queue_count, 1.0f);
    VkDeviceQueueCreateInfo queue_info{};
    queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    queue_info.queueFamilyIndex = family.family;
    queue_info.queueCount = family.queue_count;
    queue_info.pQueuePriorities = priorities.back().data();
    queue_infos.push_back(queue_info);
  }

  VkPhysicalDeviceVulkan13Features features13{};
  features13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
  features13.synchronization2 = VK_TRUE;
  // Mandatory in 1.3. spirv-opt -O for SPIR-V 1.6 may express the workgroup size as LocalSizeId,
  // which needs it; it also makes maxBufferSize a real limit.
  features13.maintenance4 = VK_TRUE;
  VkPhysicalDeviceVulkan12Features features12{};
  features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  features12.pNext = &features13;
  features12.timelineSemaphore = VK_TRUE;
  VkPhysicalDeviceVulkan11Features features11{};
  features11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  features11.pNext = &features12;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &features11;
  // Optional: only normalize needs them (without them it reports unavailable).
  if (physical.normalize_support.supported) {
    features.features.shaderInt64 = VK_TRUE;
    features12.storageBuffer8BitAccess = VK_TRUE;
    features11.storageBuffer16BitAccess = VK_TRUE;
  }

  std::vector<const char*> extensions = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  // Optional: only register_host_memory needs it.
  if (physical.host_memory_import.supported) {
    extensions.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  }
  VkDeviceCreateInfo create_info{};
  create_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  create_info.pNext = &features;
  create_info.queueCreateInfoCount = static_cast<std::uint32_t>(queue_infos.size());
  create_info.pQueueCreateInfos = queue_infos.data();
  create_info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  create_info.ppEnabledExtensionNames = extensions.data();
  FERRY_VK_RETURN_IF_ERROR(
      vkCreateDevice(physical.handle, &create_info, nullptr, &context_.device));

  context_.physical = physical.handle;
  volkLoadDeviceTable(&context_.vk, context_.device);
  context_.memory_types = physical.memory_types;
  context_.usable_memory_type_bits = ~physical.unusable_memory_type_bits;
  context_.max_memory_allocation_size = physical.max_memory_allocation_size;
  context_.max_buffer_size = physical.max_buffer_size;
  context_.queue_families = plan.family_indices();
  context_.fill_limits.offset_alignment = physical.limits.minStorageBufferOffsetAlignment;
  context_.fill_limits.max_window_bytes = physical.limits.maxStorageBufferRange;
  context_.fill_limits.max_group_count =
      std::min<std::uint32_t>(physical.limits.maxComputeWorkGroupCount[0], 65535);
  context_.fill_limits.workgroup_size = shaders::kFillWorkgroupSize;
  context_.host_memory_import = physical.host_memory_import;
  FERRY_ASSIGN_OR_RETURN(context_.normalize_limits, normalize_limits(physical));
  context_.normalize_support = physical.normalize_support;

  for (std::size_t kind = 0; kind < queues_.size(); ++kind) {
    FERRY_RETURN_IF_ERROR(queues_[kind].create(context_, plan.queues[kind]));
  }
  FERRY_RETURN_IF_ERROR(fill_pipeline_.create(context_));
  FERRY_RETURN_IF_ERROR(normalize_pipeline_.create(context_));
  return Status();
}

VulkanDevice::~VulkanDevice() {
  if (context_.device != VK_NULL_HANDLE) {
    // Nothing can be reported from a destructor; destruction goes ahead regardless.
    (void)context_.vk.vkDeviceWaitIdle(context_.device);
    fill_pipeline_.destroy();
    normalize_pipeline_.destroy();
    for (LogicalQueue& queue : queues_) queue.destroy();
    context_.vk.vkDestroyDevice(context_.device, nullptr);
  }
  // instance_ goes last (member order), with its validation messenger.
}

Result<std::unique_ptr<backend::BackendBuffer>> VulkanDevice::create_buffer(std::uint64_t size,
                                                                            MemoryKind kind) {
  FERRY_ASSIGN_OR_RETURN(auto buffer, VulkanBuffer::create(context_, size, kind));
  return std::unique_ptr<backend::BackendBuffer>(std::move(buffer));
}

Result<std::unique_ptr<backend::BackendBuffer>> VulkanDevice::register_host_memory(
    std::byte* data, std::uint64_t size, MemoryKind kind) {
  FERRY_ASSIGN_OR_RETURN(auto buffer, VulkanBuffer::import_host(context_, data, size, kind));
  return std::unique_ptr<backend::BackendBuffer>(std::move(buffer));
}

Result<std::unique_ptr<backend::BackendTimeline>> VulkanDevice::create_timeline(
    std::uint64_t initial) {
  FERRY_ASSIGN_OR_RETURN(auto timeline, VulkanTimeline::create(context_, initial));
  return std::unique_ptr<backend::BackendTimeline>(std::move(timeline));
}

Status VulkanDevice::check_command(const backend::Command& command) const {
  if (const auto* normalize = std::get_if<backend::NormalizeCommand>(&command)) {
    FERRY_RETURN_IF_ERROR(normalize_pipeline_.check_supported());
    return plan_normalize(*normalize, context_.normalize_limits).status();
  }
  return Status();
}

Status VulkanDevice::submit(QueueKind queue_kind, const backend::Submission& submission) {
  LogicalQueue& queue = queues_[static_cast<std::size_t>(queue_kind)];
  VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  if (!submission.commands.empty()) {
    FERRY_ASSIGN_OR_RETURN(command_buffer, queue.acquire_command_buffer());
    const Status recorded =
        record_commands(context_, {fill_pipeline_, normalize_pipeline_}, command_buffer,
                        submission.commands);
    if (!recorded.ok()) {
      queue.release_unsubmitted(command_buffer);
      return recorded;
    }
  }
  return queue.submit(command_buffer, submission.waits, submission.signals);
}

}  // namespace ferry::vulkan
