// The host side of the old way to feed a GPU: convert uint8 NHWC images to normalized float32
// NCHW on the CPU, on every hardware thread, then upload four times the bytes. Also the exact
// reference (one fma per element, as ferry's normalize computes) every path is checked against.
#pragma once

#include <barrier>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "ferry/ops/normalize.hpp"

namespace ferry::cli {

// A fixed set of threads that split index ranges between them. Starting threads per batch would
// cost more than converting a small batch, so they are made once and woken per call.
class HostThreadPool {
 public:
  // threads: how many take part, the caller included (0: std::thread::hardware_concurrency()).
  explicit HostThreadPool(unsigned threads = 0);
  ~HostThreadPool();

  unsigned size() const { return threads_; }
  // Calls body(begin, end) on one contiguous part of [0, count) per thread (the caller runs the
  // first) and returns when every part is done.
  void parallel_for(std::size_t count, const std::function<void(std::size_t, std::size_t)>& body);

 private:
  void run_part(unsigned part) const;

  unsigned threads_;
  std::barrier<> start_, done_;  // every thread meets at both, once per call
  const std::function<void(std::size_t, std::size_t)>* body_ = nullptr;  // null: stop
  std::size_t count_ = 0;
  std::vector<std::jthread> workers_;  // last: joined before the barriers go
};

// A tightly packed uint8 NHWC batch.
struct HostImageBatch {
  std::uint32_t batch = 0, height = 0, width = 0, channels = 0;  // channels: 1 to 4
};

enum class ConvertRounding : std::uint8_t {
  separate,  // float(x) * scale + bias, two roundings: what a plain host loop computes (fast)
  fused,     // fma(float(x), scale, bias), one rounding: ferry's normalize exactly (slow on CPUs
             // built without FMA instructions, where it is a library call per element)
};

// The float32 NCHW tensor of `src` into `dst`, image rows split over the pool's threads.
void convert_nhwc_to_nchw_f32(const HostImageBatch& shape, const std::uint8_t* src, float* dst,
                              const NormalizeFactors& factors, ConvertRounding rounding,
                              HostThreadPool& pool);

}  // namespace ferry::cli
