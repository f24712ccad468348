// ibp_encode, as every backend runs it (ferry/ops/ibp_encode.hpp has the public call and its
// exact semantics: the bytes of ferry::ibp::encode), and the plan both GPU backends follow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ferry/ibp.hpp"
#include "ferry/status.hpp"

namespace ferry::ops {

// Binding 0: the input, read: elements x element_size bytes, on a multiple of the element size.
// Binding 1: the stream, written: max_stream_bytes bytes (only the stream's own are written), on
// a multiple of 8. Binding 2 (GPU backends only): scratch, read and written
// (IbpEncodePlan::scratch_bytes). Offsets in the stream are from binding 1's start; core checked
// the parameters (ferry::ibp::max_stream_bytes accepted them: every size fits 64 bits and a
// group's rows stay under 4 GiB).
struct IbpEncodeArgs {
  std::uint8_t element_size = 4;  // 1, 2, 4 or 8
  std::uint8_t dtype = 0;         // header fields, informational
  std::uint8_t ndim = 2;
  std::uint32_t group_rows = 1;
  std::uint64_t rows = 0;
  std::uint64_t row_elements = 0;
  std::uint64_t elements = 0;
  std::uint64_t group_count = 0;
  std::uint64_t masks_offset = 0;      // the layout (docs/IBP_FORMAT.md), from the stream's start
  std::uint64_t mask_block_bytes = 0;
  std::uint64_t row_table_offset = 0;
  std::uint64_t data_offset = 0;
  std::uint64_t max_stream_bytes = 0;
  // Groups whose column statistics share the scratch at once (IbpEncodePlan).
  std::uint64_t batch_groups = 1;

  std::uint32_t bits() const noexcept { return 8u * element_size; }
  ibp::EncodeParams params() const noexcept;
};

// The CPU reference: ferry::ibp's encoder writing into binding 1.
void run_on_cpu(const IbpEncodeArgs& args, std::span<const std::span<std::byte>> bindings);

// ---- The GPU algorithm (docs/OPS.md, "ibp_encode") ----
//
// Column statistics go group batch by group batch (batch_groups groups whose per-column records
// fit the scratch): clear the records, count the ones of every bit (row slices of
// kIbpSliceRows, bit-sliced counters, atomics into the records), order the bits (majority
// values, each bit's rank by agreement), histogram each element's kmax (how many leading bits of
// the order it agrees with), choose k (largest k x m_k, ties smallest) and write the batch's
// mask blocks. Then per row its mode and length (into the row table), a scan of the lengths
// (reduce by blocks of kIbpScanBlock rows, level after level, the top in one workgroup, then
// down: group table, row table offsets), the rows' bit streams, the checksum table (a workgroup
// per 64 KiB chunk) and last the header.
inline constexpr std::uint32_t kIbpWorkgroupSize = 256;
inline constexpr std::uint32_t kIbpSliceRows = 255;   // counts fit 8 bits
inline constexpr std::uint32_t kIbpScanBlock = 1024;  // rows (or sums) per scan workgroup
inline constexpr std::uint64_t kIbpScratchTarget = 4ull << 20;  // per command, when possible

// A column's record in scratch, in 32-bit words, for W-bit elements: ones[W], hist[W + 1],
// majority value (2 words), mask (2), value (2), each bit's rank (a byte per bit).
constexpr std::uint32_t ibp_record_ones(std::uint32_t) { return 0; }
constexpr std::uint32_t ibp_record_hist(std::uint32_t bits) { return bits; }
constexpr std::uint32_t ibp_record_majority(std::uint32_t bits) { return 2 * bits + 1; }
constexpr std::uint32_t ibp_record_mask(std::uint32_t bits) { return 2 * bits + 3; }
constexpr std::uint32_t ibp_record_value(std::uint32_t bits) { return 2 * bits + 5; }
constexpr std::uint32_t ibp_record_rank(std::uint32_t bits) { return 2 * bits + 7; }
constexpr std::uint32_t ibp_record_words(std::uint32_t bits) { return 2 * bits + 7 + bits / 4; }

// The scratch of one command: the batch's column records, then the scan's sums (8 bytes each,
// level 1 first: level l + 1 holds the sums of level l's blocks of kIbpScanBlock; the last level
// has at most kIbpScanBlock entries), then data_bytes (8 bytes).
struct IbpEncodePlan {
  std::uint64_t batch_groups = 1;
  std::uint64_t record_bytes = 0;  // the batch's records
  std::vector<std::uint64_t> scan_items;    // entries of levels 1, 2, ...
  std::vector<std::uint64_t> scan_offsets;  // their byte offsets in scratch
  std::uint64_t data_bytes_offset = 0;
  std::uint64_t scratch_bytes = 0;
};

// The plan for `args` (batch_groups ignored) within `scratch_budget` bytes: as many groups per
// batch as fit min(budget, max(kIbpScratchTarget, one group)). resource_exhausted when one
// group's records and the scan do not fit the budget. `call` names the public call.
Result<IbpEncodePlan> plan_ibp_encode(const IbpEncodeArgs& args, std::uint64_t scratch_budget,
                                      const char* call);

}  // namespace ferry::ops
