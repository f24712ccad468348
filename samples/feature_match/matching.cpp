#include "matching.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "ferry/ops/hamming_topk.hpp"

namespace feature_match {

ferry::Result<Codes> pack_codes(const std::uint8_t* descriptors, std::uint64_t rows,
                                std::uint64_t row_stride, std::uint32_t descriptor_bytes) {
  using ferry::ErrorCode;
  using ferry::Status;
  constexpr std::uint32_t kMaxBytes = ferry::kHammingMaxCodeBits / 8;
  if (descriptor_bytes == 0 || descriptor_bytes > kMaxBytes) {
    return Status(ErrorCode::invalid_argument,
                  "pack_codes: descriptors of " + std::to_string(descriptor_bytes) +
                      " bytes (hamming_topk takes 1 to " + std::to_string(kMaxBytes) + ")");
  }
  if (row_stride < descriptor_bytes) {
    return Status(ErrorCode::invalid_argument,
                  "pack_codes: row stride " + std::to_string(row_stride) +
                      " is below the descriptor's " + std::to_string(descriptor_bytes) + " bytes");
  }
  if (rows >= ferry::kHammingMaxDatabaseRows) {
    return Status(ErrorCode::invalid_argument,
                  "pack_codes: " + std::to_string(rows) + " descriptors (32-bit indices)");
  }
  Codes codes;
  codes.code_bits = (descriptor_bytes + 7) / 8 * 64;
  codes.rows = rows;
  const std::size_t code_bytes = codes.code_bits / 8;
  codes.bytes.assign(rows * code_bytes, std::byte{0});  // the padding stays zero
  for (std::uint64_t r = 0; r < rows; ++r) {
    std::memcpy(codes.bytes.data() + r * code_bytes, descriptors + r * row_stride,
                descriptor_bytes);
  }
  return codes;
}

std::vector<Match> ratio_test(std::span<const std::uint32_t> distances,
                              std::span<const std::uint32_t> indices, double ratio) {
  std::vector<Match> matches;
  const std::size_t queries = std::min(distances.size(), indices.size()) / 2;
  for (std::size_t q = 0; q < queries; ++q) {
    const std::uint32_t nearest = distances[2 * q];
    const std::uint32_t second = distances[2 * q + 1];
    if (indices[2 * q] == ferry::kHammingNoIndex) continue;
    if (static_cast<double>(nearest) < ratio * static_cast<double>(second)) {
      matches.push_back({static_cast<std::uint32_t>(q), indices[2 * q], nearest, second});
    }
  }
  return matches;
}

Point apply(const Homography& h, Point p) {
  const double w = h[6] * p.x + h[7] * p.y + h[8];
  return {(h[0] * p.x + h[1] * p.y + h[2]) / w, (h[3] * p.x + h[4] * p.y + h[5]) / w};
}

Homography multiply(const Homography& a, const Homography& b) {
  Homography c{};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 3; ++k) c[3 * i + j] += a[3 * i + k] * b[3 * k + j];
    }
  }
  return c;
}

}  // namespace feature_match
