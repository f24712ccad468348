// `ferry bench egress`: device results to host work, step after step, the naive way (compute,
// wait, synchronous download into pageable memory, host work), with a pinned buffer but still
// sequential, and through ferry's EgressPipeline, in one run, against the bound that each
// component alone sets; then ingress and egress together against each direction alone.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_report.hpp"
#include "cli_args.hpp"
#include "commands.hpp"
#include "egress_modes.hpp"
#include "egress_report.hpp"
#include "ferry/ferry.hpp"
#include "format.hpp"

namespace ferry::cli {

const char* const kBenchEgressHelp =
    "Usage: ferry bench egress [options]\n"
    "\n"
    "Each step a synthetic compute (fills of the output buffer on the compute queue, as many as\n"
    "take --compute-ms) writes a float32 output, which goes to a host consumer that checks it\n"
    "and then busy-waits until its share of --host-ms has passed. Per setting, and in one run:\n"
    "  components alone        the compute, the download through the readback pool, and the\n"
    "                          host work, each back to back: bound = max of the three per step\n"
    "  naive                   compute, wait, ferry::download into pageable memory, host work\n"
    "  naive-cudaMemcpy        (CUDA devices) the same with the CUDA runtime alone: memsets as\n"
    "                          the compute, a synchronous cudaMemcpy into pageable memory\n"
    "  pooled-sequential       compute, wait, one copy into a pinned lease, wait, host work\n"
    "  ferry-egress            EgressPipeline (as_completed workers) and a ring of 3 outputs:\n"
    "                          compute i+1, download i and host work on i-1 overlap\n"
    "and reports ms per step, the speed-ups, and bound / ms per step of ferry-egress (target\n"
    ">= 95%). Settings (compute ms, host CPU ms per step):\n"
    "  copy       2 ms, 2 ms: the download is the bound\n"
    "  compute    12 ms, 2 ms: the compute is the bound\n"
    "  host       2 ms, 12 ms x workers: the host work, spread over the workers, is the bound\n"
    "Then ingress and egress together: IngressPipeline batches of 64x224x224x3 uint8 feed a\n"
    "fill of a 64x21x56x56 float32 output that goes to an EgressPipeline, against each\n"
    "direction alone (target: both at once as fast as the slower one alone).\n"
    "Warm-up steps of every mode are checked in full, timed steps as --check says; wrong bytes\n"
    "exit 1.\n"
    "\n"
    "Options:\n"
    "  --backend NAME         auto (default: cuda, then vulkan, then cpu), cpu, vulkan or cuda\n"
    "  --device N             device index within the backend (default 0)\n"
    "  --output-shape DIMS    float32 output per step, e.g. 16x21x512x512 (the default, 336 MiB)\n"
    "  --mib M                or an output of M MiB\n"
    "  --settings LIST        comma-separated: copy, compute, host (default all three)\n"
    "  --compute-ms X         compute time per step for every setting chosen\n"
    "  --compute-fills R      or R fills per step (no calibration)\n"
    "  --host-ms X            host CPU time per step (summed over chunks) for every setting\n"
    "  --workers N            consumer threads, also used by the other modes (default 4)\n"
    "  --chunk SIZE           download and consumer unit (default 16M, a multiple of 256)\n"
    "  --steps N              timed steps per mode (default 40)\n"
    "  --check MODE           sampled (default: a word every 4 KiB) or full (every word, a\n"
    "                         pass over the output that adds to the host work) for timed steps\n"
    "  --no-duplex            skip ingress and egress together\n"
    "  --quick                a 2 MiB output, few steps, short times: a smoke run\n"
    "  --json                 JSON on stdout instead of the table\n"
    "  --json-file PATH       also write the JSON to PATH\n";

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
const std::vector<std::uint32_t> kDefaultShape = {16, 21, 512, 512};
const std::vector<std::string> kAllSettings = {"copy", "compute", "host"};

// A non-negative decimal number of milliseconds, e.g. "2", "0.5".
Parsed<double> parse_ms(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value) ||
      value < 0 || value > 3'600'000) {
    return Parsed<double>::fail("expected milliseconds (a number >= 0), got '" +
                                std::string(text) + "'");
  }
  return {value, {}};
}

