#include "cli_args.hpp"

#include <cctype>
#include <limits>

namespace ferry::cli {

std::string_view ArgReader::peek_name() const {
  std::string_view arg = args_[pos_];
  if (arg.starts_with("--")) {
    if (std::size_t eq = arg.find('='); eq != std::string_view::npos) return arg.substr(0, eq);
  }
  return arg;
}

std::string ArgReader::take_flag() {
  std::string_view arg = args_[pos_++];
  if (arg.find('=') != std::string_view::npos) {
    return "option '" + std::string(arg.substr(0, arg.find('='))) + "' takes no value";
  }
  return {};
}

Parsed<std::string_view> ArgReader::take_value() {
  std::string_view arg = args_[pos_++];
  if (std::size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
    return {arg.substr(eq + 1), {}};
  }
  if (pos_ >= args_.size()) {
    return Parsed<std::string_view>::fail("option '" + std::string(arg) + "' needs a value");
  }
  return {args_[pos_++], {}};
}

Parsed<std::uint64_t> parse_count(std::string_view text, std::uint64_t max_value) {
  if (text.empty()) return Parsed<std::uint64_t>::fail("expected a number, got ''");
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return Parsed<std::uint64_t>::fail("expected a number, got '" + std::string(text) + "'");
    }
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (max_value - digit) / 10) {
      return Parsed<std::uint64_t>::fail("number too large: '" + std::string(text) +
                                         "' (at most " + std::to_string(max_value) + ")");
    }
    value = value * 10 + digit;
  }
  return {value, {}};
}

Parsed<std::uint64_t> parse_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string suffix;
  for (char c : text.substr(digits)) suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else {
    return Parsed<std::uint64_t>::fail("bad size '" + std::string(text) +
                                       "' (use a number with an optional K, M or G suffix)");
  }
  if (digits == 0) {
    return Parsed<std::uint64_t>::fail("bad size '" + std::string(text) + "' (no number)");
  }
  Parsed<std::uint64_t> number =
      parse_count(text.substr(0, digits), std::numeric_limits<std::uint64_t>::max() >> shift);
  if (!number.ok()) return Parsed<std::uint64_t>::fail("bad size '" + std::string(text) + "': " + number.error);
  if (*number.value == 0) return Parsed<std::uint64_t>::fail("size must be > 0: '" + std::string(text) + "'");
  return {*number.value << shift, {}};
}

Parsed<std::vector<std::uint64_t>> parse_size_list(std::string_view text) {
  std::vector<std::uint64_t> sizes;
  while (true) {
    const std::size_t comma = text.find(',');
    Parsed<std::uint64_t> size = parse_size(text.substr(0, comma));
    if (!size.ok()) return Parsed<std::vector<std::uint64_t>>::fail(size.error);
    sizes.push_back(*size.value);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return {std::move(sizes), {}};
}

Parsed<std::string> parse_backend(std::string_view text) {
  if (text != "auto" && text != "cpu" && text != "vulkan" && text != "cuda") {
    return Parsed<std::string>::fail("unknown backend '" + std::string(text) +
                                     "' (auto, cpu, vulkan or cuda)");
  }
  return {std::string(text), {}};
}

Parsed<std::vector<BatchShape>> parse_shape_list(std::string_view text) {
  using Fail = Parsed<std::vector<BatchShape>>;
  std::vector<BatchShape> shapes;
  while (true) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    std::string quoted = "'";  // appended piecewise: GCC 12 -O3 warns about "'" + string
    quoted.append(item).append("'");
    BatchShape shape{};
    for (std::size_t dim = 0; dim < shape.size(); ++dim) {
      const std::size_t x = item.find('x');
      if ((x == std::string_view::npos) != (dim + 1 == shape.size())) {
        return Fail::fail("bad shape " + quoted + " (use NxHxWxC, e.g. 64x224x224x3)");
      }
      Parsed<std::uint64_t> value = parse_count(item.substr(0, x), 1u << 20);
      if (!value.ok()) return Fail::fail("bad shape " + quoted + ": " + value.error);
      if (*value.value == 0) return Fail::fail("bad shape " + quoted + ": a dimension is 0");
      shape[dim] = static_cast<std::uint32_t>(*value.value);
      if (x != std::string_view::npos) item.remove_prefix(x + 1);
    }
    if (shape[3] > 4) return Fail::fail("bad shape " + quoted + ": channels must be 1 to 4");
    shapes.push_back(shape);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return {std::move(shapes), {}};
}

std::string to_string(const BatchShape& shape) {
  return std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" +
         std::to_string(shape[2]) + "x" + std::to_string(shape[3]);
}

bool take_common_bench_option(ArgReader& reader, CommonBenchOptions& options, std::string& error) {
  const std::string_view name = reader.peek_name();
  if (name == "--json" || name == "--quick") {
    error = reader.take_flag();
    (name == "--json" ? options.json : options.quick) = true;
    return true;
  }
  if (name != "--backend" && name != "--device" && name != "--json-file") return false;
  const std::string option(name);
  Parsed<std::string_view> value = reader.take_value();
  if (!value.ok()) {
    error = value.error;
    return true;
  }
  if (name == "--backend") {
    Parsed<std::string> backend = parse_backend(*value.value);
    if (!backend.ok()) {
      error = option + ": " + backend.error;
    } else {
      options.backend = *backend.value;
    }
  } else if (name == "--device") {
    Parsed<std::uint64_t> index = parse_count(*value.value, 1024);
    if (!index.ok()) {
      error = option + ": " + index.error;
    } else {
      options.device_index = static_cast<int>(*index.value);
    }
  } else if (value.value->empty()) {
    error = option + ": needs a path";
  } else {
    options.json_file = std::string(*value.value);
  }
  return true;
}

}  // namespace ferry::cli
