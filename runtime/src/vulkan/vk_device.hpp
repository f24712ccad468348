// A VkDevice with ferry's three logical queues and the fill and normalize pipelines.
#pragma once

#include <volk.h>

#include <array>
#include <memory>

#include "core/backend.hpp"
#include "vulkan/fill_pipeline.hpp"
#include "vulkan/normalize_pipeline.hpp"
#include "vulkan/physical_devices.hpp"
#include "vulkan/vk_context.hpp"
#include "vulkan/vk_instance.hpp"
#include "vulkan/vk_queue.hpp"

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
  // normalize: the device's features and storage-buffer window (plan_normalize).
  Status check_command(const backend::Command& command) const override;
  Status submit(QueueKind queue, const backend::Submission& submission) override;
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

  std::unique_ptr<VulkanInstance> instance_;
  DeviceInfo info_;
  DeviceContext context_;
  std::array<LogicalQueue, kQueueKindCount> queues_;
  FillPipeline fill_pipeline_;
  NormalizePipeline normalize_pipeline_;
};

}  // namespace ferry::vulkan
