// A VkDevice with ferry's three logical queues and every op's pipeline (op_pipelines.hpp).
#pragma once

#include <volk.h>

#include <array>
#include <memory>
#include <utility>

#include "core/backend.hpp"
#include "vulkan/context.hpp"
#include "vulkan/copy_shader.hpp"
#include "vulkan/op_pipelines.hpp"
#include "vulkan/physical_devices.hpp"
#include "vulkan/instance.hpp"
#include "vulkan/queue.hpp"
#include "vulkan/queue_hazards.hpp"

namespace ferry::vulkan {

class VulkanDevice final : public backend::BackendDevice {
 public:
  // Takes the instance `physical` was enumerated from; the device owns it from then on.
  static Result<std::unique_ptr<VulkanDevice>> create(std::unique_ptr<VulkanInstance> instance,
                                                      const PhysicalDevice& physical);

  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;
  // Waits for the device to be idle, then destroys everything it made.
  ~VulkanDevice() override;

  const DeviceInfo& info() const override { return info_; }
  Result<std::unique_ptr<backend::BackendBuffer>> create_buffer(std::uint64_t size,
                                                                MemoryKind kind) override;
  // Imports the memory with VK_EXT_external_memory_host (ErrorCode::unavailable without it).
  Result<std::unique_ptr<backend::BackendBuffer>> register_host_memory(std::byte* data,
                                                                       std::uint64_t size,
                                                                       MemoryKind kind) override;
  Result<std::unique_ptr<backend::BackendTimeline>> create_timeline(
      std::uint64_t initial) override;
  // An op runs when the device has the optional features its shader needs (kNeeds).
  Status op_support(ops::OpKind op) const override;
  // ibp_decode copies a host stream's tables to the scratch (ops/ibp_decode.cpp); hamming_topk
  // keeps its pools there (ops::hamming_pool_shape).
  bool uses_optional_scratch(ops::OpKind op) const override {
    return op == ops::OpKind::ibp_decode || op == ops::OpKind::hamming_topk;
  }
  // The op's pipeline's record-time check (normalize: the storage-buffer window).
  Status check_command(const backend::OpCommand& command) const override;
  Status submit(QueueKind queue, const backend::Submission& submission) override;
  // Timestamp queries per submission on every queue whose family has timestamps
  // (vulkan/timestamps.hpp).
  Status enable_execution_timing(backend::ExecutionTimes* times) override;
  void report_execution_times() override;
  // vkDeviceWaitIdle: its own wait on each queue completes only after the queue thread has
  // finished signalling everything submitted before.
  void finish_teardown_work() override {
    (void)context_.vk.vkDeviceWaitIdle(context_.device);
  }
  std::uint64_t validation_message_count() const override {
    return instance_->validation_message_count();
  }

 private:
  VulkanDevice() = default;
  Status initialize(const PhysicalDevice& physical);
  template <std::size_t... Op>
  Status create_pipelines(std::index_sequence<Op...>);

  std::unique_ptr<VulkanInstance> instance_;
  DeviceInfo info_;
  DeviceContext context_;
  std::array<LogicalQueue, kQueueKindCount> queues_;
  // What each VkQueue needs before its next command buffer (queue_hazards.hpp); hazards_of_ maps
  // a queue kind to the entry of its VkQueue.
  std::array<QueueHazards, kQueueKindCount> hazards_;
  std::array<std::size_t, kQueueKindCount> hazards_of_{};
  bool order_by_hazards_ = true;  // false: the start barrier on every submission (CPU devices)
  std::array<std::uint32_t, kQueueKindCount> timestamp_bits_{};  // of each queue's family
  OpPipelines pipelines_;  // made for the ops the device supports
  // Host<->device copies by a compute shader (FERRY_VULKAN_COPIES=shader), on the queues whose
  // family runs compute shaders.
  CopyShader copy_shader_;
  std::array<bool, kQueueKindCount> shader_copies_{};
};

}  // namespace ferry::vulkan