// Dimensions DxDx..., each > 0, e.g. 16x21x512x512.
Parsed<std::vector<std::uint32_t>> parse_dims(std::string_view text) {
  using Fail = Parsed<std::vector<std::uint32_t>>;
  std::vector<std::uint32_t> dims;
  while (true) {
    const std::size_t x = text.find('x');
    Parsed<std::uint64_t> dim = parse_count(text.substr(0, x), 1u << 30);
    if (!dim.ok()) return Fail::fail("bad shape: " + dim.error);
    if (*dim.value == 0) return Fail::fail("bad shape: a dimension is 0");
    dims.push_back(static_cast<std::uint32_t>(*dim.value));
    if (x == std::string_view::npos) break;
    text.remove_prefix(x + 1);
  }
  return {std::move(dims), {}};
}

Parsed<std::vector<std::string>> parse_settings(std::string_view text) {
  using Fail = Parsed<std::vector<std::string>>;
  std::vector<std::string> names;
  while (true) {
    const std::size_t comma = text.find(',');
    std::string name(text.substr(0, comma));
    if (name.ends_with("-bound")) name.resize(name.size() - 6);
    if (std::find(kAllSettings.begin(), kAllSettings.end(), name) == kAllSettings.end()) {
      return Fail::fail("unknown setting '" + name + "' (copy, compute or host)");
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return {std::move(names), {}};
}

// ---- arguments ---------------------------------------------------------------------------

Parsed<EgressBenchOptions> parse_options(const std::vector<std::string_view>& args, bool& help) {
  using Fail = Parsed<EgressBenchOptions>;
  EgressBenchOptions options;
  ArgReader reader(args);
  while (!reader.done()) {
    const std::string_view name = reader.peek_name();
    if (name == "--help" || name == "-h") {
      help = true;
      return {options, {}};
    }
    std::string common_error;
    if (take_common_bench_option(reader, options, common_error)) {
      if (!common_error.empty()) return Fail::fail(common_error);
      continue;
    }
    if (name == "--no-duplex") {
      if (std::string error = reader.take_flag(); !error.empty()) return Fail::fail(error);
      options.duplex = false;
      continue;
    }
    const bool known = name == "--output-shape" || name == "--mib" || name == "--settings" ||
                       name == "--compute-ms" || name == "--compute-fills" ||
                       name == "--host-ms" || name == "--workers" || name == "--chunk" ||
                       name == "--steps" || name == "--check";
    if (!known) return Fail::fail("bench egress: unknown argument '" + std::string(name) + "'");
    Parsed<std::string_view> value = reader.take_value();
    if (!value.ok()) return Fail::fail(value.error);
    const std::string_view text = *value.value;
    const std::string option(name);

    if (name == "--output-shape") {
      Parsed<std::vector<std::uint32_t>> dims = parse_dims(text);
      if (!dims.ok()) return Fail::fail(option + ": " + dims.error);
      options.output_shape = *dims.value;
      options.output_mib.reset();
    } else if (name == "--mib") {
      Parsed<std::uint64_t> mib = parse_count(text, 1u << 20);
      if (!mib.ok()) return Fail::fail(option + ": " + mib.error);
      if (*mib.value == 0) return Fail::fail(option + ": must be at least 1");
      options.output_mib = *mib.value;
      options.output_shape.reset();
    } else if (name == "--settings") {
      Parsed<std::vector<std::string>> settings = parse_settings(text);
      if (!settings.ok()) return Fail::fail(option + ": " + settings.error);
      options.settings = *settings.value;
    } else if (name == "--compute-ms" || name == "--host-ms") {
      Parsed<double> ms = parse_ms(text);
      if (!ms.ok()) return Fail::fail(option + ": " + ms.error);
      (name == "--compute-ms" ? options.compute_ms : options.host_ms) = *ms.value;
    } else if (name == "--compute-fills") {
      Parsed<std::uint64_t> fills = parse_count(text, 1'000'000);
      if (!fills.ok()) return Fail::fail(option + ": " + fills.error);
      if (*fills.value == 0) return Fail::fail(option + ": must be at least 1");
      options.compute_fills = static_cast<std::uint32_t>(*fills.value);
    } else if (name == "--workers") {
      Parsed<std::uint64_t> workers = parse_count(text, 256);
      if (!workers.ok()) return Fail::fail(option + ": " + workers.error);
      if (*workers.value == 0) return Fail::fail(option + ": must be at least 1");
      options.workers = static_cast<std::uint32_t>(*workers.value);
    } else if (name == "--chunk") {
      Parsed<std::uint64_t> size = parse_size(text);
      if (!size.ok()) return Fail::fail(option + ": " + size.error);
      if (*size.value % kStagingAlignment != 0) {
        return Fail::fail(option + ": must be a multiple of " + std::to_string(kStagingAlignment));
      }
      options.chunk_bytes = *size.value;
    } else if (name == "--steps") {
      Parsed<std::uint64_t> steps = parse_count(text, 1'000'000);
      if (!steps.ok()) return Fail::fail(option + ": " + steps.error);
      if (*steps.value == 0) return Fail::fail(option + ": must be at least 1");
      options.steps = static_cast<std::uint32_t>(*steps.value);
    } else if (name == "--check") {
      if (text != "sampled" && text != "full") {
        return Fail::fail(option + ": expected sampled or full, got '" + std::string(text) + "'");
      }
      options.check = text == "full" ? EgressCheck::full : EgressCheck::sampled;
    }
  }
  return {options, {}};
}

// ---- settings ----------------------------------------------------------------------------

// The run-wide settings and the output's label; an error text when the output is unusable.
std::string apply_settings(EgressReport& report) {
  const EgressBenchOptions& options = report.options;
  EgressRunSettings& run = report.run;
  const bool quick = options.quick;
  if (options.output_mib) {
    run.output_bytes = *options.output_mib * kMiB;
    report.output_label = std::to_string(*options.output_mib) + " MiB";
  } else {
    const std::vector<std::uint32_t>& dims =
        options.output_shape ? *options.output_shape
                             : (quick ? std::vector<std::uint32_t>{1, 2, 512, 512} : kDefaultShape);
    std::uint64_t elements = 1;
    report.output_label.clear();
    for (std::uint32_t dim : dims) {
      if (elements > (1ull << 40) / dim) return "--output-shape: the output is too large";
      elements *= dim;
      report.output_label += (report.output_label.empty() ? "" : "x") + std::to_string(dim);
    }
    report.output_label += " float32";
    run.output_bytes = elements * 4;
  }
  run.workers = options.workers;
  run.chunk_bytes = options.chunk_bytes.value_or(quick ? 256 * 1024 : 16 * kMiB);
  run.pool_slab_bytes = std::max(quick ? kMiB : 64 * kMiB, run.chunk_bytes);
  // 512 MiB of pinned memory (quick: 4 MiB), and room for two chunks at least.
  run.pool_slabs = static_cast<std::uint32_t>(
      std::max<std::uint64_t>(2, (quick ? 4 * kMiB : 512 * kMiB) / run.pool_slab_bytes));
  run.warmup_steps = quick ? 2 : run.ring + 1;
  run.steps = options.steps.value_or(quick ? 4 : 40);
  run.check = options.check;
  run.calibration_time = std::chrono::milliseconds(quick ? 20 : 200);

  // The settings: compute and host times of the issue (a tenth of them with --quick).
  const double scale = quick ? 0.1 : 1.0;
  const std::vector<std::string>& names = options.settings ? *options.settings : kAllSettings;
  for (const std::string& name : names) {
    EgressCaseResults c;
    c.setting.name = name + "-bound";
    c.setting.compute_ms = (name == "compute" ? 12.0 : 2.0) * scale;
    c.setting.host_ms = (name == "host" ? 12.0 * run.workers : 2.0) * scale;
    if (options.compute_ms) c.setting.compute_ms = *options.compute_ms;
    if (options.host_ms) c.setting.host_ms = *options.host_ms;
    c.setting.fills = options.compute_fills;
    report.cases.push_back(std::move(c));
  }
  report.duplex.warmup_steps = quick ? 2 : 8;
  report.duplex.steps = quick ? 6 : 400;
  if (quick) {
    report.duplex.input = {2, 16, 24, 3};
    report.duplex.output = {2, 21, 8, 8};
  }
  return {};
}

// An error text when the buffers would not fit in device or host memory.
std::string check_memory(const EgressReport& report) {
  const EgressRunSettings& run = report.run;
  const DeviceInfo& device = report.device;
  const std::uint64_t device_need = run.ring * run.output_bytes;
  const std::uint64_t host_need = 2 * run.output_bytes +
                                  std::uint64_t{run.pool_slabs} * run.pool_slab_bytes +
                                  (device.is_cpu ? device_need : 0);
  const std::uint64_t host_available = available_host_memory();
  if (device.device_memory_bytes != 0 && device_need > device.device_memory_bytes / 10 * 9) {
    return "the outputs need " + format_bytes(device_need) + " of device memory, " +
           format_bytes(device.device_memory_bytes) + " exist";
  }
  if (host_available != 0 && host_need > host_available / 10 * 8) {
    return "the benchmark needs about " + format_bytes(host_need) + " of host memory, " +
           format_bytes(host_available) + " available";
  }
  return {};
}

// ---- measuring ---------------------------------------------------------------------------

Status measure(const Device& device, EgressReport& report, bool progress) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<EgressBench> bench,
                         EgressBench::create(device, report.run));
  if (progress) std::cerr << "ferry: calibrating the fill\n";
  FERRY_ASSIGN_OR_RETURN(report.fill_seconds, bench->calibrate_fill());
  for (EgressCaseResults& c : report.cases) {
    const std::uint32_t fills =
        c.setting.fills.value_or(static_cast<std::uint32_t>(std::clamp(
            std::lround(c.setting.compute_ms / 1e3 / report.fill_seconds), 1L, 1'000'000L)));
    if (progress) std::cerr << "ferry: measuring " << c.setting.name << " components\n";
    Result<EgressComponents> components = bench->measure_components(c.setting, fills);
    if (!components.ok()) return components.status().with_context(c.setting.name);
    c.components = *components;
    for (EgressMode mode : kEgressModes) {
      if (progress) {
        std::cerr << "ferry: measuring " << c.setting.name << " " << to_string(mode) << "\n";
      }
      Result<EgressModeResult> result =
          bench->run_mode(mode, c.setting, c.components, report.options.device_index);
      if (!result.ok()) return result.status().with_context(c.setting.name);
      c.modes.push_back(*result);
    }
  }
  if (report.options.duplex) {
    for (DuplexMode mode : kDuplexModes) {
      if (progress) std::cerr << "ferry: measuring ingress+egress, " << to_string(mode) << "\n";
      FERRY_ASSIGN_OR_RETURN(DuplexResult result, bench->run_duplex(mode, report.duplex));
      report.duplex_results.push_back(result);
    }
  }
  report.pool = bench->pool_stats();
  bench.reset();
  return device.wait_idle();
}

}  // namespace

