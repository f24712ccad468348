#include "options.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "report.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kBenchOptionList[] = {
    kBackendOption,
    kDeviceOption,
    {.name = "--quick", .help = "a short smoke run: the --quick defaults above"},
    {.name = "--json", .help = "JSON on stdout instead of the tables"},
    {.name = "--json-file", .kind = OptionKind::text, .metavar = "PATH",
     .help = "also write the JSON to PATH"},
    {.name = "--trace", .kind = OptionKind::text, .metavar = "PATH",
     .help = "write a trace of the benched device's work to PATH (Chrome trace-event JSON: "
             "ui.perfetto.dev opens it); as FERRY_TRACE=PATH"},
};

Status bad(std::string message) { return Status(ErrorCode::invalid_argument, std::move(message)); }

std::string quoted(std::string_view text) {
  std::string out = "'";  // appended piecewise: GCC 12 -O3 warns about "'" + string
  return out.append(text).append("'");
}

// A parsed value held in a variant (an Options::Value, say).
template <typename To, typename From>
Result<To> as(Result<From> parsed) {
  if (!parsed.ok()) return std::move(parsed).status();
  return To(std::move(parsed).value());
}

Result<std::uint64_t> parse_count(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range) return bad("number too large: " + quoted(text));
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    return bad("expected a number, got " + quoted(text));
  return value;
}

Result<std::uint64_t> parse_size(std::string_view text) {
  const std::size_t digits = std::min(text.find_first_not_of("0123456789"), text.size());
  std::string suffix(text.substr(digits));
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = suffix.empty() || suffix == "b" ? 0 : -1;
  for (const auto& [unit, bits] : {std::pair{"k", 10}, {"m", 20}, {"g", 30}}) {
    if (suffix == unit || suffix == std::string(unit) + "b" || suffix == std::string(unit) + "ib")
      shift = bits;
  }
  Result<std::uint64_t> number = parse_count(text.substr(0, digits));
  if (shift < 0 || !number.ok())
    return bad("bad size " + quoted(text) + " (a number with an optional K, M or G suffix)");
  if (*number == 0 || *number > (UINT64_MAX >> shift))
    return bad("size out of range: " + quoted(text));
  return *number << shift;
}

// Each comma-separated item through `one`; the first error wins.
template <typename T, typename One>
Result<std::vector<T>> parse_list(std::string_view text, One one) {
  std::vector<T> items;
  for (const std::string& item : split_list(text)) {
    FERRY_ASSIGN_OR_RETURN(items.emplace_back(), one(item));
  }
  return items;
}

// DxDx..., each dimension 1 to 2^30; `rank` of them (0: any number); with `image`, channels
// (a 4th dimension) 1 to 4.
Result<std::vector<std::uint32_t>> parse_dims(std::string_view text, std::size_t rank = 0,
                                              bool image = true) {
  std::vector<std::uint32_t> dims;
  for (std::string_view rest = text;;) {
    const std::size_t x = rest.find('x');
    Result<std::uint64_t> dim = parse_count(rest.substr(0, x));
    if (!dim.ok() || *dim == 0 || *dim > (1u << 30))
      return bad("bad shape " + quoted(text) + " (dimensions 1 to 2^30, e.g. 64x224x224x3)");
    dims.push_back(static_cast<std::uint32_t>(*dim));
    if (x == std::string_view::npos) break;
    rest.remove_prefix(x + 1);
  }
  if (rank != 0 && dims.size() != rank)
    return bad("bad shape " + quoted(text) + " (" + std::to_string(rank) + " dimensions, e.g. " +
               "64x224x224x3)");
  if (image && rank == 4 && dims[3] > 4)
    return bad("bad shape " + quoted(text) + " (NxHxWxC with 1 to 4 channels, e.g. 64x224x224x3)");
  return dims;
}

Result<BatchShape> parse_shape(std::string_view text) {
  FERRY_ASSIGN_OR_RETURN(const std::vector<std::uint32_t> d, parse_dims(text, 4));
  return BatchShape{d[0], d[1], d[2], d[3]};
}

Result<double> parse_millis(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !(value >= 0 && value <= 3.6e6))
    return bad("expected milliseconds (a number >= 0), got " + quoted(text));
  return value;
}

// `text` as the value of `spec`, or why it is not one.
Result<Options::Value> parse_value(const OptionSpec& spec, std::string_view text) {
  using Value = Options::Value;
  switch (spec.kind) {
    case OptionKind::count:
    case OptionKind::size: {
      const bool bytes = spec.kind == OptionKind::size;
      FERRY_ASSIGN_OR_RETURN(const std::uint64_t value,
                             bytes ? parse_size(text) : parse_count(text));
      auto show = [&](std::uint64_t v) { return bytes ? format_bytes(v) : std::to_string(v); };
      if (value < spec.min || value > spec.max)
        return bad("must be " + show(spec.min) + " to " + show(spec.max));
      if (value % spec.multiple != 0)
        return bad("must be a multiple of " + std::to_string(spec.multiple));
      return Value(value);
    }
    case OptionKind::choice:
    case OptionKind::choices: {
      const std::vector<std::string> known = split_list(spec.choices);
      for (const std::string& item : spec.kind == OptionKind::choice
                                         ? std::vector{std::string(text)}
                                         : split_list(text)) {
        if (std::find(known.begin(), known.end(), item) == known.end())
          return bad("unknown value " + quoted(item) + " (one of " + std::string(spec.choices) +
                     ")");
      }
      return Value(std::string(text));
    }
    case OptionKind::sizes:
      return as<Value>(parse_list<std::uint64_t>(text, parse_size));
    case OptionKind::shapes:
      return as<Value>(parse_list<BatchShape>(text, parse_shape));
    case OptionKind::dims:
      return as<Value>(parse_dims(text));
    case OptionKind::millis:
      return as<Value>(parse_millis(text));
    case OptionKind::op_sizes:
      return as<Value>(parse_op_sizes(text));
    case OptionKind::text:
      if (text.empty()) return bad("needs a value");
      return Value(std::string(text));
    case OptionKind::flag:
      break;
  }
  return Value();
}

}  // namespace

