#include "vulkan/status.hpp"

#include <string>

namespace ferry::vulkan {

std::string_view vk_result_name(VkResult result) noexcept {
  switch (result) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_EVENT_SET: return "VK_EVENT_SET";
    case VK_EVENT_RESET: return "VK_EVENT_RESET";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_UNKNOWN: return "VK_ERROR_UNKNOWN";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
    case VK_ERROR_FRAGMENTATION: return "VK_ERROR_FRAGMENTATION";
    case VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS: return "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS";
    case VK_PIPELINE_COMPILE_REQUIRED: return "VK_PIPELINE_COMPILE_REQUIRED";
    case VK_ERROR_VALIDATION_FAILED_EXT: return "VK_ERROR_VALIDATION_FAILED_EXT";
    default: return "VkResult (unnamed)";
  }
}

ErrorCode vk_error_code(VkResult result) noexcept {
  switch (result) {
    case VK_SUCCESS: return ErrorCode::ok;
    case VK_TIMEOUT: return ErrorCode::timeout;
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTATION:
    case VK_ERROR_TOO_MANY_OBJECTS: return ErrorCode::out_of_memory;
    case VK_ERROR_DEVICE_LOST: return ErrorCode::device_lost;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_INITIALIZATION_FAILED: return ErrorCode::unavailable;
    default: return ErrorCode::backend_error;
  }
}

Status vk_status(VkResult result, std::string_view call, std::source_location where) {
  // "vk.vkCreateDevice(physical, &info, nullptr, &device)" -> "vkCreateDevice": the last "vk"
  // followed by an upper-case letter before the '(' starts the function name.
  const std::string_view head = call.substr(0, call.find('('));
  std::size_t start = 0;
  for (std::size_t i = 0; i + 2 < head.size(); ++i) {
    if (head[i] == 'v' && head[i + 1] == 'k' && head[i + 2] >= 'A' && head[i + 2] <= 'Z') start = i;
  }
  const std::string_view name = head.substr(start);
  std::string message(name);
  message += " failed: ";
  message += vk_result_name(result);
  if (vk_result_name(result) == "VkResult (unnamed)") {
    message += " ";
    message += std::to_string(static_cast<int>(result));
  }
  return Status(vk_error_code(result), std::move(message), where);
}

}  // namespace ferry::vulkan
