#include "baselines/cuda_naive_egress.hpp"

#if defined(FERRY_CLI_HAVE_CUDA)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace ferry::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A distinct byte per step; the memsets before the last one write its complement.
unsigned char step_byte(std::uint64_t step) {
  return static_cast<unsigned char>(step * 0x9Eu + 0x37u);
}

}  // namespace

CudaNaiveEgress measure_cuda_naive_egress(int device, std::uint64_t bytes, double compute_ms,
                                          std::uint32_t warmup, std::uint32_t steps,
                                          const CudaNaiveHostWork& host_work) {
  CudaNaiveEgress out;
  cudaError_t error = cudaSuccess;
  const char* failed_call = nullptr;
  auto check = [&](const char* call, cudaError_t e) {
    if (e != cudaSuccess && error == cudaSuccess) {
      error = e;
      failed_call = call;
    }
    return error == cudaSuccess;
  };
  int count = 0;
  if (check("cudaGetDeviceCount", cudaGetDeviceCount(&count)) && device >= count) {
    check("cudaSetDevice", cudaErrorInvalidDevice);
  }
  if (error == cudaSuccess) check("cudaSetDevice", cudaSetDevice(device));

  const auto n = static_cast<std::size_t>(bytes);
  void* output = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<std::byte> pageable(n, std::byte{0x5a});  // touched: no first-touch faults timed
  if (error == cudaSuccess) check("cudaMalloc", cudaMalloc(&output, n));
  if (error == cudaSuccess) {
    check("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  auto memsets = [&](std::uint32_t count_per_step, unsigned char last) {
    for (std::uint32_t k = 0; k < count_per_step; ++k) {
      const int value = k + 1 == count_per_step ? last : last ^ 0xFF;
      if (!check("cudaMemsetAsync", cudaMemsetAsync(output, value, n, stream))) return false;
    }
    return true;
  };

  // Calibration: the median of a few lists of memsets.
  if (error == cudaSuccess) {
    constexpr std::uint32_t kPerList = 4;
    std::vector<double> per_memset;
    for (int round = 0; round < 4 && error == cudaSuccess; ++round) {
      const Clock::time_point t0 = Clock::now();
      if (memsets(kPerList, 0) && check("cudaStreamSynchronize", cudaStreamSynchronize(stream))) {
        if (round > 0) per_memset.push_back(seconds_since(t0) / kPerList);  // round 0 warms up
      }
    }
    if (error == cudaSuccess) {
      std::sort(per_memset.begin(), per_memset.end());
      const double one = per_memset[per_memset.size() / 2];
      out.memsets = static_cast<std::uint32_t>(
          std::clamp(std::lround(compute_ms / 1e3 / one), 1L, 1'000'000L));
    }
  }
  // The memsets of a step alone, back to back.
  if (error == cudaSuccess) {
    const std::uint32_t count_steps = std::max<std::uint32_t>(steps, 1);
    const Clock::time_point t0 = Clock::now();
    for (std::uint32_t s = 0; s < count_steps && memsets(out.memsets, 0); ++s) {
    }
    if (check("cudaStreamSynchronize", cudaStreamSynchronize(stream))) {
      out.compute_seconds = seconds_since(t0) / count_steps;
    }
  }
  // The naive loop.
  Clock::time_point start = Clock::now();
  for (std::uint64_t step = 0; step < std::uint64_t{warmup} + steps && error == cudaSuccess;
       ++step) {
    if (step == warmup) start = Clock::now();
    const unsigned char value = step_byte(step);
    if (!memsets(out.memsets, value) ||
        !check("cudaStreamSynchronize", cudaStreamSynchronize(stream)) ||
        !check("cudaMemcpy", cudaMemcpy(pageable.data(), output, n, cudaMemcpyDeviceToHost))) {
      break;
    }
    out.host_error = host_work(step, pageable, std::uint32_t{value} * 0x01010101u);
    if (!out.host_error.ok()) break;
  }
  if (error == cudaSuccess && out.host_error.ok()) {
    out.seconds = seconds_since(start);
    out.steps = steps;
    out.available = true;
  }
  if (error != cudaSuccess) {
    out.reason = std::string(failed_call) + ": " + cudaGetErrorName(error) + " (" +
                 cudaGetErrorString(error) + ")";
  }
  if (stream != nullptr) cudaStreamDestroy(stream);
  cudaFree(output);
  return out;
}

}  // namespace ferry::cli

#else

namespace ferry::cli {

CudaNaiveEgress measure_cuda_naive_egress(int, std::uint64_t, double, std::uint32_t,
                                          std::uint32_t, const CudaNaiveHostWork&) {
  CudaNaiveEgress out;
  out.reason = "this ferry was built without the CUDA backend";
  return out;
}

}  // namespace ferry::cli

#endif
