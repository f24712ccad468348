// `ferry bench op NAME`: one op (ops/) on the chosen backend against a device-to-device copy of
// the same bytes, in one run, its output checked bit for bit against the CPU backend.
#include <algorithm>
#include <string>
#include <vector>

#include "baselines/cuda_memcpy.hpp"
#include "bench_common.hpp"
#include "ops/op_case.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kOptions[] = {
    {.name = "--sizes", .kind = OptionKind::op_sizes, .metavar = "LIST",
     .help = "comma-separated sizes (K/M/G suffixes), NxHxWxC shapes or ROWSxCOLS matrices; "
             "meaning and defaults per op (above). Sizes that do not fit in memory are skipped "
             "and listed"},
    {.name = "--min-time-ms", .kind = OptionKind::count, .metavar = "N",
     .help = "time measured per op and per copy, after a warm-up list", .fallback = "500",
     .quick = "50", .max = 3'600'000},
    {.name = "--commands", .kind = OptionKind::count, .metavar = "N",
     .help = "commands per CommandList", .fallback = "20", .quick = "4", .min = 1, .max = 1000},
};

const OpCase* const kOps[] = {&kFillOp, &kNormalizeOp, &kBinaryQuantizeOp, &kHammingTopkOp,
                              &kRescoreOp, &kIbpDecodeOp, &kIbpEncodeOp};

struct OpBuffers {
  std::vector<Buffer> inputs, outputs;  // `sets` of each
};

// Outputs hold `clear` in every 32-bit word; inputs hold `input`, or a pattern when it is empty.
Result<OpBuffers> op_buffers(const Device& device, const OpInstance& op, std::uint32_t sets,
                             std::span<const std::byte> input, std::uint32_t clear) {
  OpBuffers buffers;
  FERRY_ASSIGN_OR_RETURN(buffers.outputs,
                         create_buffers(device, sets, op.output_bytes, MemoryKind::device));
  FERRY_ASSIGN_OR_RETURN(buffers.inputs, create_buffers(device, op.input_bytes != 0 ? sets : 0,
                                                        op.input_bytes, MemoryKind::device));
  CommandList fills;
  for (const Buffer& output : buffers.outputs)
    FERRY_RETURN_IF_ERROR(ferry::fill(fills, output, 0, op.output_bytes, clear));
  for (const Buffer& in : buffers.inputs) {
    if (input.empty()) FERRY_RETURN_IF_ERROR(ferry::fill(fills, in, 0, op.input_bytes, 0x5a5a5a5a));
  }
  FERRY_ASSIGN_OR_RETURN(TimelinePoint filled,
                         device.queue(QueueKind::compute).submit(std::move(fills)));
  FERRY_RETURN_IF_ERROR(filled.wait(kWaitTimeout));
  if (input.empty() || buffers.inputs.empty()) return buffers;
  FERRY_ASSIGN_OR_RETURN(Buffer staging, pinned_copy(device, input.first(op.input_bytes)));
  for (const Buffer& in : buffers.inputs)
    FERRY_RETURN_IF_ERROR(
        copy_and_wait(device.queue(QueueKind::upload), staging, in, op.input_bytes));
  return buffers;
}

Result<CommandList> record_list(const OpInstance& op, const OpBuffers& buffers,
                                std::uint32_t commands) {
  static const Buffer kNoInput;
  CommandList list;
  for (std::uint32_t k = 0; k < commands; ++k) {
    const std::size_t set = k % buffers.outputs.size();
    FERRY_RETURN_IF_ERROR(op.record(list, buffers.inputs.empty() ? kNoInput : buffers.inputs[set],
                                    buffers.outputs[set]));
  }
  return list;
}

// Runs a list of `commands` of the op and reads back the first output.
Result<std::vector<std::byte>> run_and_read(const Device& device, const OpInstance& op,
                                            const OpBuffers& buffers, std::uint32_t commands) {
  FERRY_ASSIGN_OR_RETURN(CommandList list, record_list(op, buffers, commands));
  FERRY_ASSIGN_OR_RETURN(TimelinePoint done,
                         device.queue(QueueKind::compute).submit(std::move(list)));
  FERRY_ASSIGN_OR_RETURN(Buffer readback,
                         device.create_buffer(op.output_bytes, MemoryKind::host_readback));
  FERRY_RETURN_IF_ERROR(copy_and_wait(device.queue(QueueKind::download), buffers.outputs[0],
                                      readback, op.output_bytes, done));
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> bytes, readback.host_span());
  return std::vector<std::byte>(bytes.begin(), bytes.end());
}