const std::span<const OptionSpec> kBenchOptions = kBenchOptionList;

std::string to_string(const MatrixShape& shape) {
  return std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
}

std::string to_string(const BatchShape& shape) {
  return std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" +
         std::to_string(shape[2]) + "x" + std::to_string(shape[3]);
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  for (;;) {
    const std::size_t comma = text.find(',');
    items.emplace_back(text.substr(0, comma));
    if (comma == std::string_view::npos) return items;
    text.remove_prefix(comma + 1);
  }
}

Result<std::vector<OpSize>> parse_op_sizes(std::string_view text) {
  return parse_list<OpSize>(text, [](std::string_view item) -> Result<OpSize> {
    if (item.find('x') == std::string_view::npos) {
      FERRY_ASSIGN_OR_RETURN(const std::uint64_t bytes, parse_size(item));
      return OpSize{bytes, std::nullopt, std::nullopt};
    }
    if (std::count(item.begin(), item.end(), 'x') == 1) {
      FERRY_ASSIGN_OR_RETURN(const std::vector<std::uint32_t> d, parse_dims(item));
      return OpSize{std::uint64_t{d[0]} * d[1], std::nullopt, MatrixShape{d[0], d[1]}};
    }
    // Four dimensions whose meaning is the op's (its instance checks them).
    FERRY_ASSIGN_OR_RETURN(const std::vector<std::uint32_t> d, parse_dims(item, 4, false));
    return OpSize{std::uint64_t{d[0]} * d[1] * d[2] * d[3], BatchShape{d[0], d[1], d[2], d[3]},
                  std::nullopt};
  });
}

Result<Options> Options::parse(std::string_view command, const std::vector<std::string_view>& args,
                               const OptionTables& tables) {
  Options options;
  std::map<std::string, const OptionSpec*, std::less<>> specs;
  for (std::span<const OptionSpec> table : tables) {
    for (const OptionSpec& spec : table) specs[std::string(spec.name)] = &spec;
  }
  const std::string prefix = std::string(command) + ": ";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      options.help_ = true;
      return options;
    }
    if (!arg.starts_with("--")) {
      options.operands_.emplace_back(arg);
      continue;
    }
    const std::size_t eq = arg.find('=');
    const std::string name(arg.substr(0, eq));
    const auto spec = specs.find(name);
    if (spec == specs.end()) return bad(prefix + "unknown option " + quoted(name));
    std::string_view value;
    if (spec->second->kind == OptionKind::flag) {
      if (eq != std::string_view::npos) return bad(prefix + quoted(name) + " takes no value");
    } else if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return bad(prefix + quoted(name) + " needs a value");
    }
    Result<Value> parsed = parse_value(*spec->second, value);
    if (!parsed.ok()) return std::move(parsed).status().with_context(prefix + name);
    options.given_.insert(name);
    options.texts_[name] = std::string(value);
    options.values_[name] = std::move(parsed).value();
  }
  for (const auto& [name, spec] : specs) {
    if (!spec->excludes.empty() && options.given(name) && options.given(spec->excludes))
      return bad(prefix + name + " and " + std::string(spec->excludes) + " exclude each other");
    // Defaults take the same path as given values; a bad one is this program's bug.
    for (std::string_view fallback : {spec->fallback, spec->quick}) {
      if (Result<Value> parsed = parse_value(*spec, fallback); !fallback.empty() && !parsed.ok())
        return bad("internal: bad default of " + name + ": " + parsed.status().message());
    }
    const bool quick = options.flag("--quick") && !spec->quick.empty();
    const std::string_view fallback = quick ? spec->quick : spec->fallback;
    if (options.given(name) || fallback.empty()) continue;
    options.texts_[name] = std::string(fallback);
    options.values_[name] = parse_value(*spec, fallback).value();
  }
  return options;
}

std::string Options::text(std::string_view name) const {
  const auto found = texts_.find(name);
  return found == texts_.end() ? std::string() : found->second;
}

std::string options_help(const OptionTables& tables) {
  std::string help;
  const char* heading = "Options:\n";
  for (std::span<const OptionSpec> table : tables) {
    help += heading;
    heading = "\nOptions of every bench:\n";
    for (const OptionSpec& spec : table) {
      std::string text(spec.help);
      if (!spec.fallback.empty()) text.append(" (default ").append(spec.fallback);
      if (!spec.quick.empty())
        text.append(spec.fallback.empty() ? " (" : "; ").append("--quick: ").append(spec.quick);
      if (!spec.fallback.empty() || !spec.quick.empty()) text += ")";
      if (!spec.excludes.empty()) text.append("; not with ").append(spec.excludes);
      std::string name = "  " + std::string(spec.name);
      if (!spec.metavar.empty()) name.append(" ").append(spec.metavar);
      help += wrap_text(name, text, 24);
    }
  }
  return help;
}

}  // namespace ferry::cli
