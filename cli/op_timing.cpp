#include "op_timing.hpp"

#include <algorithm>
#include <vector>

#include "bench_common.hpp"

namespace ferry::cli {

namespace {

// Inputs and outputs of an op, `sets` of each.
struct OpBuffers {
  std::vector<Buffer> inputs, outputs;
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

}  // namespace

Result<ListTiming> time_lists(const Queue& queue,
                              const std::function<Result<CommandList>()>& record,
                              const ListSettings& settings) {
  const RepeatSettings repeat_settings{
      .warmup = 1, .min_reps = 3, .max_reps = 100'000, .min_time = settings.min_time};
  FERRY_ASSIGN_OR_RETURN(
      Timing lists, repeat(repeat_settings, [&](std::uint64_t) -> Result<double> {
        FERRY_ASSIGN_OR_RETURN(CommandList list, record());
        return wall_time([&]() -> Status {
          FERRY_ASSIGN_OR_RETURN(TimelinePoint done, queue.submit(std::move(list)));
          return done.wait(kWaitTimeout);
        });
      }));
  return ListTiming{settings.commands, 0, lists};
}

Result<ListTiming> measure_op(const Device& device, const Device& reference, const OpInstance& op,
                              const ListSettings& settings, std::uint64_t seed) {
  std::vector<std::byte> input(op.input_bytes);
  fill_random(input, seed);
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

}  // namespace ferry::cli
