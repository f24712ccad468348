#include "index/host_vectors.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/float_bits.hpp"

namespace ferry::index {

void row_values(const BinaryIndexOptions& options, const std::byte* row, std::span<float> out) {
  const std::uint32_t dims = options.dims;
  switch (options.input_type) {
    case ElementType::float32:
      std::memcpy(out.data(), row, std::size_t{dims} * 4);
      break;
    case ElementType::float16:
    case ElementType::bfloat16:
      for (std::uint32_t j = 0; j < dims; ++j) {
        std::uint16_t raw;
        std::memcpy(&raw, row + std::size_t{j} * 2, 2);
        out[j] = std::bit_cast<float>(options.input_type == ElementType::float16
                                          ? detail::float16_to_float32_bits(raw)
                                          : detail::bfloat16_to_float32_bits(raw));
      }
      break;
  }
  if (options.metric != IndexMetric::cosine) return;
  // Squares of floats are exact in double, so only the sum rounds (a contracted fma would give
  // the same result).
  double sum = 0.0;
  for (std::uint32_t j = 0; j < dims; ++j) sum += double{out[j]} * double{out[j]};
  const double norm = std::sqrt(sum);
  if (norm == 0.0 || !std::isfinite(norm)) return;
  for (std::uint32_t j = 0; j < dims; ++j) out[j] = static_cast<float>(double{out[j]} / norm);
}

bool device_rows_are_float32(const BinaryIndexOptions& options) {
  return options.metric == IndexMetric::cosine ||
         (options.keep == KeptVectors::float32 && options.input_type != ElementType::float32);
}

ElementType device_row_type(const BinaryIndexOptions& options) {
  return device_rows_are_float32(options) ? ElementType::float32 : options.input_type;
}

void MeanAccumulator::add(std::span<const float> row) {
  for (std::size_t j = 0; j < sums_.size(); ++j) sums_[j] += double{row[j]};
  ++rows_;
}

std::vector<float> MeanAccumulator::means() const {
  std::vector<float> means(sums_.size(), 0.0f);
  if (rows_ == 0) return means;
  for (std::size_t j = 0; j < sums_.size(); ++j) {
    means[j] = static_cast<float>(sums_[j] / static_cast<double>(rows_));
  }
  return means;
}

double max_abs_finite(std::span<const float> row, double max_so_far) {
  for (const float x : row) {
    if (std::isfinite(x)) max_so_far = std::max(max_so_far, std::fabs(double{x}));
  }
  return max_so_far;
}

float int8_scale_for(double max_abs) {
  return max_abs > 0.0 ? static_cast<float>(127.0 / max_abs) : 1.0f;
}

void quantize_int8(std::span<const float> row, float scale, std::int8_t* out) {
  for (std::size_t j = 0; j < row.size(); ++j) {
    const double v = double{row[j]} * double{scale};  // exact: a product of two floats
    double q = std::isnan(v) ? 0.0 : std::round(v);
    q = std::clamp(q, -127.0, 127.0);
    out[j] = static_cast<std::int8_t>(q);
  }
}

}  // namespace ferry::index
