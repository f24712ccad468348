#include "vulkan/vk_buffer.hpp"

#include <string>

#include "vulkan/vk_status.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint64_t kSizeGranularity = 16;

Status out_of_memory(std::uint64_t size, MemoryKind kind, const std::string& why) {
  return Status(ErrorCode::out_of_memory, "cannot allocate " + std::to_string(size) +
                                              " bytes of " + std::string(to_string(kind)) +
                                              " memory: " + why);
}

}  // namespace

Result<std::unique_ptr<VulkanBuffer>> VulkanBuffer::create(const DeviceContext& context,
                                                           std::uint64_t size, MemoryKind kind) {
  const VolkDeviceTable& vk = context.vk;
  if (size > context.max_buffer_size - kSizeGranularity) {
    return out_of_memory(size, kind,
                         "larger than the device's maxBufferSize " +
                             std::to_string(context.max_buffer_size));
  }
  std::unique_ptr<VulkanBuffer> buffer(new VulkanBuffer(context));
  buffer->allocated_size_ = (size + kSizeGranularity - 1) / kSizeGranularity * kSizeGranularity;

  VkBufferCreateInfo buffer_info{};
  buffer_info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  buffer_info.size = buffer->allocated_size_;
  buffer_info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  // Used by queues of several families without ownership transfers.
  if (context.queue_families.size() > 1) {
    buffer_info.sharingMode = VK_SHARING_MODE_CONCURRENT;
    buffer_info.queueFamilyIndexCount = static_cast<std::uint32_t>(context.queue_families.size());
    buffer_info.pQueueFamilyIndices = context.queue_families.data();
  } else {
    buffer_info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  }
  const VkResult created = vk.vkCreateBuffer(context.device, &buffer_info, nullptr, &buffer->buffer_);
  if (created == VK_ERROR_OUT_OF_DEVICE_MEMORY || created == VK_ERROR_OUT_OF_HOST_MEMORY) {
    return out_of_memory(size, kind, "vkCreateBuffer failed: " + std::string(vk_result_name(created)));
  }
  if (created != VK_SUCCESS) return vk_status(created, "vkCreateBuffer");

  VkMemoryRequirements requirements{};
  vk.vkGetBufferMemoryRequirements(context.device, buffer->buffer_, &requirements);
  const std::optional<std::uint32_t> type_index = choose_memory_type(
      context.memory_types, requirements.memoryTypeBits & context.usable_memory_type_bits, kind);
  if (!type_index) {
    return Status(ErrorCode::unavailable, "the device has no memory type suitable for " +
                                              std::string(to_string(kind)) + " buffers");
  }
  // Checked here rather than left to vkAllocateMemory: exceeding either is invalid usage.
  if (requirements.size > context.memory_types[*type_index].heap_size) {
    return out_of_memory(size, kind, "larger than its memory heap");
  }
  if (requirements.size > context.max_memory_allocation_size) {
    return out_of_memory(size, kind,
                         "larger than the device's maxMemoryAllocationSize " +
                             std::to_string(context.max_memory_allocation_size));
  }

  VkMemoryAllocateInfo allocate_info{};
  allocate_info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  allocate_info.allocationSize = requirements.size;
  allocate_info.memoryTypeIndex = *type_index;
  const VkResult allocated =
      vk.vkAllocateMemory(context.device, &allocate_info, nullptr, &buffer->memory_);
  if (allocated != VK_SUCCESS) {
    buffer->memory_ = VK_NULL_HANDLE;
    return out_of_memory(size, kind,
                         "vkAllocateMemory failed: " + std::string(vk_result_name(allocated)));
  }
  FERRY_VK_RETURN_IF_ERROR(
      vk.vkBindBufferMemory(context.device, buffer->buffer_, buffer->memory_, 0));

  if (kind != MemoryKind::device) {
    void* mapped = nullptr;
    FERRY_VK_RETURN_IF_ERROR(
        vk.vkMapMemory(context.device, buffer->memory_, 0, VK_WHOLE_SIZE, 0, &mapped));
    buffer->mapped_ = static_cast<std::byte*>(mapped);
  }
  return buffer;
}

VulkanBuffer::~VulkanBuffer() {
  // Freeing the memory unmaps it.
  if (buffer_ != VK_NULL_HANDLE) context_.vk.vkDestroyBuffer(context_.device, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) context_.vk.vkFreeMemory(context_.device, memory_, nullptr);
}

}  // namespace ferry::vulkan
