// The commands of the `ferry` program and the conventions they share.
#pragma once

#include <string_view>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/status.hpp"

namespace ferry::cli {

// Exit statuses: 0 success, 1 a library error or wrong data, 2 bad command-line usage.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Prints "ferry: <message>" and a pointer to --help on stderr; returns kExitUsage.
int usage_error(std::string_view message);
// Prints the library error with Status::to_string() on stderr; returns kExitFailure.
int library_error(const Status& status, std::string_view context = {});

// Device options for the commands: validation and driver messages go to stderr, one per line.
DeviceOptions device_options();

// `ferry info [--json]`. args excludes the command name.
int run_info(const std::vector<std::string_view>& args);
// `ferry bench transfer [options]`. args excludes "bench transfer".
int run_bench_transfer(const std::vector<std::string_view>& args);
// `ferry bench ingress [options]`. args excludes "bench ingress".
int run_bench_ingress(const std::vector<std::string_view>& args);
// `ferry bench egress [options]`. args excludes "bench egress".
int run_bench_egress(const std::vector<std::string_view>& args);

extern const char* const kInfoHelp;
extern const char* const kBenchTransferHelp;
extern const char* const kBenchIngressHelp;
extern const char* const kBenchEgressHelp;

}  // namespace ferry::cli
