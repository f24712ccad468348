// hamming_topk on CUDA: the kernels of hamming_topk.cu, one launch per pass of the plan.
#pragma once

#include <cuda_runtime_api.h>

#include <span>
#include <string>

#include "core/backend.hpp"
#include "hamming_topk_launch.hpp"

namespace ferry::cuda {

class HammingTopkKernel {
 public:
  // Reads what the device offers (hamming_topk_launch.hpp); FERRY_CUDA_HIDE_FEATURES=b1mma (for
  // tests) makes it take the popcount path where it has the tensor-core one, and
  // FERRY_CUDA_HAMMING_SCAN forces a scan (Scan).
  Status create(unsigned sm_count);
  // Enqueues the passes on `stream`, in order (a stream runs them one after another).
  Status record(const ops::HammingTopkArgs& args, std::span<const backend::Binding> bindings,
                cudaStream_t stream) const;
  // Whether it pools (the tensor-core path): the public call then offers it scratch for the pools.
  bool pools() const { return support_.mma; }
  // DeviceInfo::search_path (once created): the tensor-core path, or popcounts and why.
  const std::string& search_path() const { return search_path_; }

 private:
  // The pooled search (hamming_topk_launch.hpp) when the bounds exist and the pools fit the
  // scratch; false (nothing enqueued) when they do not.
  Result<bool> record_pooled(const ops::HammingTopkArgs& args,
                             std::span<const backend::Binding> bindings, cudaStream_t stream) const;

  unsigned sm_count_ = 1;
  HammingScanSupport support_;
  std::string search_path_;
  // FERRY_CUDA_HAMMING_SCAN, for tests and measurements: the pooled search where it applies
  // (unset, pooled), the buffered scan always (buffered), pools that hold nothing so that every
  // query takes the select kernel's exact pass (pooled-exact), the pooled search without the
  // staged scan (pooled-plain).
  enum class Scan { pooled, buffered, pooled_exact, pooled_plain };
  Scan scan_ = Scan::pooled;
};

}  // namespace ferry::cuda