// As many buffer sets as fit in the budget: at least one, at most one per command.
std::uint32_t buffer_sets(std::uint64_t bytes_per_set, const ListSettings& settings) {
  const std::uint64_t fit = settings.buffer_budget / std::max<std::uint64_t>(1, bytes_per_set);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(fit, 1, settings.commands));
}

Result<ListTiming> time_op(const Device& device, const OpInstance& op, const OpBuffers& buffers,
                           const ListSettings& settings) {
  FERRY_ASSIGN_OR_RETURN(
      ListTiming timing,
      time_lists(
          device.queue(QueueKind::compute),
          [&] { return record_list(op, buffers, settings.commands); }, settings));
  timing.bytes_per_command = op.bytes_moved;
  return timing;
}

// `op` from random input (`seed` picks it): the first list's output checked bit for bit against
// the same op on the same input on `reference` (the CPU backend), then timed.
Result<ListTiming> measure_op(const Device& device, const Device& reference, const OpInstance& op,
                              const ListSettings& settings, std::uint64_t seed) {
  std::vector<std::byte> input(op.input_bytes);
  fill_random(input, seed);
  if (op.shape_input) op.shape_input(input);
  // The outputs start with different bytes on the two devices, so that a byte the op leaves
  // unwritten cannot pass for a right one.
  FERRY_ASSIGN_OR_RETURN(OpBuffers expected_buffers,
                         op_buffers(reference, op, 1, input, 0x5a5a5a5a));
  FERRY_ASSIGN_OR_RETURN(std::vector<std::byte> expected,
                         run_and_read(reference, op, expected_buffers, 1));
  expected_buffers = {};
  const std::uint32_t sets = buffer_sets(op.input_bytes + op.output_bytes, settings);
  FERRY_ASSIGN_OR_RETURN(OpBuffers buffers, op_buffers(device, op, sets, input, 0xa5a5a5a5));
  FERRY_ASSIGN_OR_RETURN(std::vector<std::byte> actual,
                         run_and_read(device, op, buffers, settings.commands));
  FERRY_RETURN_IF_ERROR(compare_bytes(actual, expected, op.label + " against the CPU backend"));
  return time_op(device, op, buffers, settings);
}

// CommandList::copy of `bytes` between device buffers on the compute queue, timed as the op is
// (bytes_per_command: read + written), and cudaMemcpyAsync D2D of as many on CUDA devices.
struct CopyBaselines {
  ListTiming ferry;
  CudaCopyBaseline cuda;
};

Result<CopyBaselines> measure_copies(const Device& device, int index, std::uint64_t bytes,
                                     const ListSettings& settings) {
  const OpInstance copy{format_bytes(bytes), bytes, bytes, 2 * bytes,
                        [bytes](CommandList& commands, const Buffer& input, const Buffer& output) {
                          return commands.copy(input, 0, output, 0, bytes);
                        }};
  FERRY_ASSIGN_OR_RETURN(OpBuffers buffers,
                         op_buffers(device, copy, buffer_sets(2 * bytes, settings), {}, 0));
  CopyBaselines copies;
  copies.cuda.reason = "not a CUDA device";
  FERRY_ASSIGN_OR_RETURN(copies.ferry, time_op(device, copy, buffers, settings));
  if (device.backend() == Backend::cuda) {
    buffers = {};  // room for CUDA's own
    copies.cuda = measure_cuda_memcpy_d2d(index, bytes, settings.commands,
                                          {.min_time = settings.min_time});
  }
  return copies;
}

