// `ferry info`: what the library can use here, and why not where it cannot.
#include <iostream>
#include <optional>
#include <string>

#include "cli_args.hpp"
#include "commands.hpp"
#include "ferry/ferry.hpp"
#include "format.hpp"
#include "json_writer.hpp"
#include "text_table.hpp"

namespace ferry::cli {

const char* const kInfoHelp =
    "Usage: ferry info [--json]\n"
    "\n"
    "Lists every backend compiled in, whether it is available here (and why not), and each\n"
    "device: name, driver, memory, queue families (index, queue count, graphics/compute/transfer\n"
    "flags) and which native queue serves ferry's compute, upload and download queues.\n"
    "Devices are opened briefly to learn their queue assignment when probing does not give it.\n"
    "\n"
    "  --json   machine-readable output on stdout\n";

namespace {

struct DeviceReport {
  DeviceInfo info;
  std::string open_error;  // why the queue assignment is unknown, when it is
};

struct BackendReport {
  BackendInfo info;
  std::vector<DeviceReport> devices;
};

// Probing may leave the queue assignment empty (it is decided at open); open the device then.
DeviceReport describe_device(const DeviceInfo& probed) {
  DeviceReport report{probed, {}};
  if (!probed.queues.empty()) return report;
  Result<Device> device = Device::open(to_string(probed.backend), probed.index, device_options());
  if (!device.ok()) {
    report.open_error = device.status().to_string();
    return report;
  }
  report.info.queues = device->info().queues;
  (void)device->close(std::chrono::seconds(10));  // best effort: the report is already complete
  return report;
}

std::string family_flags(const QueueFamilyInfo& family) {
  std::string flags;
  flags += family.graphics ? 'g' : '-';
  flags += family.compute ? 'c' : '-';
  flags += family.transfer ? 't' : '-';
  return flags;
}

void print_text(const std::vector<BackendReport>& backends) {
  std::cout << "ferry " FERRY_VERSION_STRING "\n\nBackends\n";
  TextTable summary;
  summary.add_column("backend");
  summary.add_column("status");
  summary.add_column("devices", TextTable::Align::right);
  summary.add_column("reason");
  for (const auto& backend : backends) {
    summary.add_row({std::string(to_string(backend.info.backend)),
                     backend.info.available ? "available" : "unavailable",
                     std::to_string(backend.devices.size()), backend.info.reason});
  }
  summary.print(std::cout, "  ");

  for (const auto& backend : backends) {
    for (const auto& device : backend.devices) {
      const DeviceInfo& info = device.info;
      std::cout << "\n" << to_string(info.backend) << ":" << info.index << "  " << info.name << "\n";
      std::cout << "  driver          " << (info.driver.empty() ? "-" : info.driver) << "\n";
      std::cout << "  kind            " << (info.is_cpu ? "CPU implementation" : "GPU") << "\n";
      std::cout << "  device memory   " << format_bytes(info.device_memory_bytes) << "\n";
      std::cout << "  host-visible    " << format_bytes(info.host_visible_memory_bytes) << "\n";
      if (info.queue_families.empty()) {
        std::cout << "  queue families  (none: the backend has no such notion)\n";
      } else {
        std::cout << "  queue families  (flags: g graphics, c compute, t transfer)\n";
        TextTable families;
        families.add_column("index", TextTable::Align::right);
        families.add_column("count", TextTable::Align::right);
        families.add_column("flags");
        for (const auto& family : info.queue_families) {
          families.add_row({std::to_string(family.index), std::to_string(family.queue_count),
                            family_flags(family)});
        }
        families.print(std::cout, "    ");
      }
      if (info.queues.empty()) {
        std::cout << "  queues          unknown: "
                  << (device.open_error.empty() ? "not reported" : device.open_error) << "\n";
      } else {
        std::cout << "  queues          (native family and index serving each of ferry's queues)\n";
        TextTable queues;
        queues.add_column("queue");
        queues.add_column("family", TextTable::Align::right);
        queues.add_column("index", TextTable::Align::right);
        queues.add_column("shared");
        for (const auto& queue : info.queues) {
          queues.add_row({std::string(to_string(queue.kind)), std::to_string(queue.family),
                          std::to_string(queue.index), queue.shared ? "yes" : "no"});
        }
        queues.print(std::cout, "    ");
      }
    }
  }
}

void print_json(const std::vector<BackendReport>& backends) {
  JsonWriter json(std::cout);
  json.begin_object();
  json.field("ferry_version", FERRY_VERSION_STRING);
  json.key("backends").begin_array();
  for (const auto& backend : backends) {
    json.begin_object();
    json.field("backend", to_string(backend.info.backend));
    json.field("available", backend.info.available);
    json.field("reason", backend.info.reason);
    json.key("devices").begin_array();
    for (const auto& device : backend.devices) {
      const DeviceInfo& info = device.info;
      json.begin_object();
      json.field("backend", to_string(info.backend));
      json.field("index", info.index);
      json.field("name", info.name);
      json.field("driver", info.driver);
      json.field("is_cpu", info.is_cpu);
      json.field("device_memory_bytes", info.device_memory_bytes);
      json.field("host_visible_memory_bytes", info.host_visible_memory_bytes);
      json.key("queue_families").begin_array();
      for (const auto& family : info.queue_families) {
        json.begin_object();
        json.field("index", family.index);
        json.field("queue_count", family.queue_count);
        json.field("graphics", family.graphics);
        json.field("compute", family.compute);
        json.field("transfer", family.transfer);
        json.end_object();
      }
      json.end_array();
      json.key("queues").begin_array();
      for (const auto& queue : info.queues) {
        json.begin_object();
        json.field("kind", to_string(queue.kind));
        json.field("family", queue.family);
        json.field("index", queue.index);
        json.field("shared", queue.shared);
        json.end_object();
      }
      json.end_array();
      if (!device.open_error.empty()) json.field("open_error", device.open_error);
      json.end_object();
    }
    json.end_array();
    json.end_object();
  }
  json.end_array();
  json.end_object();
  json.finish();
}

}  // namespace

int run_info(const std::vector<std::string_view>& args) {
  bool as_json = false;
  ArgReader reader(args);
  while (!reader.done()) {
    const std::string_view name = reader.peek_name();
    if (name == "--help" || name == "-h") {
      std::cout << kInfoHelp;
      return kExitOk;
    }
    if (name == "--json") {
      if (std::string error = reader.take_flag(); !error.empty()) return usage_error(error);
      as_json = true;
    } else {
      return usage_error("info: unknown argument '" + std::string(name) + "'");
    }
  }

  std::vector<BackendReport> backends;
  for (const BackendInfo& backend : list_backends()) {
    BackendReport report{backend, {}};
    for (const DeviceInfo& device : backend.devices) {
      report.devices.push_back(backend.available ? describe_device(device) : DeviceReport{device, {}});
    }
    backends.push_back(std::move(report));
  }
  if (as_json) {
    print_json(backends);
  } else {
    print_text(backends);
  }
  return kExitOk;
}

}  // namespace ferry::cli
