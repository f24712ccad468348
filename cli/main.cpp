// `ferry`: inspect backends and devices, search vector files, pack tensors with IBP, and benchmark
// transfers, ingress, egress and ops, through the public API only.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/version.hpp"
#include "options.hpp"
#include "report.hpp"

namespace ferry::cli {

namespace {

const Command* const kCommands[] = {&kInfoCommand,  &kSearchCommand, &kBenchTransfer,
                                    &kBenchIngress, &kBenchEgress,   &kBenchOp,
                                    &kBenchSearch, &kIbpEncodeCommand, &kIbpDecodeCommand,
                                    &kIbpInspectCommand, &kBenchIbp, &kBenchMulti};

std::string usage(const Command& command) {
  std::string line = "ferry " + std::string(command.name);
  if (!command.operand.empty()) line.append(" ").append(command.operand);
  return line + " [options]";
}

std::string program_help() {
  std::string help = "ferry " FERRY_VERSION_STRING " - portable GPU transfer runtime\n\nUsage:\n";
  for (const Command* command : kCommands) help += "  " + usage(*command) + "\n";
  help += "  ferry --help | --version\n  ferry <command> --help\n\nCommands:\n";
  for (const Command* command : kCommands)
    help += wrap_text("  " + std::string(command->name), command->summary, 19);
  return help +
         "\nEnvironment:\n"
         "  FERRY_VALIDATION=1   enable the API's validation layer (Vulkan: Khronos validation)\n"
         "  FERRY_FAULTS=...     fail calls on purpose to test error paths, e.g. submit=3 or\n"
         "                       alloc=p0.01,seed=7 (sites alloc, submit, wait, thread)\n"
         "  FERRY_VERBOSE=1      error messages also give the source location inside ferry\n"
         "  FERRY_CPU_ISA=...    the CPU backend's search at most this instruction set: portable,\n"
         "                       avx2 or avx512 (by default the best the CPU has)\n"
         "\nBenches print each table as soon as it is measured; Ctrl-C stops one at the next\n"
         "step and keeps what was measured (JSON marked \"interrupted\").\n"
         "\nExit status: 0 success, 1 error (library error or wrong data), 2 bad usage,\n"
         "130 a bench stopped by Ctrl-C.\n";
}

// A bench's options are its own and those of every bench.
OptionTables tables(const Command& command) {
  if (command.bench) return {command.options, kBenchOptions};
  return {command.options};
}

std::string command_help(const Command& command) {
  std::string help = "Usage: " + usage(command) + "\n\n" + std::string(command.about) + "\n";
  if (command.operand_help != nullptr) help += command.operand_help() + "\n";
  return help + options_help(tables(command));
}

int run_command(const Command& command, const std::vector<std::string_view>& args) {
  Result<Options> parsed = Options::parse(command.name, args, tables(command));
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Options& options = *parsed;
  if (options.help()) {
    std::cout << command_help(command);
    return kExitOk;
  }
  const std::size_t operands = command.operand.empty() ? 0 : 1;
  if (options.operands().size() != operands) {
    return usage_error(std::string(command.name) +
                       (operands == 0 ? ": unexpected argument '" + options.operands()[0] + "'"
                                      : ": needs one " + std::string(command.operand)));
  }
  // A --json-file that cannot be written is found now, not after the whole benchmark (a file
  // made only for this test is removed again: a failed run leaves nothing behind).
  for (const char* output : {"--json-file", "--trace"}) {
    if (!options.given(output)) continue;
    const std::string path = options.text(output);
    if (const std::string why = unwritable(path); !why.empty())
      return usage_error(std::string(output) + " " + path + ": " + why);
  }
  std::string line = "ferry " + std::string(command.name);
  for (std::string_view arg : args) line.append(" ").append(arg);
  return command.run(options, line);
}

int run(const std::vector<std::string_view>& args) {
  if (args.empty()) {
    std::cerr << program_help();
    return kExitUsage;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << program_help();
    return kExitOk;
  }
  if (args[0] == "--version") {
    std::cout << "ferry " FERRY_VERSION_STRING "\n";
    return kExitOk;
  }
  const bool bench = args[0] == "bench";
  if (bench && args.size() == 1)
    return usage_error("'bench' needs a benchmark name: transfer, ingress, egress, op, search, ibp or multi");
  if (bench && (args[1] == "--help" || args[1] == "-h")) {
    for (const Command* command : kCommands) {
      if (command->bench) std::cout << command_help(*command) << "\n";
    }
    return kExitOk;
  }
  // `ferry ibp encode|decode|inspect`: two-word commands, like the benches; -o is --out.
  const bool ibp = args[0] == "ibp";
  if (ibp && args.size() == 1) return usage_error("'ibp' needs a command: encode, decode or inspect");
  const bool two_words = bench || ibp;
  const std::string name = two_words ? std::string(args[0]) + " " + std::string(args[1])
                                     : std::string(args[0]);
  std::vector<std::string_view> rest(args.begin() + (two_words ? 2 : 1), args.end());
  if (ibp) std::replace(rest.begin(), rest.end(), std::string_view("-o"), std::string_view("--out"));
  for (const Command* command : kCommands) {
    if (command->name == name) return run_command(*command, rest);
  }
  return usage_error("unknown command '" + name + "'");
}

}  // namespace

std::string unwritable(const std::string& path) {
  std::error_code ignored;
  const std::filesystem::file_status status = std::filesystem::status(path, ignored);
  if (std::filesystem::is_directory(status)) return "is a directory";
  // A device or pipe the user names (/dev/stdout, a FIFO) is written as it is, never probed:
  // opening a FIFO would wait for its reader, and closing the probe would end the reader's input.
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) return {};
  const bool existed = std::filesystem::exists(status);
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) return std::strerror(errno);
  std::fclose(file);
  if (!existed) std::remove(path.c_str());
  return {};
}

int usage_error(std::string_view message) {
  std::cerr << "ferry: " << message << "\nRun 'ferry --help' for usage.\n";
  return kExitUsage;
}

int library_error(const Status& status, std::string_view context) {
  std::cerr << "ferry: error: ";
  if (!context.empty()) std::cerr << context << ": ";
  // The source location is for ferry's developers: shown only with FERRY_VERBOSE.
  const char* verbose = std::getenv("FERRY_VERBOSE");
  if (verbose != nullptr && verbose[0] != '\0' && std::string_view(verbose) != "0") {
    std::cerr << status.to_string() << '\n';
  } else {
    std::cerr << to_string(status.code()) << ": " << status.message() << '\n';
  }
  return kExitFailure;
}

DeviceOptions device_options() {
  DeviceOptions options;
  options.message_sink = [](MessageSeverity severity, std::string_view message) {
    if (severity == MessageSeverity::info) return;  // loader chatter, not worth a line
    static std::mutex mutex;                        // messages may come from any thread
    const char* label = severity == MessageSeverity::error ? "error" : "warning";
    std::lock_guard<std::mutex> lock(mutex);
    std::cerr << "ferry: device " << label << ": " << message << '\n';
  };
  return options;
}

}  // namespace ferry::cli

int main(int argc, char** argv) {
  int status = ferry::cli::run(std::vector<std::string_view>(argv + 1, argv + argc));
  // Output that did not reach its file (a full disk, /dev/full, a closed pipe) is a failure.
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout) {
    const int error = errno;
    std::cerr << "ferry: error: cannot write the output: "
              << (error != 0 ? std::strerror(error) : "write failed") << '\n';
    if (status == ferry::cli::kExitOk) status = ferry::cli::kExitFailure;
  }
  return status;
}
