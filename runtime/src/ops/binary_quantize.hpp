// binary_quantize, as every backend runs it (ferry/ops/binary_quantize.hpp has the public call
// and its exact semantics), with everything resolved by core: the pitch is explicit, whether a
// threshold vector is bound is a flag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ferry/element_type.hpp"

namespace ferry::ops {

// Binding 0: the input, read: input_bytes() bytes from its start, row r's element j at byte
// r * row_stride + j * element_size(input_type), a multiple of the element size from the start
// of its memory. Binding 1: the codes, written: output_bytes() bytes, starting on a multiple of 4;
// word w of row r (little endian) at byte (r * words_per_row() + w) * 4 holds bits
// 32w .. 32w + 31 of the row's code:
//   bit j = j < dims && !isnan(x[j]) && !isnan(t[j]) && x[j] > t[j]      (as float32)
// Binding 2, only with has_thresholds: the thresholds, read: dims float32 values, on a multiple
// of 4; t[j] = 0.0f without them. Core has checked that every binding fits its buffer, that the
// codes overlap neither of the others, and the shape (rows, dims >= 1, dims at most
// kMaxBinaryQuantizeDims, row_stride at least a row and a multiple of the element size).
struct BinaryQuantizeArgs {
  std::uint32_t rows = 0;
  std::uint32_t dims = 0;
  ElementType input_type = ElementType::float32;
  std::uint64_t row_stride = 0;  // bytes
  bool has_thresholds = false;

  // 32-bit code words per row: 2 * ceil(dims / 64).
  std::uint32_t words_per_row() const noexcept { return (dims + 63) / 64 * 2; }
  std::uint64_t row_bytes() const noexcept {
    return std::uint64_t{dims} * element_size(input_type);
  }
  // Bytes from the first element read to one past the last (core checked that it fits 64 bits).
  std::uint64_t input_bytes() const noexcept {
    return std::uint64_t{rows - 1} * row_stride + row_bytes();
  }
  std::uint64_t output_bytes() const noexcept {
    return std::uint64_t{rows} * words_per_row() * 4;
  }
};

// The CPU reference: `bindings` are the bindings' bytes.
void run_on_cpu(const BinaryQuantizeArgs& args, std::span<const std::span<std::byte>> bindings);

}  // namespace ferry::ops
