#include "baselines/cpu_convert.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ferry::cli {

namespace {

// Part `part` of `parts` of [0, count): contiguous, sizes differing by at most one.
std::pair<std::size_t, std::size_t> part_range(unsigned part, unsigned parts, std::size_t count) {
  return {count * part / parts, count * (part + 1) / parts};
}

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

template <ConvertRounding kRounding>
void convert_rows(const HostImageBatch& shape, const std::uint8_t* src, float* dst,
                  const NormalizeFactors& factors, std::size_t begin, std::size_t end) {
  switch (shape.channels) {
    case 1: return convert_rows<1, kRounding>(shape, src, dst, factors, begin, end);
    case 2: return convert_rows<2, kRounding>(shape, src, dst, factors, begin, end);
    case 3: return convert_rows<3, kRounding>(shape, src, dst, factors, begin, end);
    default: return convert_rows<4, kRounding>(shape, src, dst, factors, begin, end);
  }
}

}  // namespace

HostThreadPool::HostThreadPool(unsigned threads) {
  threads_ = threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  for (unsigned part = 1; part < threads_; ++part) {
    workers_.emplace_back([this, part] { work(part); });
  }
}

HostThreadPool::~HostThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void HostThreadPool::work(unsigned part) {
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const auto* body = body_;
    const auto [begin, end] = part_range(part, size(), count_);
    lock.unlock();
    if (begin < end) (*body)(begin, end);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

void HostThreadPool::parallel_for(std::size_t count,
                                  const std::function<void(std::size_t, std::size_t)>& body) {
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    count_ = count;
    pending_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  const auto [begin, end] = part_range(0, size(), count);
  if (begin < end) body(begin, end);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

void convert_nhwc_to_nchw_f32(const HostImageBatch& shape, const std::uint8_t* src, float* dst,
                              const NormalizeFactors& factors, ConvertRounding rounding,
                              HostThreadPool& pool) {
  const std::size_t rows = std::size_t{shape.batch} * shape.height;
  pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
    if (rounding == ConvertRounding::fused) {
      convert_rows<ConvertRounding::fused>(shape, src, dst, factors, begin, end);
    } else {
      convert_rows<ConvertRounding::separate>(shape, src, dst, factors, begin, end);
    }
  });
}

}  // namespace ferry::cli
