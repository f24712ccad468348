// `ferry bench ingress`: feeding normalized image batches to the device, the old way (convert to
// float32 on the host, upload four times the bytes) against ferry's IngressPipeline (upload
// uint8, normalize on the device), and the normalize op alone against a device-to-device copy,
// in one run so that the ratios between them are measured like for like.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "bench_report.hpp"
#include "cli_args.hpp"
#include "commands.hpp"
#include "ferry/ferry.hpp"
#include "format.hpp"
#include "ingress_modes.hpp"
#include "ingress_report.hpp"

namespace ferry::cli {

const char* const kBenchIngressHelp =
    "Usage: ferry bench ingress [options]\n"
    "\n"
    "Streams uint8 NHWC image batches to float32 NCHW tensors on one device (ImageNet mean/std),\n"
    "per batch shape, and reports batches/s, ms per batch and host-to-device GB/s of:\n"
    "  cpu-convert             host threads (all of them) convert each batch to float32 into a\n"
    "                          pinned staging lease while the previous one uploads (the old way)\n"
    "  upload-f32              already-normalized float32 uploaded from pinned buffers, back to\n"
    "                          back on the upload queue: the transfer-only bound of the old way\n"
    "  ferry-ingress           IngressPipeline from pinned uint8 batches (HostBatch::pinned):\n"
    "                          upload on the upload queue, normalize on the compute queue\n"
    "  ferry-ingress-pageable  the same from ordinary memory (HostBatch::pageable)\n"
    "Each stream runs warm-up batches (the first is checked against an exact host reference;\n"
    "exit 1 on a mismatch), then is timed in steady state from the drained device to the last\n"
    "batch's completion. Then the normalize op alone (float32 and float16 outputs, device\n"
    "buffer to device buffer, several commands per CommandList) against the device's\n"
    "device-to-device copy bandwidth (ferry's CommandList::copy, and cudaMemcpyAsync on CUDA\n"
    "devices).\n"
    "\n"
    "Options:\n"
    "  --backend NAME         auto (default: cuda, then vulkan, then cpu), cpu, vulkan or cuda\n"
    "  --device N             device index within the backend (default 0)\n"
    "  --shapes LIST          comma-separated NxHxWxC batch shapes (default\n"
    "                         64x224x224x3,8x1080x1920x3). Shapes that do not fit in device or\n"
    "                         host memory are skipped and listed.\n"
    "  --min-time-ms N        time measured per stream and per kernel, after the warm-up\n"
    "                         (default 500)\n"
    "  --depth N              batches in flight: IngressOptions::depth, and the bound of the\n"
    "                         other streams (default 3, 2 to 16)\n"
    "  --kernel-commands N    commands per CommandList of the kernel and copy timings\n"
    "                         (default 20)\n"
    "  --copy-size SIZE       size of the device-to-device copy (default 256M)\n"
    "  --quick                few batches and commands, 50 ms per measurement, 32M copies (unless\n"
    "                         given): a smoke run\n"
    "  --json                 JSON on stdout instead of the table\n"
    "  --json-file PATH       also write the JSON to PATH\n";

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
const std::vector<BatchShape> kDefaultShapes = {{64, 224, 224, 3}, {8, 1080, 1920, 3}};

// ---- arguments ---------------------------------------------------------------------------

Parsed<IngressBenchOptions> parse_options(const std::vector<std::string_view>& args, bool& help) {
  using Fail = Parsed<IngressBenchOptions>;
  IngressBenchOptions options;
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
    const bool known = name == "--shapes" || name == "--min-time-ms" || name == "--depth" ||
                       name == "--kernel-commands" || name == "--copy-size";
    if (!known) return Fail::fail("bench ingress: unknown argument '" + std::string(name) + "'");
    Parsed<std::string_view> value = reader.take_value();
    if (!value.ok()) return Fail::fail(value.error);
    const std::string_view text = *value.value;
    const std::string option(name);

    if (name == "--shapes") {
      Parsed<std::vector<BatchShape>> shapes = parse_shape_list(text);
      if (!shapes.ok()) return Fail::fail(option + ": " + shapes.error);
      options.shapes = *shapes.value;
    } else if (name == "--min-time-ms") {
      Parsed<std::uint64_t> ms = parse_count(text, 3'600'000);
      if (!ms.ok()) return Fail::fail(option + ": " + ms.error);
      options.min_time_ms = *ms.value;
    } else if (name == "--depth") {
      Parsed<std::uint64_t> depth = parse_count(text, 16);
      if (!depth.ok()) return Fail::fail(option + ": " + depth.error);
      if (*depth.value < 2) return Fail::fail(option + ": must be at least 2");
      options.depth = static_cast<std::uint32_t>(*depth.value);
    } else if (name == "--kernel-commands") {
      Parsed<std::uint64_t> count = parse_count(text, 1000);
      if (!count.ok()) return Fail::fail(option + ": " + count.error);
      if (*count.value == 0) return Fail::fail(option + ": must be at least 1");
      options.kernel_commands = static_cast<std::uint32_t>(*count.value);
    } else if (name == "--copy-size") {
      Parsed<std::uint64_t> size = parse_size(text);
      if (!size.ok()) return Fail::fail(option + ": " + size.error);
      options.copy_bytes = *size.value;
    }
  }
  return {options, {}};
}

