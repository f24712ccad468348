// The ibp_decode kernel's launcher (ops/ibp_decode.cu), callable from host code built without
// nvcc; see kernels/launch.hpp for what launchers return.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cuda {

// ops::IbpDecodeArgs (runtime/src/ops/ibp_decode.hpp) with its bindings resolved to addresses
// and the layout's offsets (from the stream's start) that the kernel reads.
struct IbpDecodeKernelArgs {
  const void* stream = nullptr;      // device or mapped pinned host memory; 8-byte aligned
  // The stream's group table and masks, read from here: `stream` or a device copy of its first
  // bytes; the row table from `row_tables`, the same or `stream` (a gather of few rows from host
  // memory reads its entries in place).
  const void* tables = nullptr;
  const void* row_tables = nullptr;
  void* output = nullptr;            // element-aligned
  std::uint32_t* status = nullptr;
  const std::uint32_t* indices = nullptr;  // gather only
  std::uint32_t element_size = 4;    // 1, 2, 4 or 8
  std::uint32_t group_rows = 1;
  std::uint64_t rows = 0;
  std::uint64_t row_elements = 0;
  std::uint64_t last_row_elements = 0;
  std::uint64_t group_table_offset = 0;
  std::uint64_t masks_offset = 0;
  std::uint64_t mask_block_bytes = 0;
  std::uint64_t row_table_offset = 0;
  std::uint64_t data_offset = 0;
  std::uint64_t data_bytes = 0;
  std::uint64_t stream_bytes = 0;  // what the kernel may read from `stream`
  std::uint64_t items = 0;
  std::uint64_t first_row = 0;  // whole / range
  bool gather = false;
};

// Writes 0 to the status, then decodes (one warp per item). cudaErrorInvalidValue when a
// pointer is misaligned or a field is out of its range (nothing enqueued).
cudaError_t launch_ibp_decode(const IbpDecodeKernelArgs& launch, unsigned max_blocks,
                              cudaStream_t stream);

}  // namespace ferry::cuda
