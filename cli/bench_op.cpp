// `ferry bench op NAME`: one op (ops/) on the chosen backend against a device-to-device copy of
// the same bytes, in one run, its output checked bit for bit against the CPU backend.
#include <algorithm>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "commands.hpp"
#include "op_timing.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kOptions[] = {
    {.name = "--sizes", .kind = OptionKind::op_sizes, .metavar = "LIST",
     .help = "comma-separated sizes (K/M/G suffixes) or NxHxWxC image batch shapes; what a size "
             "means, and the defaults, depend on the op (see above). Sizes that do not fit in "
             "device or host memory are skipped and listed"},
    {.name = "--min-time-ms", .kind = OptionKind::count, .metavar = "N",
     .help = "time measured per op and per copy, after a warm-up list", .fallback = "500",
     .quick = "50", .max = 3'600'000},
    {.name = "--commands", .kind = OptionKind::count, .metavar = "N",
     .help = "commands per CommandList", .fallback = "20", .quick = "4", .min = 1, .max = 1000},
};

// Every op, in the order the help lists them.
const OpCase* const kOps[] = {&kFillOp, &kNormalizeOp};

std::string ops_help() {
  std::string help = "Ops:\n";
  for (const OpCase* op : kOps) {
    std::string text = std::string(op->summary) + ". Sizes: " + std::string(op->default_sizes) +
                       " (--quick: " + std::string(op->quick_sizes) + ")";
    if (!op->variants.empty()) text += "; outputs: " + std::string(op->variants);
    help += wrap_text("  " + std::string(op->name), text, 14);
  }
  return help;
}

