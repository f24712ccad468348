// Command-line argument reading: options as `--name value` or `--name=value`, sizes as 64K/1M/1G.
// Parse errors are returned as text (the caller prints them and exits with status 2).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::cli {

// Either a value or the message of a usage error.
template <typename T>
struct Parsed {
  std::optional<T> value;
  std::string error;  // set when value is empty

  static Parsed fail(std::string message) { return Parsed{std::nullopt, std::move(message)}; }
  bool ok() const { return value.has_value(); }
};

// Walks the arguments of one command. Options may be given as `--name value` or `--name=value`.
class ArgReader {
 public:
  explicit ArgReader(std::vector<std::string_view> args) : args_(std::move(args)) {}

  bool done() const { return pos_ >= args_.size(); }
  // The option name of the current argument ("--sizes" for "--sizes=1M"), or the bare argument.
  std::string_view peek_name() const;
  // Consumes a flag that takes no value. Error text when it was written as --flag=value.
  std::string take_flag();
  // Consumes an option and its value.
  Parsed<std::string_view> take_value();

 private:
  std::vector<std::string_view> args_;
  std::size_t pos_ = 0;
};

// The options every `ferry bench` command takes.
struct CommonBenchOptions {
  std::string backend = "auto";
  int device_index = 0;
  bool quick = false;
  bool json = false;
  std::string json_file;
};

// Takes the option at the reader's position when it is one of CommonBenchOptions' (--backend,
// --device, --quick, --json, --json-file) and returns true; otherwise takes nothing and returns
// false. A bad value sets `error`.
bool take_common_bench_option(ArgReader& reader, CommonBenchOptions& options, std::string& error);

// "65536", "64K", "64KiB", "1M", "1MiB", "1G", "1GB": binary multiples, case-insensitive.
Parsed<std::uint64_t> parse_size(std::string_view text);
// Comma-separated sizes, each > 0, e.g. "64K,1M,16M".
Parsed<std::vector<std::uint64_t>> parse_size_list(std::string_view text);
// A non-negative decimal integer no larger than max_value.
Parsed<std::uint64_t> parse_count(std::string_view text, std::uint64_t max_value);
// A --backend value: auto, cpu, vulkan or cuda.
Parsed<std::string> parse_backend(std::string_view text);

// An image batch shape NxHxWxC (batch, height, width, channels), e.g. 64x224x224x3.
using BatchShape = std::array<std::uint32_t, 4>;
// Comma-separated shapes, each dimension > 0 and channels 1 to 4, e.g.
// "64x224x224x3,8x1080x1920x3".
Parsed<std::vector<BatchShape>> parse_shape_list(std::string_view text);
// "64x224x224x3"
std::string to_string(const BatchShape& shape);

}  // namespace ferry::cli
