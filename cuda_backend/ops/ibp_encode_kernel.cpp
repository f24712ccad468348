#include "ibp_encode_kernel.hpp"

#include <string>

#include "../buffer.hpp"
#include "../kernels/launch.hpp"
#include "../status.hpp"
#include "ibp_encode_launch.hpp"
#include "ops/ibp_encode.hpp"

namespace ferry::cuda {

static_assert(kIbpBlock == ops::kIbpWorkgroupSize);
static_assert(kIbpSliceRows == ops::kIbpSliceRows);
static_assert(kIbpScanBlock == ops::kIbpScanBlock);

Status IbpEncodeKernel::create(unsigned sm_count) {
  max_blocks_ = sm_count * kBlocksPerSm;
  return Status();
}

Status IbpEncodeKernel::record(const ops::IbpEncodeArgs& args,
                               std::span<const backend::Binding> bindings,
                               cudaStream_t stream) const {
  if (bindings.size() != 3) {
    return Status(ErrorCode::internal, "CUDA: ibp_encode with " + std::to_string(bindings.size()) +
                                           " bindings (input, stream, scratch expected)");
  }
  FERRY_ASSIGN_OR_RETURN(const ops::IbpEncodePlan plan,
                         ops::plan_ibp_encode(args, bindings[2].size, "ibp_encode"));
  if (plan.batch_groups != args.batch_groups || plan.scratch_bytes > bindings[2].size ||
      plan.scan_items.size() > kIbpMaxScanLevels ||
      args.elements * args.element_size > bindings[0].size ||
      args.max_stream_bytes > bindings[1].size) {
    return Status(ErrorCode::internal, "CUDA: ibp_encode reads or writes outside its bindings");
  }
  IbpEncodeKernelArgs launch;
  FERRY_ASSIGN_OR_RETURN(std::byte* const input, binding_address(bindings[0], "ibp_encode input"));
  FERRY_ASSIGN_OR_RETURN(std::byte* const stream_bytes,
                         binding_address(bindings[1], "ibp_encode stream"));
  FERRY_ASSIGN_OR_RETURN(std::byte* const scratch,
                         binding_address(bindings[2], "ibp_encode scratch"));
  launch.input = input;
  launch.stream = stream_bytes;
  launch.scratch = scratch;
  launch.element_size = args.element_size;
  launch.header = std::uint32_t{args.dtype} << 8 | args.ndim;
  launch.group_rows = args.group_rows;
  launch.rows = args.rows;
  launch.row_elements = args.row_elements;
  launch.elements = args.elements;
  launch.group_count = args.group_count;
  launch.masks_offset = args.masks_offset;
  launch.mask_block_bytes = args.mask_block_bytes;
  launch.row_table_offset = args.row_table_offset;
  launch.data_offset = args.data_offset;
  launch.max_stream_bytes = args.max_stream_bytes;
  launch.batch_groups = plan.batch_groups;
  launch.scan_levels = static_cast<unsigned>(plan.scan_items.size());
  for (unsigned i = 0; i < launch.scan_levels; ++i) {
    launch.scan_items[i] = plan.scan_items[i];
    launch.scan_offsets[i] = plan.scan_offsets[i];
  }
  launch.data_bytes_offset = plan.data_bytes_offset;
  const cudaError_t error = launch_ibp_encode(launch, max_blocks_, stream);
  if (error != cudaSuccess) return cuda_status(error, "launch_ibp_encode (ibp_encode kernels)");
  return Status();
}

}  // namespace ferry::cuda
