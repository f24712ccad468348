// A VkBuffer with its own VkDeviceMemory, persistently mapped for host memory kinds; or a VkBuffer
// over host memory the caller owns, imported with VK_EXT_external_memory_host.
#pragma once

#include <volk.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/backend.hpp"
#include "vulkan/context.hpp"

namespace ferry::vulkan {

class VulkanBuffer final : public backend::BackendBuffer {
 public:
  // The VkBuffer is `size` rounded up to a multiple of 16, so shaders may access whole words
  // (and 16-byte vectors) at the end. ErrorCode::out_of_memory, with the size, when the memory
  // cannot be had.
  static Result<std::unique_ptr<VulkanBuffer>> create(const DeviceContext& context,
                                                      std::uint64_t size, MemoryKind kind);

  // Imports `size` bytes at `data` (host_upload or host_readback) in place; host_data() is
  // `data`, and destruction releases the import without freeing the memory. ErrorCode::
  // unavailable without VK_EXT_external_memory_host; ErrorCode::invalid_argument, naming the
  // alignment, unless `data` and `size` are multiples of it.
  static Result<std::unique_ptr<VulkanBuffer>> import_host(const DeviceContext& context,
                                                           std::byte* data, std::uint64_t size,
                                                           MemoryKind kind);

  VulkanBuffer(const VulkanBuffer&) = delete;
  VulkanBuffer& operator=(const VulkanBuffer&) = delete;
  ~VulkanBuffer() override;

  std::byte* host_data() noexcept override { return mapped_; }
  bool host_visible() const noexcept { return mapped_ != nullptr; }
  std::uintptr_t host_address() const noexcept { return reinterpret_cast<std::uintptr_t>(mapped_); }
  VkBuffer handle() const noexcept { return buffer_; }
  std::uint64_t allocated_size() const noexcept { return allocated_size_; }

 private:
  explicit VulkanBuffer(const DeviceContext& context) : context_(context) {}
  // The VkBuffer of buffer_size bytes (size: what the caller asked for, for errors); `next`
  // extends its VkBufferCreateInfo.
  Status create_handle(std::uint64_t buffer_size, std::uint64_t size, MemoryKind kind,
                       const void* next);
  Status allocate_and_bind(const VkMemoryAllocateInfo& allocate_info, std::uint64_t size,
                           MemoryKind kind);

  const DeviceContext& context_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  std::byte* mapped_ = nullptr;
  std::uint64_t allocated_size_ = 0;
};

}  // namespace ferry::vulkan
