// ibp_encode: the public call (validation, lowering), the GPU backends' plan and the CPU
// reference (the host encoder writing into the stream binding).
#include "ferry/ops/ibp_encode.hpp"

#include <algorithm>
#include <string>

#include "core/checked.hpp"
#include "core/op_record.hpp"
#include "ibp/stream.hpp"
#include "ops/ibp_encode.hpp"

namespace ferry {

namespace {

constexpr const char* kCall = "ferry::ibp_encode";

Status invalid(const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(kCall) + ": " + what);
}

// invalid_argument unless the device address of the range (memory.base + offset) is a multiple
// of `alignment`. Called after check_range, so the offset lies inside the memory.
Status check_alignment(const BufferRef& memory, std::uint64_t offset, std::uint64_t alignment,
                       const char* role) {
  const std::uint64_t address = memory.base + offset;
  if (address % alignment == 0) return Status();
  return invalid(std::string(role) + " offset " + std::to_string(address) +
                 " is not a multiple of " + std::to_string(alignment) + " bytes");
}

}  // namespace

Status ibp_encode(CommandList& commands, const IbpEncodeBuffers& buffers,
                  const ibp::EncodeParams& params) {
  if (params.group_rows == 0) {
    return invalid("group_rows 0: the op needs group_rows >= 1 (it does not search group sizes)");
  }
  // The host codec's checks name the parameter (element_size, row_elements, elements, ndim,
  // dtype, a group too large); its layout gives every section's place.
  Result<ibp::Layout> layout = ibp::detail::layout_for(params, 0);
  if (!layout.ok()) return Status(layout.status()).with_context(kCall);
  Result<std::uint64_t> stream_bytes = ibp::max_stream_bytes(params);
  if (!stream_bytes.ok()) return Status(stream_bytes.status()).with_context(kCall);
  const std::optional<std::uint64_t> input_bytes =
      detail::checked_mul(params.elements, params.element_size);
  if (!input_bytes) return invalid("elements x element_size overflows 64 bits");

  FERRY_RETURN_IF_ERROR(
      detail::check_range(buffers.input, kCall, "input", buffers.input_offset, *input_bytes));
  FERRY_RETURN_IF_ERROR(
      detail::check_range(buffers.stream, kCall, "stream", buffers.stream_offset, *stream_bytes));
  FERRY_RETURN_IF_ERROR(
      check_alignment(buffers.input, buffers.input_offset, params.element_size, "input"));
  FERRY_RETURN_IF_ERROR(check_alignment(buffers.stream, buffers.stream_offset, 8, "stream"));

  ops::IbpEncodeArgs args;
  args.element_size = params.element_size;
  args.dtype = static_cast<std::uint8_t>(params.dtype);
  args.ndim = params.ndim;
  args.group_rows = params.group_rows;
  args.rows = layout->rows;
  args.row_elements = layout->row_elements;
  args.elements = layout->elements;
  args.group_count = layout->group_count;
  args.masks_offset = layout->masks_offset;
  args.mask_block_bytes = layout->mask_block_bytes;
  args.row_table_offset = layout->row_table_offset;
  args.data_offset = layout->data_offset;
  args.max_stream_bytes = *stream_bytes;
  FERRY_ASSIGN_OR_RETURN(const std::uint64_t budget,
                         detail::scratch_slab_bytes(buffers.input, kCall));
  FERRY_ASSIGN_OR_RETURN(const ops::IbpEncodePlan plan, ops::plan_ibp_encode(args, budget, kCall));
  args.batch_groups = plan.batch_groups;

  const detail::BindingRequest bindings[] = {
      {&buffers.input, buffers.input_offset, *input_bytes, backend::Access::read, "input"},
      {&buffers.stream, buffers.stream_offset, *stream_bytes, backend::Access::write, "stream"}};
  return detail::OpRecorder::record(commands, kCall, args, bindings, plan.scratch_bytes);
}

namespace ops {

ibp::EncodeParams IbpEncodeArgs::params() const noexcept {
  ibp::EncodeParams params;
  params.element_size = element_size;
  params.row_elements = row_elements;
  params.elements = elements;
  params.group_rows = group_rows;
  params.dtype = static_cast<ibp::DType>(dtype);
  params.ndim = ndim;
  params.threads = 0;
  return params;
}

Result<IbpEncodePlan> plan_ibp_encode(const IbpEncodeArgs& args, std::uint64_t scratch_budget,
                                      const char* call) {
  IbpEncodePlan plan;
  // The scan's levels: level 1 sums level 0's (the rows') blocks, and so on, until a level fits
  // one workgroup.
  std::uint64_t scan_bytes = 0;
  std::uint64_t items = args.rows;
  do {
    items = (items + kIbpScanBlock - 1) / kIbpScanBlock;
    plan.scan_items.push_back(items);
    plan.scan_offsets.push_back(scan_bytes);  // relative until the records' size is known
    scan_bytes += items * 8;
  } while (items > kIbpScanBlock);
  scan_bytes += 8;  // data_bytes

  const std::optional<std::uint64_t> group_bytes = detail::checked_mul(
      args.row_elements, std::uint64_t{ibp_record_words(args.bits())} * 4);
  // One group's records padded to the scan's 8-byte boundary, then the scan.
  const bool representable = group_bytes && *group_bytes < (std::uint64_t{1} << 62);
  const std::uint64_t needed = representable ? (*group_bytes + 7) / 8 * 8 + scan_bytes : 0;
  if (!representable || needed > scratch_budget) {
    return Status(ErrorCode::resource_exhausted,
                  std::string(call) + ": rows of " + std::to_string(args.row_elements) +
                      " elements need " +
                      (representable ? std::to_string(needed) : std::string("over 2^62")) +
                      " bytes of scratch memory; the device's scratch slabs hold " +
                      std::to_string(scratch_budget) +
                      " (DeviceOptions::scratch_slab_bytes): encode shorter rows");
  }
  // A few MiB per command, so that commands recorded together share the scratch slabs.
  const std::uint64_t budget = std::min(scratch_budget, std::max(kIbpScratchTarget, needed));
  // The scan's 64-bit sums follow the 32-bit records on an 8-byte boundary (a GPU's 64-bit loads
  // and stores need it). A backend re-plans with the scratch it got as the budget and must find
  // the same batch: group records are at least 8 bytes, so that padding never adds a group.
  const auto padded = [&](std::uint64_t groups) { return (groups * *group_bytes + 7) / 8 * 8; };
  plan.batch_groups =
      std::clamp<std::uint64_t>((budget - scan_bytes) / *group_bytes, 1, args.group_count);
  if (plan.batch_groups > 1 && padded(plan.batch_groups) + scan_bytes > budget) --plan.batch_groups;
  plan.record_bytes = padded(plan.batch_groups);
  for (std::uint64_t& offset : plan.scan_offsets) offset += plan.record_bytes;
  plan.data_bytes_offset = plan.record_bytes + scan_bytes - 8;
  plan.scratch_bytes = plan.record_bytes + scan_bytes;
  return plan;
}

void run_on_cpu(const IbpEncodeArgs& args, std::span<const std::span<std::byte>> bindings) {
  std::uint64_t written = 0;
  // Core checked the parameters and the bindings' sizes: the encoder cannot fail here.
  (void)ibp::detail::encode_into(bindings[0], args.params(), bindings[1], &written);
}

}  // namespace ops
}  // namespace ferry
