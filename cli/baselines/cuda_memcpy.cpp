#include "baselines/cuda_memcpy.hpp"

#if defined(FERRY_CLI_HAVE_CUDA)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

namespace ferry::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Median seconds of `body` repeated for about min_time_ms after one warm-up run.
double median_seconds(const std::function<bool()>& body, double min_time_ms) {
  if (!body()) return 0;
  std::vector<double> samples;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    if (!body()) return 0;
    samples.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  } while (std::chrono::duration<double, std::milli>(Clock::now() - start).count() < min_time_ms ||
           samples.size() < 3);
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

CudaMemcpyBaseline measure_cuda_memcpy(int device, std::uint64_t bytes, double min_time_ms) {
  CudaMemcpyBaseline out;
  auto fail = [&](const char* call, cudaError_t error) {
    out.available = false;
    out.reason = std::string(call) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
    return out;
  };
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) return fail("cudaGetDeviceCount", e);
  if (device >= count) return fail("cudaSetDevice", cudaErrorInvalidDevice);
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return fail("cudaSetDevice", e);

  const auto n = static_cast<std::size_t>(bytes);
  void* dev_a = nullptr;
  void* dev_b = nullptr;
  void* pinned_a = nullptr;
  void* pinned_b = nullptr;
  cudaStream_t up = nullptr;
  cudaStream_t down = nullptr;
  std::vector<unsigned char> pageable(n, 0x5a);  // touched: no first-touch faults in the timing
  cudaError_t error = cudaMalloc(&dev_a, n);
  if (error == cudaSuccess) error = cudaMalloc(&dev_b, n);
  if (error == cudaSuccess) error = cudaHostAlloc(&pinned_a, n, cudaHostAllocDefault);
  if (error == cudaSuccess) error = cudaHostAlloc(&pinned_b, n, cudaHostAllocDefault);
  if (error == cudaSuccess) error = cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking);
  if (error == cudaSuccess) error = cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking);
  if (error == cudaSuccess) {
    std::memset(pinned_a, 0x33, n);
    std::memset(pinned_b, 0x44, n);
    bool ok = true;
    auto check = [&](cudaError_t e) {
      if (e != cudaSuccess && ok) {
        ok = false;
        error = e;
      }
      return ok;
    };
    const double gb = static_cast<double>(bytes) / 1e9;
    auto gbps = [&](double seconds) { return seconds > 0 && ok ? gb / seconds : 0.0; };
    out.h2d_pinned = gbps(median_seconds([&] {
      return check(cudaMemcpyAsync(dev_a, pinned_a, n, cudaMemcpyHostToDevice, up)) &&
             check(cudaStreamSynchronize(up));
    }, min_time_ms));
    out.d2h_pinned = gbps(median_seconds([&] {
      return check(cudaMemcpyAsync(pinned_b, dev_b, n, cudaMemcpyDeviceToHost, down)) &&
             check(cudaStreamSynchronize(down));
    }, min_time_ms));
    out.h2d_pageable = gbps(median_seconds([&] {
      return check(cudaMemcpy(dev_a, pageable.data(), n, cudaMemcpyHostToDevice));
    }, min_time_ms));
    out.d2h_pageable = gbps(median_seconds([&] {
      return check(cudaMemcpy(pageable.data(), dev_b, n, cudaMemcpyDeviceToHost));
    }, min_time_ms));
    out.both_pinned = 2 * gbps(median_seconds([&] {
      return check(cudaMemcpyAsync(dev_a, pinned_a, n, cudaMemcpyHostToDevice, up)) &&
             check(cudaMemcpyAsync(pinned_b, dev_b, n, cudaMemcpyDeviceToHost, down)) &&
             check(cudaStreamSynchronize(up)) && check(cudaStreamSynchronize(down));
    }, min_time_ms));
    out.available = ok;
  }
  if (error != cudaSuccess) fail("CUDA baseline", error);
  if (up != nullptr) cudaStreamDestroy(up);
  if (down != nullptr) cudaStreamDestroy(down);
  cudaFreeHost(pinned_a);
  cudaFreeHost(pinned_b);
  cudaFree(dev_a);
  cudaFree(dev_b);
  return out;
}

CudaCopyBaseline measure_cuda_memcpy_d2d(int device, std::uint64_t bytes, std::uint32_t commands,
                                         double min_time_ms) {
  CudaCopyBaseline out;
  auto fail = [&](const char* call, cudaError_t error) {
    out.available = false;
    out.reason = std::string(call) + ": " + cudaGetErrorName(error) + " (" +
                 cudaGetErrorString(error) + ")";
    return out;
  };
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    return fail("cudaGetDeviceCount", e);
  }
  if (device >= count) return fail("cudaSetDevice", cudaErrorInvalidDevice);
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return fail("cudaSetDevice", e);

  const auto n = static_cast<std::size_t>(bytes);
  void* src = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaError_t error = cudaMalloc(&src, n);
  if (error == cudaSuccess) error = cudaMalloc(&dst, n);
  if (error == cudaSuccess) error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error == cudaSuccess) error = cudaMemsetAsync(src, 0x5a, n, stream);
  if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
  if (error == cudaSuccess) {
    bool ok = true;
    auto check = [&](cudaError_t e) {
      if (e != cudaSuccess && ok) {
        ok = false;
        error = e;
      }
      return ok;
    };
    const double seconds = median_seconds([&] {
      for (std::uint32_t k = 0; k < commands; ++k) {
        if (!check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream))) return false;
      }
      return check(cudaStreamSynchronize(stream));
    }, min_time_ms);
    if (ok && seconds > 0) {
      out.gbps = 2.0 * static_cast<double>(bytes) * commands / seconds / 1e9;
      out.available = true;
    }
  }
  if (error != cudaSuccess) fail("CUDA device-to-device baseline", error);
  if (stream != nullptr) cudaStreamDestroy(stream);
  cudaFree(src);
  cudaFree(dst);
  return out;
}

}  // namespace ferry::cli

#else

namespace ferry::cli {

CudaMemcpyBaseline measure_cuda_memcpy(int, std::uint64_t, double) {
  CudaMemcpyBaseline out;
  out.reason = "this ferry was built without the CUDA backend";
  return out;
}

CudaCopyBaseline measure_cuda_memcpy_d2d(int, std::uint64_t, std::uint32_t, double) {
  CudaCopyBaseline out;
  out.reason = "this ferry was built without the CUDA backend";
  return out;
}

}  // namespace ferry::cli

#endif
