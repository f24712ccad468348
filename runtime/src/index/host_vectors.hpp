// What BinaryIndex computes from vectors on the host, exactly as ferry/binary_index.hpp defines
// it: float32 values of a row, cosine normalization, the first add's mean thresholds and int8
// scale, int8 quantization. Deterministic in the default floating-point environment: exact
// conversions, double sums in a fixed order, one rounding to float at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ferry/binary_index.hpp"

namespace ferry::index {

// Row `row` (dims elements of `type`) as float32 values in `out`, normalized for cosine.
void row_values(const BinaryIndexOptions& options, const std::byte* row, std::span<float> out);

// Whether the rows the device quantizes are float32 values the host prepared (cosine, or float32
// kept from 16-bit input) rather than the caller's rows as they are.
bool device_rows_are_float32(const BinaryIndexOptions& options);
// The element type of the rows the device quantizes.
ElementType device_row_type(const BinaryIndexOptions& options);

// The per-dimension means of rows, summed in row order in double.
class MeanAccumulator {
 public:
  explicit MeanAccumulator(std::uint32_t dims) : sums_(dims, 0.0) {}
  void add(std::span<const float> row);
  std::vector<float> means() const;

 private:
  std::vector<double> sums_;
  std::uint64_t rows_ = 0;
};

// The largest |x| over the finite values of `row`, or `max_so_far` when larger.
double max_abs_finite(std::span<const float> row, double max_so_far);
// The int8 scale for a largest magnitude m: float(127 / m), 1 when m is 0.
float int8_scale_for(double max_abs);
// q_j = clamp(round(double(x_j) * scale), -127, 127), halves away from zero, NaN -> 0.
void quantize_int8(std::span<const float> row, float scale, std::int8_t* out);

}  // namespace ferry::index
