// binary_quantize: float vectors to packed binary codes on the device (1 bit per dimension), the
// codes that Hamming-distance search over binary embeddings reads (FAISS's IndexBinary* layout).
//
// Exact semantics, identical on every backend (bit for bit):
//   Input: a row-major matrix [rows x dims] of float32, float16 or bfloat16 elements; row r starts
//   row_pitch bytes after row r - 1.
//   Output: [rows x words] little-endian 32-bit words, tightly packed, with
//     words = 2 * ceil(dims / 64)       (binary_code_bytes(dims) = 4 * words bytes per row)
//   so that every code row is a whole number of 64-bit words, ready for 64-bit popcounts.
//   Bit j of a row's code (j < 64 * ceil(dims / 64)) is bit (j % 32) of word (j / 32) of that
//   row, which is bit (j % 8), least significant first, of byte (j / 8): FAISS's packing.
//     bit j = (x[j] > t[j])   for j < dims, compared as float32
//     bit j = 0               for j >= dims (padding)
//   float16 and bfloat16 elements are first converted to float32 exactly (subnormals kept, never
//   flushed to zero). t[j] = 0.0f without a threshold vector, else element j of the float32
//   threshold vector. The comparison is IEEE's, with subnormals kept as well, so:
//     NaN in x or in t gives 0; -0.0 and +0.0 are equal (so 0 against threshold 0); x == t gives
//     0; +inf > any finite value; -inf > nothing finite.
//   No backend depends on the device's float environment for this (denormal flushing, fast
//   math): conversions and comparisons are integer code on Vulkan and CUDA.
#pragma once

#include <cstdint>

#include "ferry/element_type.hpp"
#include "ferry/queue.hpp"
#include "ferry/status.hpp"

namespace ferry {

// The largest dims binary_quantize takes: code rows up to 8 KiB, input rows up to 256 KiB.
inline constexpr std::uint32_t kMaxBinaryQuantizeDims = 65536;

// Bytes of one code row of `dims` dimensions: 8 * ceil(dims / 64) (dims up to 2^32 - 1 fit).
constexpr std::uint64_t binary_code_bytes(std::uint32_t dims) noexcept {
  return (std::uint64_t{dims} + 63) / 64 * 8;
}

// An optional per-dimension threshold vector: `dims` float32 values at `offset` of `*buffer` (a
// multiple of 4 bytes from the start of the memory). With buffer == nullptr every threshold is
// 0.0f. The memory is only read; it must be of the same device as the input and output. The
// BufferRef pointed to need only outlive the binary_quantize() call: the recorded command keeps
// the memory itself alive until its submission completes, like every other binding.
struct BinaryQuantizeThresholds {
  const BufferRef* buffer = nullptr;
  std::uint64_t offset = 0;
};

struct BinaryQuantizeParams {
  std::uint32_t rows = 0;  // 1 or more
  std::uint32_t dims = 0;  // 1 to kMaxBinaryQuantizeDims
  ElementType input_type = ElementType::float32;
  // Bytes from a row's first element to the next row's: 0 means dims * element size (tightly
  // packed); otherwise at least that, and a multiple of the element size.
  std::uint64_t row_pitch = 0;
  BinaryQuantizeThresholds thresholds;
};

// The sizes of one binary_quantize, with everything validated and resolved.
struct BinaryQuantizeShape {
  std::uint32_t rows = 0;
  std::uint32_t dims = 0;
  std::uint32_t words_per_row = 0;  // 32-bit code words per row: 2 * ceil(dims / 64)
  std::uint64_t row_stride = 0;     // the row pitch resolved, in bytes
  std::uint64_t input_bytes = 0;    // (rows - 1) * row_stride + dims * element size
  std::uint64_t output_bytes = 0;   // rows * binary_code_bytes(dims)
  std::uint64_t threshold_bytes = 0;  // dims * 4 with thresholds, else 0
};

// Validates the parameters that need no buffer (rows, dims, input type, row pitch, the sizes
// fitting 64 bits) and returns the resolved shape. Errors (ErrorCode::invalid_argument) name the
// bad field and its value.
Result<BinaryQuantizeShape> resolve_binary_quantize(const BinaryQuantizeParams& params);

// Records a binary_quantize of the matrix params describe, read from input_offset of `input`
// (a multiple of the element size from the start of the memory), into `commands`; the codes,
// tightly packed, are written at codes_offset of `codes` (a multiple of 4 bytes from the start of
// the memory); bytes outside [codes_offset, + output_bytes) are never written. The input and the
// thresholds may be device memory or host memory the device can read (a lease or host buffer).
// Runs on the compute queue. Errors (nothing recorded):
//   invalid_argument: rows or dims 0, dims above kMaxBinaryQuantizeDims, an unknown input type,
//     a row pitch smaller than a row or not a multiple of the element size, a misaligned input,
//     codes or thresholds offset, sizes overflowing 64 bits, the codes overlapping the input or
//     the thresholds, memory of another device;
//   out_of_range: the input, codes or thresholds range outside its buffer;
//   released: a released buffer;
//   unavailable / resource_exhausted: the device cannot run it (Device::supports
//     ("binary_quantize"), or a device limit), with the reason.
Status binary_quantize(CommandList& commands, const BufferRef& input, std::uint64_t input_offset,
                       const BufferRef& codes, std::uint64_t codes_offset,
                       const BinaryQuantizeParams& params);

}  // namespace ferry
