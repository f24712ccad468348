// The feature_match sample's matching logic, without OpenCV (so that its unit tests build and run
// everywhere): binary descriptors packed as hamming_topk's codes, Lowe's ratio test over the
// k = 2 results, and points mapped through a homography.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ferry/status.hpp"

namespace feature_match {

// Descriptors as hamming_topk's codes: rows x code_bits / 8 bytes.
struct Codes {
  std::uint32_t code_bits = 0;  // the descriptor's bits rounded up to a multiple of 64
  std::uint64_t rows = 0;
  std::vector<std::byte> bytes;
};

// Packs `rows` descriptors of `descriptor_bytes` bytes each; row r starts at
// descriptors + r * row_stride (an OpenCV CV_8U matrix: one row per keypoint, `step` bytes
// apart). The bits stay where they are: bit j of a code is bit j % 8 of byte j / 8, which is
// hamming_topk's layout and how OpenCV's ORB already stores its tests (orb.cpp, WTA_K = 2: test
// 8 * i + b is bit b of byte i), so a 32-byte ORB descriptor is a 256-bit code as it is. Rows
// are padded with zero bytes to a multiple of 64 bits (e.g. AKAZE's 61 bytes to 64), which adds
// nothing to any distance. Errors (invalid_argument): descriptor_bytes 0 or above 512 (4096
// bits, hamming_topk's longest code), row_stride < descriptor_bytes, or rows above what 32-bit
// indices hold.
ferry::Result<Codes> pack_codes(const std::uint8_t* descriptors, std::uint64_t rows,
                                std::uint64_t row_stride, std::uint32_t descriptor_bytes);

struct Match {
  std::uint32_t query = 0;            // row of the first image's descriptors
  std::uint32_t train = 0;            // row of the second image's descriptors: the nearest
  std::uint32_t distance = 0;         // Hamming distance to the nearest
  std::uint32_t second_distance = 0;  // to the second nearest (kHammingNoDistance if none)
};

// Lowe's ratio test over hamming_topk's k = 2 results ([queries x 2] distances and indices, as
// the op writes them): query i keeps its nearest row when distance < ratio * second distance,
// so a nearest that is hardly better than the runner-up (a repeated texture) is dropped, and
// so are two rows at the same distance. With a database of one row the second neighbour is
// kHammingNoDistance, which lets the nearest through.
std::vector<Match> ratio_test(std::span<const std::uint32_t> distances,
                              std::span<const std::uint32_t> indices, double ratio);

struct Point {
  double x = 0;
  double y = 0;
};

// A 3x3 homography, row-major: (x, y) maps to ((h0 x + h1 y + h2) / w, (h3 x + h4 y + h5) / w),
// w = h6 x + h7 y + h8.
using Homography = std::array<double, 9>;

Point apply(const Homography& h, Point p);
Homography multiply(const Homography& a, const Homography& b);  // a after b

}  // namespace feature_match