// The measurement settings the options stand for.
void apply_settings(IngressReport& report) {
  const IngressBenchOptions& options = report.options;
  const std::chrono::milliseconds min_time(options.min_time_ms.value_or(options.quick ? 50 : 500));
  report.stream.depth = options.depth;
  report.stream.warmup_batches = options.quick ? 2 : std::max<std::uint32_t>(5, options.depth + 2);
  report.stream.min_batches = options.quick ? 3 : 20;
  report.stream.min_time = min_time;
  report.kernel.commands = options.kernel_commands.value_or(options.quick ? 4 : 20);
  report.kernel.min_time = min_time;
  report.kernel.destination_budget = (options.quick ? 256 : 1024) * kMiB;
  report.copy_bytes = options.copy_bytes.value_or((options.quick ? 32 : 256) * kMiB);
}

// ---- planning ----------------------------------------------------------------------------

void plan_shapes(IngressReport& report) {
  const std::vector<BatchShape>& wanted = report.options.shapes ? *report.options.shapes
                                                                : kDefaultShapes;
  const DeviceInfo& device = report.device;
  const std::uint64_t host_available = available_host_memory();
  const std::uint64_t depth = report.stream.depth;
  for (const BatchShape& shape : wanted) {
    Result<NormalizeShape> resolved =
        resolve_normalize(imagenet_normalize_params(shape, ElementType::float32));
    if (!resolved.ok()) {
      report.skipped.push_back({shape, resolved.status().message()});
      continue;
    }
    const std::uint64_t in = resolved->input_bytes;
    const std::uint64_t out = resolved->elements() * 4;
    // Device: the pipeline's tensors and inputs (the largest stream), or the kernel's buffers.
    const std::uint64_t device_need =
        std::max(depth * (in + out), std::max(report.kernel.destination_budget, in + out));
    // Host: the pageable and pinned sources, the reference and the readback tensor, and the
    // largest stream's own buffers (float32 sources, or the cpu-convert leases); plus the device
    // buffers when the "device" is the CPU.
    const std::uint64_t host_need = 2 * kSourceBatches * in + 2 * out +
                                    std::max<std::uint64_t>(kSourceBatches, depth) * out +
                                    (device.is_cpu ? device_need : 0);
    if (device.device_memory_bytes != 0 && device_need > device.device_memory_bytes / 10 * 9) {
      report.skipped.push_back({shape, "needs " + format_bytes(device_need) +
                                           " of device memory, " +
                                           format_bytes(device.device_memory_bytes) + " exist"});
    } else if (host_available != 0 && host_need > host_available / 10 * 8) {
      report.skipped.push_back({shape, "needs about " + format_bytes(host_need) +
                                           " of host memory, " + format_bytes(host_available) +
                                           " available"});
    } else {
      ShapeResults results;
      results.shape = shape;
      results.input_bytes = in;
      results.output_f32_bytes = out;
      report.shapes.push_back(std::move(results));
    }
  }
}

