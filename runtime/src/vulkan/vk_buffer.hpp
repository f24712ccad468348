// A VkBuffer with its own VkDeviceMemory, persistently mapped for host memory kinds.
#pragma once

#include <volk.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/backend.hpp"
#include "vulkan/vk_context.hpp"

namespace ferry::vulkan {

class VulkanBuffer final : public backend::BackendBuffer {
 public:
  // The VkBuffer is `size` rounded up to a multiple of 16, so shaders may access whole words
  // (and 16-byte vectors) at the end. ErrorCode::out_of_memory, with the size, when the memory
  // cannot be had.
  static Result<std::unique_ptr<VulkanBuffer>> create(const DeviceContext& context,
                                                      std::uint64_t size, MemoryKind kind);

  VulkanBuffer(const VulkanBuffer&) = delete;
  VulkanBuffer& operator=(const VulkanBuffer&) = delete;
  ~VulkanBuffer() override;

  std::byte* host_data() noexcept override { return mapped_; }
  VkBuffer handle() const noexcept { return buffer_; }
  std::uint64_t allocated_size() const noexcept { return allocated_size_; }

 private:
  explicit VulkanBuffer(const DeviceContext& context) : context_(context) {}

  const DeviceContext& context_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  std::byte* mapped_ = nullptr;
  std::uint64_t allocated_size_ = 0;
};

}  // namespace ferry::vulkan
