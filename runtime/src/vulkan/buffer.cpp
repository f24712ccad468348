#include "vulkan/buffer.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "vulkan/status.hpp"

namespace ferry::vulkan {
namespace {

constexpr std::uint64_t kSizeGranularity = 16;

Status out_of_memory(std::uint64_t size, MemoryKind kind, const std::string& why) {
  return Status(ErrorCode::out_of_memory, "cannot allocate " + std::to_string(size) +
                                              " bytes of " + std::string(to_string(kind)) +
                                              " memory: " + why);
}

// Checked before vkAllocateMemory: exceeding either limit is invalid usage, not an error result.
Status check_allocation_limits(const DeviceContext& context, std::uint64_t allocation_size,
                               std::uint32_t type_index, std::uint64_t size, MemoryKind kind) {
  if (allocation_size > context.memory_types[type_index].heap_size) {
    return out_of_memory(size, kind, "larger than its memory heap");
  }
  if (allocation_size > context.max_memory_allocation_size) {
    return out_of_memory(size, kind,
                         "larger than the device's maxMemoryAllocationSize " +
                             std::to_string(context.max_memory_allocation_size));
  }
  return Status();
}

}  // namespace

Status VulkanBuffer::create_handle(std::uint64_t buffer_size, std::uint64_t size, MemoryKind kind,
                                   const void* next) {
  if (buffer_size > context_.max_buffer_size) {
    return out_of_memory(size, kind,
                         "larger than the device's maxBufferSize " +
                             std::to_string(context_.max_buffer_size));
  }
  allocated_size_ = buffer_size;
  VkBufferCreateInfo buffer_info{};
  buffer_info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  buffer_info.pNext = next;
  buffer_info.size = buffer_size;
  buffer_info.usage = kBufferUsage;
  // Used by queues of several families without ownership transfers.
  if (context_.queue_families.size() > 1) {
    buffer_info.sharingMode = VK_SHARING_MODE_CONCURRENT;
    buffer_info.queueFamilyIndexCount = static_cast<std::uint32_t>(context_.queue_families.size());
    buffer_info.pQueueFamilyIndices = context_.queue_families.data();
  } else {
    buffer_info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  }
  const VkResult created =
      context_.vk.vkCreateBuffer(context_.device, &buffer_info, nullptr, &buffer_);
  if (created == VK_ERROR_OUT_OF_DEVICE_MEMORY || created == VK_ERROR_OUT_OF_HOST_MEMORY) {
    buffer_ = VK_NULL_HANDLE;
    return out_of_memory(size, kind,
                         "vkCreateBuffer failed: " + std::string(vk_result_name(created)));
  }
  if (created != VK_SUCCESS) {
    buffer_ = VK_NULL_HANDLE;
    return vk_status(created, "vkCreateBuffer");
  }
  return Status();
}

Status VulkanBuffer::allocate_and_bind(const VkMemoryAllocateInfo& allocate_info,
                                       std::uint64_t size, MemoryKind kind) {
  const VkResult allocated =
      context_.vk.vkAllocateMemory(context_.device, &allocate_info, nullptr, &memory_);
  if (allocated != VK_SUCCESS) {
    memory_ = VK_NULL_HANDLE;
    if (allocated == VK_ERROR_INVALID_EXTERNAL_HANDLE) {
      return Status(ErrorCode::invalid_argument,
                    "the driver refused to import this host memory (vkAllocateMemory: " +
                        std::string(vk_result_name(allocated)) + ")");
    }
    return out_of_memory(size, kind,
                         "vkAllocateMemory failed: " + std::string(vk_result_name(allocated)));
  }
  FERRY_VK_RETURN_IF_ERROR(context_.vk.vkBindBufferMemory(context_.device, buffer_, memory_, 0));
  return Status();
}

Result<std::unique_ptr<VulkanBuffer>> VulkanBuffer::create(const DeviceContext& context,
                                                           std::uint64_t size, MemoryKind kind) {
  const VolkDeviceTable& vk = context.vk;
  const std::optional<std::uint64_t> rounded = detail::checked_round_up(size, kSizeGranularity);
  if (!rounded || *rounded > context.max_buffer_size) {
    return out_of_memory(size, kind,
                         "larger than the device's maxBufferSize " +
                             std::to_string(context.max_buffer_size));
  }
  std::unique_ptr<VulkanBuffer> buffer(new VulkanBuffer(context));
  FERRY_RETURN_IF_ERROR(buffer->create_handle(*rounded, size, kind, nullptr));

  VkMemoryRequirements requirements{};
  vk.vkGetBufferMemoryRequirements(context.device, buffer->buffer_, &requirements);
  const std::optional<std::uint32_t> type_index = choose_memory_type(
      context.memory_types, requirements.memoryTypeBits & context.usable_memory_type_bits, kind);
  if (!type_index) {
    return Status(ErrorCode::unavailable, "the device has no memory type suitable for " +
                                              std::string(to_string(kind)) + " buffers");
  }
  FERRY_RETURN_IF_ERROR(
      check_allocation_limits(context, requirements.size, *type_index, size, kind));

  VkMemoryAllocateInfo allocate_info{};
  allocate_info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  allocate_info.allocationSize = requirements.size;
  allocate_info.memoryTypeIndex = *type_index;
  FERRY_RETURN_IF_ERROR(buffer->allocate_and_bind(allocate_info, size, kind));

  if (kind != MemoryKind::device) {
    void* mapped = nullptr;
    FERRY_VK_RETURN_IF_ERROR(
        vk.vkMapMemory(context.device, buffer->memory_, 0, VK_WHOLE_SIZE, 0, &mapped));
    buffer->mapped_ = static_cast<std::byte*>(mapped);
  }
  return buffer;
}

Result<std::unique_ptr<VulkanBuffer>> VulkanBuffer::import_host(const DeviceContext& context,
                                                                std::byte* data,
                                                                std::uint64_t size,
                                                                MemoryKind kind) {
  const HostMemoryImport& import = context.host_memory_import;
  if (!import.supported) {
    return Status(ErrorCode::unavailable,
                  "cannot register host memory: " + import.unsupported_reason);
  }
  // Vulkan imports whole granules of minImportedHostPointerAlignment, and the fill shader writes
  // whole words up to a multiple of 16 (see create()). Nothing is rounded: memory outside the
  // caller's range is not theirs to hand over.
  const std::uint64_t alignment = std::max(import.pointer_alignment, kSizeGranularity);
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  if (address % alignment != 0 || size % alignment != 0) {
    const bool address_misaligned = address % alignment != 0;
    return Status(ErrorCode::invalid_argument,
                  "the address and size of host memory to register must be multiples of " +
                      std::to_string(alignment) +
                      " bytes (the device's minImportedHostPointerAlignment); the " +
                      (address_misaligned ? "address" : "size") + " is " +
                      std::to_string((address_misaligned ? address : size) % alignment) +
                      " bytes past a multiple");
  }

  const VolkDeviceTable& vk = context.vk;
  constexpr VkExternalMemoryHandleTypeFlagBits kHandleType =
      VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkMemoryHostPointerPropertiesEXT pointer_properties{};
  pointer_properties.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT;
  const VkResult queried = vk.vkGetMemoryHostPointerPropertiesEXT(context.device, kHandleType, data,
                                                                  &pointer_properties);
  if (queried == VK_ERROR_INVALID_EXTERNAL_HANDLE) {
    return Status(ErrorCode::invalid_argument,
                  "the driver cannot import this host memory "
                  "(vkGetMemoryHostPointerPropertiesEXT: VK_ERROR_INVALID_EXTERNAL_HANDLE)");
  }
  if (queried != VK_SUCCESS) return vk_status(queried, "vkGetMemoryHostPointerPropertiesEXT");

  std::unique_ptr<VulkanBuffer> buffer(new VulkanBuffer(context));
  VkExternalMemoryBufferCreateInfo external_info{};
  external_info.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  external_info.handleTypes = kHandleType;
  FERRY_RETURN_IF_ERROR(buffer->create_handle(size, size, kind, &external_info));

  VkMemoryRequirements requirements{};
  vk.vkGetBufferMemoryRequirements(context.device, buffer->buffer_, &requirements);
  const std::optional<std::uint32_t> type_index = choose_memory_type(
      context.memory_types,
      requirements.memoryTypeBits & pointer_properties.memoryTypeBits &
          context.usable_memory_type_bits,
      kind);
  if (!type_index) {
    return Status(ErrorCode::unavailable,
                  "the device has no host-visible, host-coherent memory type that can import "
                  "host memory for " + std::string(to_string(kind)) + " buffers");
  }
  // The buffer must fit in the imported range; a driver that pads it cannot use it in place.
  if (requirements.size > size) {
    return Status(ErrorCode::unavailable,
                  "the device needs " + std::to_string(requirements.size) +
                      " bytes of memory for a buffer of " + std::to_string(size) +
                      " bytes, more than the registered range");
  }
  FERRY_RETURN_IF_ERROR(check_allocation_limits(context, size, *type_index, size, kind));

  VkImportMemoryHostPointerInfoEXT import_info{};
  import_info.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT;
  import_info.handleType = kHandleType;
  import_info.pHostPointer = data;
  VkMemoryAllocateInfo allocate_info{};
  allocate_info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  allocate_info.pNext = &import_info;
  allocate_info.allocationSize = size;
  allocate_info.memoryTypeIndex = *type_index;
  FERRY_RETURN_IF_ERROR(buffer->allocate_and_bind(allocate_info, size, kind));
  // Host and device see the same coherent memory: the caller's pointer is the mapping.
  buffer->mapped_ = data;
  return buffer;
}

VulkanBuffer::~VulkanBuffer() {
  // Freeing the memory unmaps it. Imported memory is released to its owner, never freed.
  if (buffer_ != VK_NULL_HANDLE) context_.vk.vkDestroyBuffer(context_.device, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) context_.vk.vkFreeMemory(context_.device, memory_, nullptr);
}

}  // namespace ferry::vulkan
