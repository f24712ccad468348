// The Vulkan driver: probe() lists usable devices through a throwaway instance (no validation);
// open() makes an instance of its own for each device, with validation when asked.
#include <memory>
#include <string>

#include "core/backend.hpp"
#include "vulkan/physical_devices.hpp"
#include "vulkan/device.hpp"
#include "vulkan/instance.hpp"

namespace ferry::backend {
namespace {

class VulkanDriver final : public Driver {
 public:
  Backend backend() const override { return Backend::vulkan; }

  ProbeResult probe() override {
    ProbeResult result;
    Result<std::unique_ptr<vulkan::VulkanInstance>> instance = vulkan::VulkanInstance::create({});
    if (!instance.ok()) {
      result.reason = instance.status().message();
      return result;
    }
    Result<vulkan::PhysicalDeviceList> devices =
        vulkan::list_physical_devices((*instance)->handle());
    if (!devices.ok()) {
      result.reason = devices.status().message();
      if (devices.status().code() == ErrorCode::invalid_argument) {
        result.config_error = devices.status();
      }
      return result;
    }
    if (devices->usable.empty()) {
      result.reason = devices->rejected.empty()
                          ? "no Vulkan device found"
                          : "no Vulkan device ferry can use: " + devices->rejected;
      return result;
    }
    result.available = true;
    for (const vulkan::PhysicalDevice& device : devices->usable) {
      result.devices.push_back(device.info);
    }
    return result;
  }

  Result<std::unique_ptr<BackendDevice>> open(int index, const DeviceOptions& options) override {
    vulkan::InstanceOptions instance_options;
    // Core has applied FERRY_VALIDATION already (core/device.cpp: the one place it is read).
    instance_options.validation = options.validation;
    instance_options.message_sink = options.message_sink;
    FERRY_ASSIGN_OR_RETURN(auto instance, vulkan::VulkanInstance::create(instance_options));
    FERRY_ASSIGN_OR_RETURN(const vulkan::PhysicalDeviceList devices,
                           vulkan::list_physical_devices(instance->handle()));
    if (index < 0 || static_cast<std::size_t>(index) >= devices.usable.size()) {
      if (devices.usable.empty()) {
        return Status(ErrorCode::unavailable,
                      devices.rejected.empty() ? "no Vulkan device found"
                                               : "no Vulkan device ferry can use: " +
                                                     devices.rejected);
      }
      return Status(ErrorCode::out_of_range,
                    "Vulkan device index " + std::to_string(index) + " out of range (" +
                        std::to_string(devices.usable.size()) + " usable devices)");
    }
    FERRY_ASSIGN_OR_RETURN(
        auto device, vulkan::VulkanDevice::create(std::move(instance),
                                     devices.usable[static_cast<std::size_t>(index)]));
    return std::unique_ptr<BackendDevice>(std::move(device));
  }
};

}  // namespace

std::unique_ptr<Driver> create_vulkan_driver() { return std::make_unique<VulkanDriver>(); }

}  // namespace ferry::backend
