// VkResult -> ferry::Status, keeping the Vulkan call's name and the call site's file:line.
#pragma once

#include <volk.h>

#include <source_location>
#include <string_view>

#include "ferry/status.hpp"

namespace ferry::vulkan {

std::string_view vk_result_name(VkResult result) noexcept;
ErrorCode vk_error_code(VkResult result) noexcept;

// `call` is the call's text or name; the function name before '(' is kept ("vkCreateDevice").
Status vk_status(VkResult result, std::string_view call,
                 std::source_location where = std::source_location::current());

}  // namespace ferry::vulkan

// Evaluates a Vulkan call and returns its error Status (call name, VkResult, file:line) from the
// enclosing function unless it returned VK_SUCCESS.
#define FERRY_VK_RETURN_IF_ERROR(call)                                                     \
  do {                                                                                     \
    if (const VkResult ferry_vk_result_ = (call); ferry_vk_result_ != VK_SUCCESS) {        \
      return ::ferry::vulkan::vk_status(ferry_vk_result_, #call,                           \
                                        std::source_location::current());                  \
    }                                                                                      \
  } while (0)
