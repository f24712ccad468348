// `ferry`: inspect backends and devices, and benchmark transfers, ingress and egress, through the
// public API only.
#include <iostream>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"

namespace ferry::cli {

namespace {

constexpr const char* kHelp =
    "ferry " FERRY_VERSION_STRING " - portable GPU transfer runtime\n"
    "\n"
    "Usage:\n"
    "  ferry info [--json]\n"
    "  ferry bench transfer [options]\n"
    "  ferry bench ingress [options]\n"
    "  ferry bench egress [options]\n"
    "  ferry --help | --version\n"
    "  ferry <command> --help\n"
    "\n"
    "Commands:\n"
    "  info             Backends compiled in (available or not, and why), and every device:\n"
    "                   name, driver, memory, queue families, and which native queue serves\n"
    "                   ferry's compute, upload and download queues.\n"
    "  bench transfer   Host<->device bandwidth (H2D, D2H, both at once) for the plain API path,\n"
    "                   the staging pool, and pageable memory, checked with random data.\n"
    "  bench ingress    Image batches to normalized float tensors on the device: the host\n"
    "                   converting to float32 and uploading it, against ferry's IngressPipeline\n"
    "                   (uint8 upload, normalize on the device); the normalize op against a\n"
    "                   device-to-device copy.\n"
    "  bench egress     Device results to host work, step after step: compute, synchronous\n"
    "                   download and host work one after another, against ferry's\n"
    "                   EgressPipeline overlapping them, held against the slowest component\n"
    "                   alone; ingress and egress together against each direction alone.\n"
    "\n"
    "Environment:\n"
    "  FERRY_VALIDATION=1   enable the API's validation layer (Vulkan: Khronos validation)\n"
    "  FERRY_FAULTS=...     fail calls on purpose to test error paths, e.g. submit=3 or\n"
    "                       alloc=p0.01,seed=7 (sites alloc, submit, wait, thread)\n"
    "\n"
    "Exit status: 0 success, 1 error (library error or wrong data), 2 bad usage.\n";

}  // namespace

int usage_error(std::string_view message) {
  std::cerr << "ferry: " << message << "\nRun 'ferry --help' for usage.\n";
  return kExitUsage;
}

int library_error(const Status& status, std::string_view context) {
  std::cerr << "ferry: error: ";
  if (!context.empty()) std::cerr << context << ": ";
  std::cerr << status.to_string() << '\n';
  return kExitFailure;
}

DeviceOptions device_options() {
  DeviceOptions options;
  options.message_sink = [](MessageSeverity severity, std::string_view message) {
    if (severity == MessageSeverity::info) return;  // loader chatter, not worth a line
    static std::mutex mutex;  // messages may come from any thread
    const char* label = severity == MessageSeverity::error ? "error" : "warning";
    std::lock_guard<std::mutex> lock(mutex);
    std::cerr << "ferry: device " << label << ": " << message << '\n';
  };
  return options;
}

namespace {

int run(const std::vector<std::string_view>& args) {
  if (args.empty()) {
    std::cerr << kHelp;
    return kExitUsage;
  }
  const std::string_view command = args[0];
  const std::vector<std::string_view> rest(args.begin() + 1, args.end());
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kHelp;
    return kExitOk;
  }
  if (command == "--version") {
    std::cout << "ferry " FERRY_VERSION_STRING "\n";
    return kExitOk;
  }
  if (command == "info") return run_info(rest);
  if (command == "bench") {
    if (rest.empty()) {
      return usage_error("'bench' needs a benchmark name: transfer, ingress or egress");
    }
    if (rest[0] == "--help" || rest[0] == "-h") {
      std::cout << kBenchTransferHelp << "\n" << kBenchIngressHelp << "\n" << kBenchEgressHelp;
      return kExitOk;
    }
    const std::vector<std::string_view> bench_args(rest.begin() + 1, rest.end());
    if (rest[0] == "transfer") return run_bench_transfer(bench_args);
    if (rest[0] == "ingress") return run_bench_ingress(bench_args);
    if (rest[0] == "egress") return run_bench_egress(bench_args);
    return usage_error("unknown benchmark '" + std::string(rest[0]) +
                       "' (known: transfer, ingress, egress)");
  }
  return usage_error("unknown command '" + std::string(command) + "'");
}

}  // namespace
}  // namespace ferry::cli

int main(int argc, char** argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return ferry::cli::run(args);
}
