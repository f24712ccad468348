// `ferry info`: what the library can use here, and why not where it cannot.
#include <iostream>
#include <string>

#include "ferry/ferry.hpp"
#include "options.hpp"
#include "report.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kOptions[] = {{.name = "--json", .help = "machine-readable output on stdout"}};

// Probing may leave the queue assignment or the search path empty (they are decided at open,
// CUDA's path by the kernels the build has for the device); open the device then. Returns why
// the queues stay unknown, or empty.
std::string learn_at_open(DeviceInfo& info) {
  if (!info.queues.empty() && !info.search_path.empty()) return {};
  Result<Device> device = Device::open(to_string(info.backend), info.index, device_options());
  if (!device.ok()) return info.queues.empty() ? device.status().to_string() : "";
  if (info.queues.empty()) info.queues = device->info().queues;
  info.search_path = device->info().search_path;
  (void)device->close(std::chrono::seconds(10));  // best effort: what we need is already here
  return info.queues.empty() ? "not reported" : "";
}

void add_device(Report& report, DeviceInfo info, bool available) {
  const std::string open_error = available ? learn_at_open(info) : "";
  const std::string name = std::string(to_string(info.backend)) + ":" + std::to_string(info.index);
  const std::string key = std::string(to_string(info.backend)) + "_" + std::to_string(info.index);
  Section& device = report.add_section(name + "  " + info.name, "device_" + key);
  device.fields = {
      {"driver", "driver", info.driver.empty() ? "-" : info.driver},
      {"kind", "kind", std::string(info.is_cpu ? "CPU implementation" : "GPU")},
      {"", "is_cpu", info.is_cpu, Unit::flag, true},
      {"", "cpu_threads", std::uint64_t{info.cpu_threads}, Unit::count, true},
      {"device memory", "device_memory_bytes", info.device_memory_bytes, Unit::bytes},
      {"host-visible", "host_visible_memory_bytes", info.host_visible_memory_bytes, Unit::bytes}};
  std::string peers;
  for (int peer : info.peer_devices) peers += (peers.empty() ? "" : ", ") + std::to_string(peer);
  device.fields.push_back({"PCI bus", "pci_bus_id", info.pci_bus_id.empty() ? "-" : info.pci_bus_id});
  device.fields.push_back({"NUMA node", "numa_node",
                           info.numa_node < 0 ? "unknown" : std::to_string(info.numa_node)});
  device.fields.push_back({"peer devices", "peer_devices", peers.empty() ? "none" : peers});
  device.fields.push_back({"search path", "search_path",
                           info.search_path.empty() ? "unknown" : info.search_path});
  if (info.backend == Backend::vulkan) {
    device.fields.push_back({"device group", "device_group_size",
                             std::uint64_t{info.device_group_size}, Unit::count});
    device.fields.push_back({"largest op binding", "max_op_binding_bytes",
                             info.max_op_binding_bytes, Unit::bytes});
  }
  if (!open_error.empty())
    device.fields.push_back({"queues", "open_error", "unknown: " + open_error});
  Section& families = report.add_section(
      name + " queue families (flags: g graphics, c compute, t transfer; timestamp bits: 0 "
             "cannot be timed in traces)",
      "queue_families_" + key);
  families.columns = {{"index", "index", Unit::count},
                      {"count", "queue_count", Unit::count},
                      {"flags", "flags"},
                      {"timestamp bits", "timestamp_valid_bits", Unit::count}};
  for (const auto& family : info.queue_families) {
    families.add_row({std::uint64_t{family.index}, std::uint64_t{family.queue_count},
                      std::string{family.graphics ? 'g' : '-', family.compute ? 'c' : '-',
                                  family.transfer ? 't' : '-'},
                      std::uint64_t{family.timestamp_valid_bits}});
  }
  if (families.rows.empty()) families.notes = {"none: the backend has no such notion"};
  Section& queues = report.add_section(
      name + " queues (the native family and index serving each of ferry's queues)",
      "queues_" + key);
  queues.columns = {{"queue", "kind"}, {"family", "family", Unit::count},
                    {"index", "index", Unit::count}, {"shared", "shared", Unit::flag}};
  for (const auto& queue : info.queues) {
    queues.add_row({std::string(to_string(queue.kind)), std::uint64_t{queue.family},
                    std::uint64_t{queue.index}, queue.shared});
  }
}

int run(const Options& options, const std::string&) {
  Report report;
  report.tool = "ferry info";
  Section& backends = report.add_section("Backends", "backends");
  // Reasons are notes under the table, wrapped, rather than a column as wide as the longest.
  backends.columns = {{"backend", "backend"}, {"available", "available", Unit::flag},
                      {"devices", "devices", Unit::count}, {"reason", "reason", Unit::text, true}};
  const std::vector<BackendInfo> listed = list_backends();
  for (const BackendInfo& backend : listed) {
    backends.add_row({std::string(to_string(backend.backend)), backend.available,
                      std::uint64_t{backend.devices.size()}, backend.reason});
    if (!backend.reason.empty())
      backends.notes.push_back(std::string(to_string(backend.backend)) + ": " + backend.reason);
  }
  for (const BackendInfo& backend : listed) {
    for (const DeviceInfo& device : backend.devices) add_device(report, device, backend.available);
  }
  if (options.flag("--json")) {
    render_json(report, std::cout);
  } else {
    render_text(report, std::cout);
  }
  return kExitOk;
}

}  // namespace

const Command kInfoCommand = {
    .name = "info",
    .summary = "Backends compiled in (available or not, and why), and every device: name, driver, "
               "memory, search path, queue families, and the native queues serving ferry's queues.",
    .about =
        "Every backend compiled in, whether it is available here (and why not), and each device:\n"
        "name, driver, memory, the search path (how hamming_topk and BinaryIndex count bits\n"
        "there), queue families and the native queue serving each of ferry's queues (a device is\n"
        "opened briefly when probing does not give those).\n",
    .options = kOptions,
    .bench = false,
    .run = run,
};

}  // namespace ferry::cli