int run_bench_egress(const std::vector<std::string_view>& args) {
  bool help = false;
  Parsed<EgressBenchOptions> parsed = parse_options(args, help);
  if (!parsed.ok()) return usage_error(parsed.error);
  if (help) {
    std::cout << kBenchEgressHelp;
    return kExitOk;
  }
  EgressReport report;
  report.command = command_line("ferry bench egress", args);
  report.options = *parsed.value;
  const EgressBenchOptions& options = report.options;
  if (std::string error = apply_settings(report); !error.empty()) return usage_error(error);

  std::optional<Device> opened = open_bench_device(options);
  if (!opened) return kExitFailure;
  Device device = std::move(*opened);
  report.device = device.info();
  report.date = utc_timestamp();
  if (std::string error = check_memory(report); !error.empty()) {
    std::cerr << "ferry: error: " << report.output_label << " on " << device_label(report.device)
              << ": " << error << "\n";
    return kExitFailure;
  }

  const bool progress = !options.json && isatty(STDERR_FILENO) != 0;
  if (Status status = measure(device, report, progress); !status.ok()) {
    return library_error(status, "bench egress");
  }
  report.validation_messages = device.validation_message_count();
  if (Status status = device.close(std::chrono::seconds(60)); !status.ok()) {
    return library_error(status, "closing the device");
  }

  return emit_bench_report(
      options.json, options.json_file, report.validation_messages,
      [&](std::ostream& out) { print_egress_table(report, out); },
      [&](std::ostream& out) { print_egress_json(report, out); });
}

}  // namespace ferry::cli