std::string ops_help() {
  std::string help = "Ops:\n";
  for (const OpCase* op : kOps) {
    std::string text = std::string(op->summary) + ". Sizes: " + std::string(op->default_sizes) +
                       " (--quick: " + std::string(op->quick_sizes) + ")";
    if (!op->variants.empty())
      text += "; " + std::string(op->variant_label) + "s: " + std::string(op->variants);
    help += wrap_text("  " + std::string(op->name), text, 14);
  }
  return help;
}

Status measure(Bench& bench, const OpCase& op) {
  const Options& options = bench.options;
  const bool quick = options.flag("--quick");
  FERRY_ASSIGN_OR_RETURN(std::vector<OpSize> sizes,
                         parse_op_sizes(quick ? op.quick_sizes : op.default_sizes));
  if (options.given("--sizes")) sizes = options.op_sizes("--sizes");
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
  bench.publish();
  // In the report from the start, so that a Ctrl-C keeps the rows measured until then.
  Section& table = bench.report.add_section(
      std::string(op.name) + " against a device-to-device copy of the same bytes", "results");
  table.columns = {{"size", "size", Unit::text, false, true},
                   {std::string(op.variant_label), "variant", Unit::text, op.variants.empty()},
                   {"bytes moved", "bytes_per_command", Unit::bytes},
                   {"op us", "op_us_per_command", Unit::us}, {"op GB/s", "op_gbps", Unit::gbps},
                   {"copy us", "copy_us_per_command", Unit::us},
                   {"copy GB/s", "copy_gbps", Unit::gbps}, {"op/copy", "op_over_copy", Unit::ratio},
                   {"x cudaMemcpy D2D", "op_over_cuda_copy", Unit::ratio, !cuda},
                   {"op lists", "op_lists", Unit::count, true},
                   {"copy lists", "copy_lists", Unit::count, true}};
  table.notes = {
      "bytes moved: read + written per command; op/copy: the op's GB/s over the copy's, "
      "which is the copy's time over the op's. Every output matched the CPU backend's "
      "bit for bit."};
  bench.skipped = {"Skipped sizes", "skipped", {},
                   {{"size", "size"},
                    {std::string(op.variant_label), "variant"},
                    {"reason", "reason"}}};
  std::uint64_t seed = 0x5eed;
  for (const OpSize& size : sizes) {
    for (const std::string& variant : split_list(op.variants)) {
      Result<OpInstance> instance = op.instance(size, variant);
      if (!instance.ok()) {
        const std::string label = size.shape    ? to_string(*size.shape)
                                  : size.matrix ? to_string(*size.matrix)
                                                : format_bytes(size.bytes);
        bench.skipped.add_row({label, variant, instance.status().message()});
        continue;
      }
      const std::uint64_t in = instance->input_bytes, out = instance->output_bytes;
      const std::uint64_t copy_bytes = std::max<std::uint64_t>(1, instance->bytes_moved / 2);
      // Device: the op's or the copy's buffers; host: the input, the reference's buffers and
      // both read-backs.
      const std::uint64_t on_device = std::max({settings.buffer_budget, in + out, 2 * copy_bytes});
      if (!bench.fits({instance->label, variant}, on_device, 3 * in + 4 * out)) continue;
      const std::string what = std::string(op.name) + " " + instance->label + " " + variant;
      FERRY_RETURN_IF_ERROR(bench.progress("measuring " + what));
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
              (cuda ? ", op/cudaMemcpy D2D " + ratio_text(over_cuda) : "") + " (op " +
              format_value(timing->us_per_command(), Unit::us) + " us)");
    }
  }
  const bool nothing = table.rows.empty();
  if (nothing) bench.report.sections.pop_back();
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
        "One op (fill, normalize, binary_quantize, hamming_topk, rescore) against a "
        "device-to-device copy of the same bytes, its output checked bit for bit against the CPU "
        "backend.",
    .about =
        "Per size and output type, lists of the op's commands on the compute queue (median per\n"
        "list) against a device-to-device copy reading and writing as many bytes\n"
        "(CommandList::copy; cudaMemcpyAsync on CUDA devices). The op's output is first checked\n"
        "bit for bit against the CPU backend on the same random input (exit 1 on a mismatch).\n",
    .options = kOptions,
    .operand = "NAME",
    .operand_help = ops_help,
    .run = run,
};

}  // namespace ferry::cli
