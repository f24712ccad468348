// The commands of the `ferry` program and the conventions they share.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "ferry/device.hpp"
#include "ferry/status.hpp"
#include "options.hpp"

namespace ferry::cli {

// Exit statuses: 0 success, 1 a library error or wrong data, 2 bad command-line usage.
inline constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2;

// Prints "ferry: <message>" and a pointer to --help on stderr; returns kExitUsage.
int usage_error(std::string_view message);
// Prints the library error with Status::to_string() on stderr; returns kExitFailure.
int library_error(const Status& status, std::string_view context = {});
// Device options for the commands: validation and driver messages go to stderr, one per line.
DeviceOptions device_options();

// One command of the program: its help and options, and what runs it.
struct Command {
  std::string_view name = {};                // "bench transfer"
  std::string_view summary = {};             // its paragraph in `ferry --help`
  std::string_view about = {};               // the start of its own --help, before the options
  std::span<const OptionSpec> options = {};  // its own; a bench also takes kBenchOptions
  bool bench = true;
  std::string_view operand = {};            // "NAME" when it takes one argument (not an option)
  std::string (*operand_help)() = nullptr;  // more help text about that argument
  // `command_line`: the command as typed, for the report.
  int (*run)(const Options& options, const std::string& command_line) = nullptr;
};

extern const Command kInfoCommand, kBenchTransfer, kBenchIngress, kBenchEgress, kBenchOp;

}  // namespace ferry::cli
