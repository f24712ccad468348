// Where a device sits on the host (its NUMA node, from its PCI address in sysfs) and keeping the
// host side of a device's work on that node: on a host of several NUMA nodes, a GPU's transfers
// read and write pinned memory at the bandwidth of the node that holds it, and memory of another
// node crosses the inter-socket link that every GPU of the host shares.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/device.hpp"

namespace ferry::detail {

// "0-3,8,10-11" (sysfs cpulist) -> {0, 1, 2, 3, 8, 10, 11}; nothing when malformed.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

// The host's NUMA nodes as `sys_root`/devices/system/node lists them (0 where it does not).
int numa_node_count(const std::filesystem::path& sys_root = "/sys");
// The CPUs of a node (its cpulist); empty when unknown.
std::vector<int> numa_node_cpus(int node, const std::filesystem::path& sys_root = "/sys");
// The NUMA node of the PCI device at `bus_id` ("0000:3b:00.0", any case): its sysfs numa_node,
// -1 when unknown (no such device, no node, or an empty id).
int pci_numa_node(std::string_view bus_id, const std::filesystem::path& sys_root = "/sys");

// The CPUs that ferry's host work for a device on `node` runs on: the node's CPUs when placement
// is automatic, the host has several nodes and the node is known; else none (no placement).
std::vector<int> placement_cpus(NumaPlacement placement, int node,
                                const std::filesystem::path& sys_root = "/sys");

// The CPUs the calling thread may run on.
std::vector<int> current_thread_cpus();

// Runs the calling thread on `cpus` (those of them it is allowed) until destroyed, then puts its
// former CPU set back. Nothing happens for an empty list or one the thread may use none of, so a
// cgroup or taskset that excludes the node never fails the work.
class ScopedCpuPlacement {
 public:
  explicit ScopedCpuPlacement(const std::vector<int>& cpus);
  ~ScopedCpuPlacement();
  ScopedCpuPlacement(const ScopedCpuPlacement&) = delete;
  ScopedCpuPlacement& operator=(const ScopedCpuPlacement&) = delete;

 private:
  std::vector<int> former_;  // empty: nothing was changed
};

// Moves the calling thread onto `cpus` for good (a thread ferry started for a device); as above,
// nothing happens where it could not use any of them.
void place_this_thread(const std::vector<int>& cpus);

}  // namespace ferry::detail