Status measure(Bench& bench, const OpCase& op) {
  const Options& options = bench.options;
  const bool quick = options.flag("--quick");
  const std::vector<OpSize> sizes = options.given("--sizes")
                                        ? options.op_sizes("--sizes")
                                        : parse_op_sizes(quick ? op.quick_sizes : op.default_sizes)
                                              .value.value_or(std::vector<OpSize>{});
  const ListSettings settings{.commands = static_cast<std::uint32_t>(bench.number("--commands")),
                              .min_time = std::chrono::milliseconds(bench.number("--min-time-ms")),
                              .buffer_budget = (quick ? 256 : 1024) * kMiB};
  bench.report.add_method(
      std::to_string(settings.commands) + " commands per CommandList on the compute queue, " +
          "buffers cycled within " + format_bytes(settings.buffer_budget) +
          "; median list time over >= " + options.text("--min-time-ms") +
          " ms after a warm-up list; the first list's output checked bit for bit against the CPU "
          "backend running the same op on the same random input; the copy: CommandList::copy of "
          "half the op's bytes moved (so that it reads and writes as many), timed the same way",
      {{"min_time_ms", bench.number("--min-time-ms")},
       {"commands", std::uint64_t{settings.commands}}});

  const bool cuda = bench.device.backend() == Backend::cuda;
  Section table{std::string(op.name) + " against a device-to-device copy of the same bytes",
                "results"};
  table.columns = {{"size", "size", Unit::text, false, true},
                   {"output", "variant", Unit::text, op.variants.empty()},
                   {"bytes moved", "bytes_per_command", Unit::bytes},
                   {"op us", "op_us_per_command", Unit::us},
                   {"op GB/s", "op_gbps", Unit::gbps},
                   {"copy us", "copy_us_per_command", Unit::us},
                   {"copy GB/s", "copy_gbps", Unit::gbps},
                   {"op/copy", "op_over_copy", Unit::ratio},
                   {"x cudaMemcpy D2D", "op_over_cuda_copy", Unit::ratio, !cuda},
                   {"op lists", "op_lists", Unit::count, true},
                   {"copy lists", "copy_lists", Unit::count, true}};
  table.notes = {
      "bytes moved: read + written per command; op/copy: the op's GB/s over the copy's, "
      "which is the copy's time over the op's. Every output matched the CPU backend's "
      "bit for bit."};
  bench.skipped = {"Skipped sizes", "skipped", {},
                   {{"size", "size"}, {"output", "variant"}, {"reason", "reason"}}};
  std::uint64_t seed = 0x5eed;
  for (const OpSize& size : sizes) {
    for (const std::string& variant : split_list(op.variants)) {
      Result<OpInstance> instance = op.instance(size, variant);
      if (!instance.ok()) {
        bench.skipped.add_row({size.shape ? to_string(*size.shape) : format_bytes(size.bytes),
                               variant, instance.status().message()});
        continue;
      }
      const std::uint64_t in = instance->input_bytes, out = instance->output_bytes;
      const std::uint64_t copy_bytes = std::max<std::uint64_t>(1, instance->bytes_moved / 2);
      // Device: the cycled buffers of the op or of the copy; host: the input, the reference's
      // buffers and both read-backs.
      if (!bench.fits({instance->label, variant},
                      std::max({settings.buffer_budget, in + out, 2 * copy_bytes}),
                      3 * in + 4 * out)) {
        continue;
      }
      const std::string what = std::string(op.name) + " " + instance->label + " " + variant;
      bench.progress("measuring " + what);
      Result<ListTiming> timing =
          measure_op(bench.device, bench.reference, *instance, settings, seed++);
      if (!timing.ok()) return timing.status().with_context(what);
      Result<CopyBaselines> copies =
          measure_copies(bench.device, bench.device_index(), copy_bytes, settings);
      if (!copies.ok()) return copies.status().with_context(what + ": the device-to-device copy");
      const ListTiming& copy = copies->ferry;
      const double ratio = timing->gbps() / copy.gbps();
      const double over_cuda = timing->gbps() / copies->cuda.gbps;
      table.add_row({instance->label, variant.empty() ? Value() : Value(variant),
                     timing->bytes_per_command, timing->us_per_command(), timing->gbps(),
                     copy.us_per_command(), copy.gbps(), ratio, over_cuda, timing->lists.reps,
                     copy.lists.reps});
      if (cuda && !copies->cuda.available)
        table.notes.push_back(what + ": no cudaMemcpy: " + copies->cuda.reason);
      bench.report.summary.emplace_back(
          std::string(op.name) + " " + instance->label + (variant.empty() ? "" : " " + variant),
          "op/copy " + ratio_text(ratio) +
              (cuda ? ", op/cudaMemcpy D2D " + ratio_text(over_cuda) : ""));
    }
  }
  const bool nothing = table.rows.empty();
  if (!nothing) bench.report.sections.push_back(std::move(table));
  return bench.end_skipped(nothing);
}

int run(const Options& options, const std::string& command_line) {
  for (const OpCase* op : kOps) {
    if (op->name != options.operands()[0]) continue;
    return run_bench(options, command_line, "ferry bench op " + std::string(op->name),
                     {QueueKind::compute}, true,
                     [op](Bench& bench) { return measure(bench, *op); });
  }
  std::string known;
  for (const OpCase* op : kOps) known += (known.empty() ? "" : ", ") + std::string(op->name);
  return usage_error("bench op: unknown op '" + options.operands()[0] + "' (known: " + known + ")");
}

}  // namespace

const Command kBenchOp = {
    .name = "bench op",
    .summary =
        "One op (fill, normalize) against a device-to-device copy of the same bytes, its "
        "output checked bit for bit against the CPU backend.",
    .about =
        "Times an op's commands on one device (lists of several commands on the compute\n"
        "queue, submitted and waited for, median per list) and, in the same run, a\n"
        "device-to-device copy that reads and writes as many bytes (CommandList::copy, and\n"
        "cudaMemcpyAsync on CUDA devices), per size and output type. Before timing, the op's\n"
        "output is compared bit for bit with the CPU backend running the same op on the same\n"
        "random input (exit 1 on a mismatch).\n",
    .options = kOptions,
    .operand = "NAME",
    .operand_help = ops_help,
    .run = run,
};

}  // namespace ferry::cli
