#include "baselines/cpu_convert.hpp"

#include <algorithm>
#include <cmath>

namespace ferry::cli {

namespace {

// Image rows [begin, end) (row r is row r % height of image r / height). The channel count is a
// template argument so that the inner loop has fixed strides and vectorizes.
template <std::uint32_t kChannels, ConvertRounding kRounding>
void convert_rows(const HostImageBatch& shape, const std::uint8_t* src, float* dst,
                  const NormalizeFactors& factors, std::size_t begin, std::size_t end) {
  const std::size_t width = shape.width;
  const std::size_t plane = std::size_t{shape.height} * width;
  for (std::size_t row = begin; row < end; ++row) {
    const std::size_t image = row / shape.height;
    const std::size_t y = row % shape.height;
    const std::uint8_t* in = src + row * width * kChannels;
    float* out[kChannels];
    for (std::uint32_t c = 0; c < kChannels; ++c) {
      out[c] = dst + (image * kChannels + c) * plane + y * width;
    }
    // One pass over the interleaved row, writing each channel's plane as a sequential stream.
    for (std::size_t x = 0; x < width; ++x) {
      for (std::uint32_t c = 0; c < kChannels; ++c) {
        const auto value = static_cast<float>(in[x * kChannels + c]);
        if constexpr (kRounding == ConvertRounding::fused) {
          out[c][x] = std::fma(value, factors.scale[c], factors.bias[c]);
        } else {
          out[c][x] = value * factors.scale[c] + factors.bias[c];
        }
      }
    }
  }
}

using ConvertRows = void (*)(const HostImageBatch&, const std::uint8_t*, float*,
                             const NormalizeFactors&, std::size_t, std::size_t);
// Per rounding (separate, fused) and channel count (1 to 4).
constexpr ConvertRows kConvertRows[2][4] = {
    {convert_rows<1, ConvertRounding::separate>, convert_rows<2, ConvertRounding::separate>,
     convert_rows<3, ConvertRounding::separate>, convert_rows<4, ConvertRounding::separate>},
    {convert_rows<1, ConvertRounding::fused>, convert_rows<2, ConvertRounding::fused>,
     convert_rows<3, ConvertRounding::fused>, convert_rows<4, ConvertRounding::fused>}};

}  // namespace

HostThreadPool::HostThreadPool(unsigned threads)
    : threads_(threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency())),
      start_(threads_),
      done_(threads_) {
  for (unsigned part = 1; part < threads_; ++part) {
    workers_.emplace_back([this, part] {
      for (start_.arrive_and_wait(); body_ != nullptr; start_.arrive_and_wait()) {
        run_part(part);
        done_.arrive_and_wait();
      }
    });
  }
}

HostThreadPool::~HostThreadPool() {
  body_ = nullptr;
  start_.arrive_and_wait();  // the workers see no body and return
}

void HostThreadPool::run_part(unsigned part) const {
  const std::size_t begin = count_ * part / threads_, end = count_ * (part + 1) / threads_;
  if (begin < end) (*body_)(begin, end);
}

void HostThreadPool::parallel_for(std::size_t count,
                                  const std::function<void(std::size_t, std::size_t)>& body) {
  body_ = &body;
  count_ = count;
  start_.arrive_and_wait();
  run_part(0);
  done_.arrive_and_wait();
}

void convert_nhwc_to_nchw_f32(const HostImageBatch& shape, const std::uint8_t* src, float* dst,
                              const NormalizeFactors& factors, ConvertRounding rounding,
                              HostThreadPool& pool) {
  const ConvertRows rows = kConvertRows[rounding == ConvertRounding::fused ? 1 : 0]
                                       [std::clamp(shape.channels, 1u, 4u) - 1];
  pool.parallel_for(
      std::size_t{shape.batch} * shape.height,
      [&](std::size_t begin, std::size_t end) { rows(shape, src, dst, factors, begin, end); });
}

}  // namespace ferry::cli
