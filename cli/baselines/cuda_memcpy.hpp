// The plain CUDA runtime as the benches' baseline on CUDA devices, measured in the same run as
// ferry's paths so that ratios compare like with like. Built only with the CUDA backend;
// elsewhere `available` is false.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "bench_common.hpp"

namespace ferry::cli {

// Median GB/s (1e9 B/s) of one transfer of the whole size, synchronous from the host.
struct CudaMemcpyBaseline {
  bool available = false;
  std::string reason;                   // why not, when unavailable
  std::array<double, 2> pinned = {};    // H2D, D2H: cudaMemcpyAsync + cudaStreamSynchronize
  std::array<double, 2> pageable = {};  // H2D, D2H: cudaMemcpy
  double both_pinned = 0;               // H2D and D2H at once on two streams, total GB/s
};

CudaMemcpyBaseline measure_cuda_memcpy(int device, std::uint64_t bytes,
                                       const RepeatSettings& settings);

// The CUDA runtime's own CPU cost of a small pinned upload, the floor under ferry's per-call
// cost on CUDA: `bytes` from pinned memory to the device, each call timed alone in bursts of
// `burst` with the stream synchronized between bursts (untimed). Medians in microseconds.
struct CudaSubmitCost {
  bool available = false;
  std::string reason;
  double memcpy_us = std::numeric_limits<double>::quiet_NaN();  // cudaMemcpyAsync
  // the same with cudaMemcpyDefault (the runtime looks both pointers up)
  double memcpy_default_us = std::numeric_limits<double>::quiet_NaN();
  // cudaMemcpyAsync + cudaEventRecord of an event without timing (what a ferry submission with
  // one timeline signal asks of the runtime)
  double memcpy_event_us = std::numeric_limits<double>::quiet_NaN();
};

CudaSubmitCost measure_cuda_submit_cost(int device, std::uint64_t bytes, std::uint64_t burst,
                                        std::uint64_t calls);

// `commands` cudaMemcpyAsync of `bytes` between device buffers on one stream, then
// cudaStreamSynchronize.
struct CudaCopyBaseline {
  bool available = false;
  std::string reason;
  double gbps = std::numeric_limits<double>::quiet_NaN();  // median, read + written (2 * bytes)
};

CudaCopyBaseline measure_cuda_memcpy_d2d(int device, std::uint64_t bytes, std::uint32_t commands,
                                         const RepeatSettings& settings);

// The naive egress loop as an application without ferry writes it: "compute" (cudaMemsetAsync
// of the whole output, repeated to last about compute_ms), wait, cudaMemcpy into pageable memory
// (synchronous), then the host work on those bytes, step after step.
struct CudaNaiveEgress {
  bool available = false;
  std::string reason;
  Status host_error = {};      // the host work's error, when it failed
  std::uint32_t memsets = 0;   // per step, chosen so that they take about compute_ms
  std::uint64_t steps = 0;     // timed
  double seconds = 0;          // the timed steps, first memset to last host work
};

// The host work of one step: `bytes` should hold `pattern` (a 32-bit word, repeated); an error
// stops the loop.
using CudaNaiveHostWork = std::function<Status(std::uint64_t step, std::span<const std::byte> bytes,
                                               std::uint32_t pattern)>;

// `warmup` untimed steps, then `steps` timed ones, each with its own byte pattern.
CudaNaiveEgress measure_cuda_naive_egress(int device, std::uint64_t bytes, double compute_ms,
                                          std::uint32_t warmup, std::uint32_t steps,
                                          const CudaNaiveHostWork& host_work);

// Host memory pinned by cudaHostAlloc (portable: pinned for every CUDA device), for benches
// that hand the same pages to another backend (register_host_memory) to tell the memory apart
// from the backend that copies it. Freed by the destructor.
class CudaPinnedHostMemory {
 public:
  static Result<CudaPinnedHostMemory> allocate(std::uint64_t bytes);
  CudaPinnedHostMemory() = default;
  CudaPinnedHostMemory(CudaPinnedHostMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  CudaPinnedHostMemory& operator=(CudaPinnedHostMemory&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~CudaPinnedHostMemory();
  std::span<std::byte> span() const { return {data_, static_cast<std::size_t>(size_)}; }

 private:
  std::byte* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace ferry::cli
