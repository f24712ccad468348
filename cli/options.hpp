// The `ferry` commands and their options. Each option is declared once (name, kind of value,
// default as typed, help); parsing, validation and --help come from the declarations, and
// defaults go through the same parser as given values.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ferry/device.hpp"
#include "ferry/status.hpp"

namespace ferry::cli {

enum class OptionKind : std::uint8_t {
  flag,      // no value
  count,     // a decimal integer in [min, max]
  size,      // bytes, 65536 or 64K / 1M / 1G (binary), in [min, max], a multiple of `multiple`
  sizes,     // comma-separated sizes
  shapes,    // comma-separated image batch shapes NxHxWxC, channels 1 to 4
  dims,      // one shape of any rank, DxDx...
  millis,    // a decimal number of milliseconds >= 0
  choice,    // one of `choices`
  choices,   // a comma-separated subset of `choices`
  text,      // any non-empty text (a path)
  op_sizes,  // comma-separated sizes or NxHxWxC shapes
};

struct OptionSpec {
  std::string_view name = {};  // "--sizes"
  OptionKind kind = OptionKind::flag;
  std::string_view metavar = {};  // "LIST" in the help; empty for flags
  std::string_view help = {};
  std::string_view fallback = {};  // the default, as typed; empty: none (the command decides)
  std::string_view quick = {};     // the default under --quick, when it differs
  std::uint64_t min = 0;           // count and size
  std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t multiple = 1;      // size
  std::string_view choices = {};   // choice and choices: "auto,cpu,vulkan,cuda"
  std::string_view excludes = {};  // an option that may not be given with this one
};

// The device a command runs on (every bench, `ferry search`).
inline constexpr OptionSpec kBackendOption = {
    .name = "--backend", .kind = OptionKind::choice, .metavar = "NAME",
    .help = "auto (a GPU: cuda, then vulkan; else the CPU backend), cpu, vulkan or cuda",
    .fallback = "auto", .choices = "auto,cpu,vulkan,cuda"};
inline constexpr OptionSpec kDeviceOption = {
    .name = "--device", .kind = OptionKind::count, .metavar = "N",
    .help = "device index within the backend", .fallback = "0", .max = 1024};

// --backend, --device, --quick, --json, --json-file, --trace.
extern const std::span<const OptionSpec> kBenchOptions;

// An image batch shape NxHxWxC (batch, height, width, channels), e.g. 64x224x224x3.
using BatchShape = std::array<std::uint32_t, 4>;
std::string to_string(const BatchShape& shape);
// A matrix ROWSxCOLS, e.g. 1000000x256 (binary_quantize's rows and dims).
using MatrixShape = std::array<std::uint32_t, 2>;
std::string to_string(const MatrixShape& shape);
// An op's input size: bytes, an image batch shape (bytes: its uint8 size), or a matrix (bytes: its
// element count). Each op says which it takes.
struct OpSize {
  std::uint64_t bytes = 0;
  std::optional<BatchShape> shape;
  std::optional<MatrixShape> matrix;
};
Result<std::vector<OpSize>> parse_op_sizes(std::string_view text);
std::vector<std::string> split_list(std::string_view text);  // at commas

using OptionTables = std::vector<std::span<const OptionSpec>>;

// The parsed command line of one command. Getters take an option's name and return the given
// value, else its --quick default (under --quick), else its default; zero or empty when none.
class Options {
 public:
  // An error is a usage error, its message for the user.
  static Result<Options> parse(std::string_view command, const std::vector<std::string_view>& args,
                               const OptionTables& tables);

  bool help() const { return help_; }
  bool given(std::string_view name) const { return given_.contains(name); }
  bool flag(std::string_view name) const { return given(name); }
  std::uint64_t number(std::string_view name) const { return get<std::uint64_t>(name); }
  double millis(std::string_view name) const { return get<double>(name); }
  std::string text(std::string_view name) const;  // as typed (or the default)
  std::vector<std::string> list(std::string_view name) const { return split_list(text(name)); }
  auto sizes(std::string_view name) const { return get<std::vector<std::uint64_t>>(name); }
  auto shapes(std::string_view name) const { return get<std::vector<BatchShape>>(name); }
  auto dims(std::string_view name) const { return get<std::vector<std::uint32_t>>(name); }
  auto op_sizes(std::string_view name) const { return get<std::vector<OpSize>>(name); }
  // Arguments that are not options (`ferry bench op NAME`).
  const std::vector<std::string>& operands() const { return operands_; }

  using Value = std::variant<std::monostate, std::uint64_t, double, std::string,
                             std::vector<std::uint64_t>, std::vector<BatchShape>,
                             std::vector<std::uint32_t>, std::vector<OpSize>>;

 private:
  template <typename T>
  T get(std::string_view name) const {
    const auto found = values_.find(name);
    const T* value = found == values_.end() ? nullptr : std::get_if<T>(&found->second);
    return value != nullptr ? *value : T{};
  }

  std::set<std::string, std::less<>> given_;
  std::map<std::string, std::string, std::less<>> texts_;  // given or default, as typed
  std::map<std::string, Value, std::less<>> values_;
  std::vector<std::string> operands_;
  bool help_ = false;
};

// The "Options:" part of a command's --help.
std::string options_help(const OptionTables& tables);

// Exit statuses: 0 success, 1 a library error or wrong data, 2 bad command-line usage.
inline constexpr int kExitOk = 0, kExitFailure = 1, kExitUsage = 2;
// A bench stopped by Ctrl-C (128 + SIGINT, as a shell reports it) after printing what it had.
inline constexpr int kExitInterrupted = 130;

// Why `path` cannot be written (the system's reason, or "is a directory"), or empty when it can:
// checked before a command's work so that a bad output path is found at once. A file made only
// for this check is removed again; a device or FIFO is not probed (opening a FIFO waits for its
// reader).
std::string unwritable(const std::string& path);
// "ferry: <message>" and a pointer to --help on stderr; returns kExitUsage.
int usage_error(std::string_view message);
// The library error on stderr; returns kExitFailure.
int library_error(const Status& status, std::string_view context = {});
// Validation and driver messages go to stderr, one per line.
DeviceOptions device_options();

// One command of the program: its help and options, and what runs it.
struct Command {
  std::string_view name = {};                // "bench transfer"
  std::string_view summary = {};             // its paragraph in `ferry --help`
  std::string_view about = {};               // its own --help, before the options
  std::span<const OptionSpec> options = {};  // its own; a bench also takes kBenchOptions
  bool bench = true;
  std::string_view operand = {};            // "NAME": one argument that is not an option
  std::string (*operand_help)() = nullptr;  // more help about it
  int (*run)(const Options& options, const std::string& command_line) = nullptr;  // as typed
};

extern const Command kInfoCommand, kSearchCommand, kBenchTransfer, kBenchIngress, kBenchEgress,
    kBenchOp, kBenchSearch, kIbpEncodeCommand, kIbpDecodeCommand, kIbpInspectCommand,
    kBenchIbp, kBenchMulti;

}  // namespace ferry::cli
