#include "vulkan/device.hpp"

#include <cstdlib>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "vulkan/buffer.hpp"
#include "vulkan/recorder.hpp"
#include "vulkan/status.hpp"
#include "vulkan/timeline.hpp"
#include "vulkan/ops/hamming_topk_plan.hpp"

namespace ferry::vulkan {

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
  // Optional (mandatory in 1.3 too, but listed as features): ibp_decode's subgroup shader
  // requires its subgroup size and full subgroups.
  features13.subgroupSizeControl = physical.subgroups.size_control ? VK_TRUE : VK_FALSE;
  features13.computeFullSubgroups = physical.subgroups.size_control ? VK_TRUE : VK_FALSE;
  VkPhysicalDeviceVulkan12Features features12{};
  features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  features12.pNext = &features13;
  features12.timelineSemaphore = VK_TRUE;
  // Optional, for traces: the timers reset their timestamp queries on the host.
  features12.hostQueryReset = physical.host_query_reset ? VK_TRUE : VK_FALSE;
  VkPhysicalDeviceVulkan11Features features11{};
  features11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  features11.pNext = &features12;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &features11;
  // Optional features: those of every op the device can run (the others report unavailable).
  DeviceFeatures enabled;
  for (const DeviceFeatures& needs : kOpNeeds) {
    if (needs.missing_from(physical.features).empty()) enabled = enabled | needs;
  }
  features.features.shaderInt64 = enabled.shader_int64 ? VK_TRUE : VK_FALSE;
  features12.storageBuffer8BitAccess = enabled.storage_buffer_8bit ? VK_TRUE : VK_FALSE;
  features11.storageBuffer16BitAccess = enabled.storage_buffer_16bit ? VK_TRUE : VK_FALSE;

