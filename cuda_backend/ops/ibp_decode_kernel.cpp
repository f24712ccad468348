#include "ibp_decode_kernel.hpp"

#include <string>

#include "../buffer.hpp"
#include "../kernels/launch.hpp"
#include "../status.hpp"
#include "ibp_decode_launch.hpp"
#include "ops/ibp_decode.hpp"

namespace ferry::cuda {

Status IbpDecodeKernel::create(unsigned sm_count) {
  max_blocks_ = sm_count * kBlocksPerSm;
  return Status();
}

Status IbpDecodeKernel::record(const ops::IbpDecodeArgs& args,
                               std::span<const backend::Binding> bindings,
                               cudaStream_t stream) const {
  // Core validated the command; these keep a bad one from becoming out-of-bounds accesses.
  const ibp::Layout& layout = args.layout;
  const std::size_t fixed = args.gather() ? 4u : 3u;  // then the scratch for the tables, maybe
  const bool tables_scratch = bindings.size() == fixed + 1;
  if ((bindings.size() != fixed && !tables_scratch) ||
      (tables_scratch && bindings[fixed].size < ops::ibp_tables_copy_bytes(args)) ||
      args.row_count == 0 || layout.rows == 0 ||
      layout.stream_bytes > bindings[0].size || args.output_bytes() > bindings[1].size ||
      bindings[2].size < 4 || (args.gather() && bindings[3].size < args.row_count * 4)) {
    return Status(ErrorCode::internal, "CUDA: ibp_decode of " + std::to_string(args.row_count) +
                                           " items with " + std::to_string(bindings.size()) +
                                           " bindings reads or writes outside them");
  }
  IbpDecodeKernelArgs launch;
  FERRY_ASSIGN_OR_RETURN(std::byte* const source, binding_address(bindings[0], "ibp_decode stream"));
  FERRY_ASSIGN_OR_RETURN(std::byte* const output, binding_address(bindings[1], "ibp_decode output"));
  FERRY_ASSIGN_OR_RETURN(std::byte* const status, binding_address(bindings[2], "ibp_decode status"));
  launch.stream = source;
  launch.tables = source;
  launch.row_tables = source;
  if (tables_scratch) {
    // The stream is in host memory: its tables cross the bus once, here, not with every row.
    // The row table too, unless the command is a gather of few rows: then copying 4 bytes of
    // every row would cost more than the entries it reads (a 2 GiB table of 512-byte rows:
    // 16 MiB, 0.33 ms on the H200, for each batch; ops::ibp_gather_reads_row_table_in_place).
    FERRY_ASSIGN_OR_RETURN(std::byte* const tables,
                           binding_address(bindings[fixed], "ibp_decode tables scratch"));
    const cudaError_t copied = cudaMemcpyAsync(tables, source, ops::ibp_tables_copy_bytes(args),
                                               cudaMemcpyDefault, stream);
    if (copied != cudaSuccess) return cuda_status(copied, "cudaMemcpyAsync (ibp_decode tables)");
    launch.tables = tables;
    if (!ops::ibp_gather_reads_row_table_in_place(args)) launch.row_tables = tables;
  }
  launch.output = output;
  launch.status = reinterpret_cast<std::uint32_t*>(status);
  if (args.gather()) {
    FERRY_ASSIGN_OR_RETURN(std::byte* const indices,
                           binding_address(bindings[3], "ibp_decode indices"));
    launch.indices = reinterpret_cast<const std::uint32_t*>(indices);
  }
  launch.element_size = layout.element_size;
  launch.group_rows = layout.group_rows;
  launch.rows = layout.rows;
  launch.row_elements = layout.row_elements;
  launch.last_row_elements = layout.row_elements_of(layout.rows - 1);
  launch.group_table_offset = layout.group_table_offset;
  launch.masks_offset = layout.masks_offset;
  launch.mask_block_bytes = layout.mask_block_bytes;
  launch.row_table_offset = layout.row_table_offset;
  launch.data_offset = layout.data_offset;
  launch.data_bytes = layout.data_bytes;
  launch.stream_bytes = layout.stream_bytes;
  launch.items = args.item_count();
  launch.first_row = args.first_row;
  launch.gather = args.gather();
  const cudaError_t error = launch_ibp_decode(launch, max_blocks_, stream);
  if (error != cudaSuccess) return cuda_status(error, "launch_ibp_decode (ibp_decode kernel)");
  return Status();
}

}  // namespace ferry::cuda
