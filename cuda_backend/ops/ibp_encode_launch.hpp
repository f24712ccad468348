// The ibp_encode kernels' launcher (ops/ibp_encode.cu), callable from host code built without
// nvcc; see kernels/launch.hpp for what launchers return.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ferry::cuda {

inline constexpr unsigned kIbpBlock = 256;
inline constexpr unsigned kIbpSliceRows = 255;
inline constexpr unsigned kIbpScanBlock = 1024;
inline constexpr unsigned kIbpMaxScanLevels = 8;

// ops::IbpEncodeArgs (runtime/src/ops/ibp_encode.hpp) with its plan and bindings resolved to
// addresses; the passes are that header's.
struct IbpEncodeKernelArgs {
  const void* input = nullptr;  // elements x element_size bytes, element-aligned
  void* stream = nullptr;       // max_stream_bytes, 8-byte aligned
  void* scratch = nullptr;      // 4-byte aligned
  std::uint32_t element_size = 4;
  std::uint32_t header = 0;     // dtype << 8 | ndim
  std::uint32_t group_rows = 1;
  std::uint64_t rows = 0;
  std::uint64_t row_elements = 0;
  std::uint64_t elements = 0;
  std::uint64_t group_count = 0;
  std::uint64_t masks_offset = 0;
  std::uint64_t mask_block_bytes = 0;
  std::uint64_t row_table_offset = 0;
  std::uint64_t data_offset = 0;
  std::uint64_t max_stream_bytes = 0;
  std::uint64_t batch_groups = 1;
  // The scan's levels 1, 2, ...: entries and byte offsets in scratch (8 bytes per entry).
  unsigned scan_levels = 0;
  std::uint64_t scan_items[kIbpMaxScanLevels] = {};
  std::uint64_t scan_offsets[kIbpMaxScanLevels] = {};
  std::uint64_t data_bytes_offset = 0;  // in scratch
};

// Enqueues every pass on `stream`. cudaErrorInvalidValue for arguments out of range (nothing
// launched). max_blocks: the grid cap of the grid-stride passes.
cudaError_t launch_ibp_encode(const IbpEncodeKernelArgs& launch, unsigned max_blocks,
                              cudaStream_t stream);

}  // namespace ferry::cuda
