// The published Invariant Bit Packing scheme's compressed size (Kamath et al., EuroSys 2026, as
// ../shared/DESIGN.md describes its library), computed on the same tensor as ferry's format so
// that `ferry bench ibp` compares ratios like for like:
//   one mask and invariant value per column for the whole tensor: the bits whose majority value
//   is shared by at least t of the rows (t swept 0.70, 0.71, ..., 1.00; the smallest total kept);
//   per row an escape bitmap of one bit per element, the variable bits of matching elements and
//   the raw bits of the others, padded to a whole element; a row that would not shrink stored raw;
//   one flag bit per row for that; the masks and values stored once (2 x element size per column).
// Rows are stored at their raw stride by that library (host memory does not shrink); the size
// here is what crosses the bus, its best case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ferry::cli {

struct PublishedIbp {
  std::uint64_t bytes = 0;  // compressed size at the best threshold
  double threshold = 0;     // that threshold
};

// data: rows x row_elements elements of element_size bytes (1, 2, 4 or 8), row-major; a short
// last row is padded with zero elements for this computation. threads: 0 = the hardware's.
PublishedIbp published_ibp_size(std::span<const std::byte> data, unsigned element_size,
                                std::uint64_t row_elements, unsigned threads = 0);

}  // namespace ferry::cli
