#include "vulkan/instance.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "vulkan/loader.hpp"
#include "vulkan/status.hpp"

namespace ferry::vulkan {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

Result<std::vector<VkExtensionProperties>> instance_extensions(const char* layer) {
  std::uint32_t count = 0;
  FERRY_VK_RETURN_IF_ERROR(vkEnumerateInstanceExtensionProperties(layer, &count, nullptr));
  std::vector<VkExtensionProperties> extensions(count);
  FERRY_VK_RETURN_IF_ERROR(
      vkEnumerateInstanceExtensionProperties(layer, &count, extensions.data()));
  extensions.resize(count);
  return extensions;
}

// The Vulkan loader loads the drivers (ICD libraries) with each instance and unloads them with
// it. NVIDIA's driver library cannot be loaded again and again: in one process, the 69th
// vkCreateInstance after as many destroyed ones fails with VK_ERROR_INCOMPATIBLE_DRIVER (seen on
// the H100 with driver 580: an application opening and closing devices in a loop would hit it).
// One instance without layers, made before the first of ours and never destroyed, keeps every
// driver loaded for the life of the process (it owns no device or memory). If it cannot be made,
// the instance that follows reports why.
void keep_drivers_loaded() {
  static std::once_flag once;
  std::call_once(once, [] {
    VkApplicationInfo application{};
    application.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    application.pApplicationName = "ferry (keeps the Vulkan drivers loaded)";
    application.apiVersion = VK_API_VERSION_1_3;
    VkInstanceCreateInfo create_info{};
    create_info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    create_info.pApplicationInfo = &application;
    static VkInstance keeper = VK_NULL_HANDLE;  // reachable until exit: not a leak
    (void)vkCreateInstance(&create_info, nullptr, &keeper);
  });
}

bool has_extension(const std::vector<VkExtensionProperties>& extensions, const char* name) {
  for (const VkExtensionProperties& extension : extensions) {
    if (std::strcmp(extension.extensionName, name) == 0) return true;
  }
  return false;
}

Result<bool> has_layer(const char* name) {
  std::uint32_t count = 0;
  FERRY_VK_RETURN_IF_ERROR(vkEnumerateInstanceLayerProperties(&count, nullptr));
  std::vector<VkLayerProperties> layers(count);
  FERRY_VK_RETURN_IF_ERROR(vkEnumerateInstanceLayerProperties(&count, layers.data()));
  for (std::uint32_t i = 0; i < count; ++i) {
    if (std::strcmp(layers[i].layerName, name) == 0) return true;
  }
  return false;
}

// Checks that the validation layer and the instance extensions it needs are installed.
Status check_validation_support() {
  FERRY_ASSIGN_OR_RETURN(const bool layer_present, has_layer(kValidationLayer));
  if (!layer_present) {
    return Status(ErrorCode::unavailable,
                  "Vulkan validation was requested (DeviceOptions::validation or "
                  "FERRY_VALIDATION=1) but the layer VK_LAYER_KHRONOS_validation is not installed "
                  "(Debian: apt install vulkan-validationlayers)");
  }
  FERRY_ASSIGN_OR_RETURN(auto loader_extensions, instance_extensions(nullptr));
  FERRY_ASSIGN_OR_RETURN(auto layer_extensions, instance_extensions(kValidationLayer));
  for (const char* needed :
       {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME}) {
    if (!has_extension(loader_extensions, needed) && !has_extension(layer_extensions, needed)) {
      return Status(ErrorCode::unavailable, std::string("Vulkan validation was requested but ") +
                                                needed + " is not available");
    }
  }
  return Status();
}

}  // namespace

