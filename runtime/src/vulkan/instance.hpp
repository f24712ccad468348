// A VkInstance, with the Khronos validation layer (synchronization validation on) and a
// debug-utils messenger when validation is requested.
#pragma once

#include <volk.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "ferry/device.hpp"
#include "ferry/status.hpp"

namespace ferry::vulkan {

// Forwards debug-utils messages to the user's sink (stderr for warnings and errors when there is
// none) and counts those of warning or error severity.
class MessageRelay {
 public:
  using Sink = std::function<void(MessageSeverity, std::string_view)>;
  explicit MessageRelay(Sink sink) : sink_(std::move(sink)) {}

  std::uint64_t warning_and_error_count() const noexcept { return count_.load(); }
  void relay(MessageSeverity severity, std::string_view message);

  static VKAPI_ATTR VkBool32 VKAPI_CALL callback(
      VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
      const VkDebugUtilsMessengerCallbackDataEXT* data, void* user_data);

 private:
  Sink sink_;
  std::atomic<std::uint64_t> count_{0};
};

struct InstanceOptions {
  bool validation = false;
  MessageRelay::Sink message_sink;
};

class VulkanInstance {
 public:
  // ErrorCode::unavailable with the reason when there is no loader, no driver, or validation is
  // requested but the layer (or the extensions it needs) is not installed.
  static Result<std::unique_ptr<VulkanInstance>> create(const InstanceOptions& options);

  VulkanInstance(const VulkanInstance&) = delete;
  VulkanInstance& operator=(const VulkanInstance&) = delete;
  ~VulkanInstance();

  VkInstance handle() const noexcept { return instance_; }
  bool validation() const noexcept { return validation_; }
  std::uint64_t validation_message_count() const noexcept {
    return relay_ ? relay_->warning_and_error_count() : 0;
  }

 private:
  VulkanInstance() = default;

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;
  bool validation_ = false;
  // Heap-allocated: its address is the messenger's user data, which must outlive the instance.
  std::unique_ptr<MessageRelay> relay_;
};


}  // namespace ferry::vulkan
