// hamming_topk on CUDA: the kernels of hamming_topk.cu, one launch per pass of the plan.
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "core/backend.hpp"

namespace ferry::cuda {

class HammingTopkKernel {
 public:
  Status create(unsigned sm_count);
  // Enqueues the passes on `stream`, in order (a stream runs them one after another).
  Status record(const ops::HammingTopkArgs& args, std::span<const backend::Binding> bindings,
                cudaStream_t stream) const;
};

}  // namespace ferry::cuda
