// Explicit list of the backends built in. No static-initializer registration: a linker may drop
// an unreferenced object file, and then a backend silently disappears.
#include "core/drivers.hpp"

#include <memory>
#include <mutex>

#include "core/numa.hpp"

namespace ferry::detail {
namespace {

struct Registry {
  std::vector<std::unique_ptr<backend::Driver>> owned;
  std::vector<backend::ProbeResult> probes;
  std::vector<DriverEntry> entries;
};

Registry make_registry() {
  Registry registry;
#if defined(FERRY_HAVE_CUDA)
  registry.owned.push_back(backend::create_cuda_driver());
#endif
#if defined(FERRY_HAVE_VULKAN)
  registry.owned.push_back(backend::create_vulkan_driver());
#endif
  registry.owned.push_back(backend::create_cpu_driver());
  registry.probes.reserve(registry.owned.size());
  for (auto& driver : registry.owned) {
    registry.probes.push_back(driver->probe());
    // The NUMA node from the PCI address, read in one place for every backend.
    for (DeviceInfo& info : registry.probes.back().devices) info.numa_node = pci_numa_node(info.pci_bus_id);
  }
  for (std::size_t i = 0; i < registry.owned.size(); ++i) {
    registry.entries.push_back({registry.owned[i].get(), &registry.probes[i]});
  }
  return registry;
}

}  // namespace

const std::vector<DriverEntry>& drivers() {
  // Intentionally never destroyed: devices may outlive static destruction order.
  static Registry* registry = new Registry(make_registry());
  return registry->entries;
}

}  // namespace ferry::detail