// ---- measuring ---------------------------------------------------------------------------

Status measure_shape(const Device& device, HostThreadPool& threads, const IngressReport& report,
                     std::uint64_t seed, bool progress, ShapeResults& results) {
  const std::string label = to_string(results.shape);
  if (progress) std::cerr << "ferry: preparing " << label << "\n";
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<IngressBench> bench,
                         IngressBench::create(device, results.shape, seed, threads));
  for (IngressMode mode : kIngressModes) {
    if (progress) std::cerr << "ferry: measuring " << label << " " << to_string(mode) << "\n";
    FERRY_ASSIGN_OR_RETURN(StreamResult stream, bench->run_stream(mode, report.stream));
    results.streams.push_back(stream);
  }
  for (ElementType type : {ElementType::float32, ElementType::float16}) {
    if (progress) {
      std::cerr << "ferry: measuring " << label << " normalize kernel " << to_string(type) << "\n";
    }
    FERRY_ASSIGN_OR_RETURN(KernelResult kernel, bench->run_normalize_kernel(type, report.kernel));
    results.kernels.emplace_back(type, kernel);
  }
  bench.reset();
  return device.wait_idle();  // the shape's buffers go before the next shape's are made
}

}  // namespace

int run_bench_ingress(const std::vector<std::string_view>& args) {
  bool help = false;
  Parsed<IngressBenchOptions> parsed = parse_options(args, help);
  if (!parsed.ok()) return usage_error(parsed.error);
  if (help) {
    std::cout << kBenchIngressHelp;
    return kExitOk;
  }
  IngressReport report;
  report.command = command_line("ferry bench ingress", args);
  report.options = *parsed.value;
  const IngressBenchOptions& options = report.options;
  apply_settings(report);

  std::optional<Device> opened = open_bench_device(options);
  if (!opened) return kExitFailure;
  Device device = std::move(*opened);
  report.device = device.info();
  report.date = utc_timestamp();
  plan_shapes(report);
  if (report.shapes.empty()) {
    std::cerr << "ferry: error: no shape to measure on " << device_label(report.device) << ":\n";
    for (const SkippedShape& skipped : report.skipped) {
      std::cerr << "  " << to_string(skipped.shape) << ": " << skipped.reason << "\n";
    }
    return kExitFailure;
  }

  HostThreadPool threads;
  report.host_threads = threads.size();
  const bool progress = !options.json && isatty(STDERR_FILENO) != 0;
  std::uint64_t seed = 0x5eed;
  for (ShapeResults& results : report.shapes) {
    if (Status status = measure_shape(device, threads, report, seed, progress, results);
        !status.ok()) {
      return library_error(status, "shape " + to_string(results.shape));
    }
    seed += kSourceBatches;
  }
  if (progress) std::cerr << "ferry: measuring device-to-device copies\n";
  Result<KernelResult> copy = measure_device_copy(device, report.copy_bytes, report.kernel);
  if (!copy.ok()) {
    return library_error(copy.status(),
                         "device-to-device copy of " + format_bytes(report.copy_bytes));
  }
  report.device_copy = *copy;
  if (report.device.backend == Backend::cuda) {
    report.cuda_copy = measure_cuda_memcpy_d2d(
        options.device_index, report.copy_bytes, report.kernel.commands,
        static_cast<double>(report.kernel.min_time.count()));
  } else {
    report.cuda_copy.reason = "not a CUDA device";
  }
  report.validation_messages = device.validation_message_count();
  if (Status status = device.close(std::chrono::seconds(60)); !status.ok()) {
    return library_error(status, "closing the device");
  }

  return emit_bench_report(
      options.json, options.json_file, report.validation_messages,
      [&](std::ostream& out) { print_ingress_table(report, out); },
      [&](std::ostream& out) { print_ingress_json(report, out); });
}

}  // namespace ferry::cli