void MessageRelay::relay(MessageSeverity severity, std::string_view message) {
  if (severity != MessageSeverity::info) count_.fetch_add(1);
  if (sink_) {
    // The application's sink runs inside a Vulkan call, on whichever thread made it: an
    // exception must not unwind through the driver.
    try {
      sink_(severity, message);
    } catch (...) {
      std::fprintf(stderr, "ferry: the message sink threw; message: %.*s\n",
                   static_cast<int>(message.size()), message.data());
    }
  } else if (severity != MessageSeverity::info) {
    std::fprintf(stderr, "ferry: Vulkan validation %s: %.*s\n",
                 severity == MessageSeverity::error ? "error" : "warning",
                 static_cast<int>(message.size()), message.data());
  }
}

VKAPI_ATTR VkBool32 VKAPI_CALL MessageRelay::callback(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user_data) {
  auto* relay = static_cast<MessageRelay*>(user_data);
  MessageSeverity ours = MessageSeverity::info;
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    ours = MessageSeverity::error;
  } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    ours = MessageSeverity::warning;
  } else if (types == VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT) {
    return VK_FALSE;  // the loader's informational log (~90 lines per instance): not forwarded
  }
  const char* message = data != nullptr && data->pMessage != nullptr ? data->pMessage : "";
  relay->relay(ours, message);
  return VK_FALSE;  // never abort the call that triggered the message
}

Result<std::unique_ptr<VulkanInstance>> VulkanInstance::create(const InstanceOptions& options) {
  FERRY_RETURN_IF_ERROR(load_vulkan_loader());
  if (options.validation) FERRY_RETURN_IF_ERROR(check_validation_support());

  std::unique_ptr<VulkanInstance> instance(new VulkanInstance());
  instance->validation_ = options.validation;

  VkApplicationInfo application{};
  application.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  application.pApplicationName = "ferry";
  application.pEngineName = "ferry";
  application.apiVersion = VK_API_VERSION_1_3;

  VkInstanceCreateInfo create_info{};
  create_info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  create_info.pApplicationInfo = &application;

  // Validation: the layer with synchronization validation (GPU-assisted validation stays off),
  // and a messenger that also covers vkCreateInstance / vkDestroyInstance (pNext chain).
  const char* layers[] = {kValidationLayer};
  const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME,
                              VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
  const VkValidationFeatureEnableEXT enables[] = {
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{};
  features.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  VkDebugUtilsMessengerCreateInfoEXT messenger_info{};
  messenger_info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT |
                                   VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                   VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = &MessageRelay::callback;
  if (options.validation) {
    instance->relay_ = std::make_unique<MessageRelay>(options.message_sink);
    messenger_info.pUserData = instance->relay_.get();
    features.pNext = &messenger_info;
    create_info.pNext = &features;
    create_info.enabledLayerCount = 1;
    create_info.ppEnabledLayerNames = layers;
    create_info.enabledExtensionCount = 2;
    create_info.ppEnabledExtensionNames = extensions;
  }

  keep_drivers_loaded();
  const VkResult created = vkCreateInstance(&create_info, nullptr, &instance->instance_);
  if (created == VK_ERROR_INCOMPATIBLE_DRIVER) {
    return Status(ErrorCode::unavailable,
                  "no Vulkan driver found (vkCreateInstance returned VK_ERROR_INCOMPATIBLE_DRIVER)");
  }
  if (created != VK_SUCCESS) return vk_status(created, "vkCreateInstance");
  load_instance_functions(instance->instance_);

  if (options.validation) {
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance->instance_, "vkCreateDebugUtilsMessengerEXT"));
    instance->destroy_messenger_ = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance->instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (create_messenger == nullptr || instance->destroy_messenger_ == nullptr) {
      return Status(ErrorCode::unavailable, "VK_EXT_debug_utils functions are missing");
    }
    messenger_info.pNext = nullptr;
    FERRY_VK_RETURN_IF_ERROR(create_messenger(instance->instance_, &messenger_info, nullptr,
                                              &instance->messenger_));
  }
  return instance;
}

VulkanInstance::~VulkanInstance() {
  if (messenger_ != VK_NULL_HANDLE) destroy_messenger_(instance_, messenger_, nullptr);
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

}  // namespace ferry::vulkan
