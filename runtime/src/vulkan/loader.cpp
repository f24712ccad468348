#include "vulkan/loader.hpp"

#include <mutex>
#include <string>

namespace ferry::vulkan {

Status load_vulkan_loader() {
  // volkInitialize writes globals: run it once, and remember the outcome.
  static const Status loaded = []() -> Status {
    if (volkInitialize() != VK_SUCCESS) {
      return Status(ErrorCode::unavailable, "Vulkan loader (libvulkan.so.1) not found");
    }
    const std::uint32_t version = volkGetInstanceVersion();
    if (version < VK_API_VERSION_1_3) {
      return Status(ErrorCode::unavailable,
                    "the Vulkan loader supports API " +
                        std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
                        std::to_string(VK_API_VERSION_MINOR(version)) + "; ferry needs 1.3");
    }
    return Status();
  }();
  return loaded;
}

void load_instance_functions(VkInstance instance) {
  static std::once_flag loaded;
  std::call_once(loaded, [instance] { volkLoadInstanceOnly(instance); });
}

}  // namespace ferry::vulkan