  std::vector<const char*> extensions = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  // Optional: hamming_topk's cooperative-matrix fill and scan, where the device has all they
  // need (else, with cooperativeMatrix hidden or FERRY_VULKAN_HAMMING_SCAN=portable, nothing of
  // them is enabled and the portable scans run).
  VkPhysicalDeviceCooperativeMatrixFeaturesNV matrix_features{};
  matrix_features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  const bool cooperative_matrix =
      hamming_opens_coopmat(physical.cooperative_matrix, physical.features);
  if (cooperative_matrix) {
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    matrix_features.cooperativeMatrix = VK_TRUE;
    features13.pNext = &matrix_features;
    features12.shaderInt8 = VK_TRUE;
    features12.vulkanMemoryModel = VK_TRUE;
    features12.vulkanMemoryModelDeviceScope = VK_TRUE;
  }
  // Optional: only register_host_memory needs it.
  if (physical.host_memory_import.supported) {
    extensions.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  }
  // Optional, for traces: device timestamps lined up with the host clock.
  if (physical.calibrated_timestamps != nullptr) {
    extensions.push_back(physical.calibrated_timestamps);
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
  context_.device_name = physical.info.name;
  context_.device_type = physical.type;
  context_.driver_id = physical.driver_id;
  context_.limits = physical.limits;
  context_.compute_units = physical.compute_units;
  context_.threads_per_compute_unit = physical.threads_per_compute_unit;
  context_.features = physical.features;
  context_.subgroups = physical.subgroups;
  context_.cooperative_matrix = cooperative_matrix;
  context_.host_memory_import = physical.host_memory_import;
  context_.timestamp_period = physical.timestamp_period;
  context_.host_query_reset = physical.host_query_reset;
  if (physical.calibrated_timestamps != nullptr) {
    // vkGetCalibratedTimestampsKHR is vkGetCalibratedTimestampsEXT promoted: the same signature.
    context_.get_calibrated_timestamps = reinterpret_cast<PFN_vkGetCalibratedTimestampsEXT>(
        vkGetDeviceProcAddr(context_.device,
                            std::string_view(physical.calibrated_timestamps).find("KHR") !=
                                    std::string_view::npos
                                ? "vkGetCalibratedTimestampsKHR"
                                : "vkGetCalibratedTimestampsEXT"));
  }
  CopySettings copies;
  if (const char* spec = std::getenv("FERRY_VULKAN_COPIES"); spec != nullptr && spec[0] != '\0') {
    FERRY_ASSIGN_OR_RETURN(copies, parse_copy_settings(spec));
  }
  timestamp_bits_.fill(0);
  for (std::size_t kind = 0; kind < queues_.size(); ++kind) {
    for (const QueueFamilyInfo& family : physical.info.queue_families) {
      if (family.index == plan.queues[kind].family) {
        timestamp_bits_[kind] = family.timestamp_valid_bits;
        // The shader runs where the queue's family can run compute shaders.
        shader_copies_[kind] = copies.shader && family.compute;
      }
    }
  }
  if (copies.shader) FERRY_RETURN_IF_ERROR(copy_shader_.create(context_, copies.group_cap));

  // A software implementation keeps the start barrier on every submission: it costs nothing
  // measurable there, and lavapipe (Mesa 22.3) races inside its own synchronization objects
  // under TSan when command buffers come without it (its threads only, no ferry frame).
  order_by_hazards_ = !physical.info.is_cpu;
  for (std::size_t kind = 0; kind < queues_.size(); ++kind) {
    FERRY_RETURN_IF_ERROR(queues_[kind].create(context_, plan.queues[kind]));
    // Logical queues on one VkQueue share its hazards: the first kind's.
    hazards_of_[kind] = kind;
    for (std::size_t earlier = 0; earlier < kind; ++earlier) {
      if (queues_[earlier].native() == queues_[kind].native()) {
        hazards_of_[kind] = hazards_of_[earlier];
        break;
      }
    }
  }
  return create_pipelines(std::make_index_sequence<ops::kOpCount>());
}

template <std::size_t... Op>
Status VulkanDevice::create_pipelines(std::index_sequence<Op...>) {
  Status status;
  auto create = [&](auto& pipeline, ops::OpKind kind) {
    if (status.ok() && op_support(kind).ok()) status = pipeline.create(context_);
  };
  (create(std::get<Op>(pipelines_), static_cast<ops::OpKind>(Op)), ...);
  return status;
}

Status VulkanDevice::op_support(ops::OpKind op) const {
  const std::string missing =
      kOpNeeds[static_cast<std::size_t>(op)].missing_from(context_.features);
  if (missing.empty()) return Status();
  return Status(ErrorCode::unavailable, std::string(ops::op_name(op)) + " on Vulkan: " +
                                            context_.device_name + " lacks " + missing +
                                            ", which its shader needs");
}

Status VulkanDevice::check_command(const backend::OpCommand& command) const {
  return std::visit(
      [&](const auto& args) {
        return pipeline_for<std::decay_t<decltype(args)>>(pipelines_).check(args,
                                                                           command.bindings);
      },
      command.args);
}

VulkanDevice::~VulkanDevice() {
  if (context_.device != VK_NULL_HANDLE) {
    // Nothing can be reported from a destructor; destruction goes ahead regardless.
    (void)context_.vk.vkDeviceWaitIdle(context_.device);
    std::apply([](auto&... pipeline) { (pipeline.destroy(), ...); }, pipelines_);
    copy_shader_.destroy();
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

Status VulkanDevice::submit(QueueKind queue_kind, const backend::Submission& submission) {
  LogicalQueue& queue = queues_[static_cast<std::size_t>(queue_kind)];
  QueueHazards& hazards = hazards_[hazards_of_[static_cast<std::size_t>(queue_kind)]];
  QueueHazards::Plan hazard_plan;
  VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  std::optional<TimestampPair> timed;
  if (!submission.commands.empty()) {
    if (submission.id != 0) {
      // Tracing: report what completed, then time this one.
      (void)queue.collect_times();
      timed = queue.timestamps();
    }
    Result<VkCommandBuffer> acquired = queue.acquire_command_buffer();
    if (!acquired.ok()) {
      queue.release_timestamps(timed);
      return acquired.status();
    }
    command_buffer = *acquired;
    if (order_by_hazards_) {
      hazards.forget_reached([](void* timeline) {
        return static_cast<VulkanTimeline*>(static_cast<backend::BackendTimeline*>(timeline))
            ->known_reached();
      });
      hazard_plan = plan_order(hazards, submission.commands);
    }
    const Status recorded =
        record_commands(context_, pipelines_,
                        shader_copies_[static_cast<std::size_t>(queue_kind)] ? &copy_shader_ : nullptr,
                        command_buffer, submission.commands, hazard_plan.start_barrier, timed);
    if (!recorded.ok()) {
      queue.release_unsubmitted(command_buffer);
      queue.release_timestamps(timed);
      return recorded;
    }
  }
  // The earlier submission this one must follow (QueueHazards: a progress value of this VkQueue).
  std::optional<backend::TimelineValue> order_wait;
  if (hazard_plan.wait) {
    order_wait = backend::TimelineValue{
        static_cast<backend::BackendTimeline*>(hazard_plan.wait.timeline),
        hazard_plan.wait.value};
  }
  FERRY_RETURN_IF_ERROR(queue.submit(command_buffer, submission.waits, submission.signals, timed,
                                     submission.id, order_wait));
  if (order_by_hazards_ && command_buffer != VK_NULL_HANDLE) {
    // The last signal is the submission's progress value (backend::Submission).
    const backend::TimelineValue& progress = submission.signals.back();
    hazards.submitted(std::move(hazard_plan), {progress.timeline, progress.value});
  }
  return Status();
}

Status VulkanDevice::enable_execution_timing(backend::ExecutionTimes* times) {
  bool any = false;
  for (std::size_t kind = 0; kind < queues_.size(); ++kind) {
    const auto queue_kind = static_cast<QueueKind>(kind);
    const Status timed = queues_[kind].enable_timing(queue_kind, timestamp_bits_[kind], times);
    if (timed.ok()) {
      any = true;
    } else {
      times->cannot_time(queue_kind, timed.message());
    }
  }
  return any ? Status()
             : Status(ErrorCode::unavailable, "no queue of " + info_.name + " can be timed");
}

void VulkanDevice::report_execution_times() {
  for (LogicalQueue& queue : queues_) (void)queue.collect_times();
}

}  // namespace ferry::vulkan
