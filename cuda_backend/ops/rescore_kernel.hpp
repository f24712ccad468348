// rescore on CUDA: the rescore kernel (rescore.cu) and how it is launched. The interface every
// op's CUDA kernel has (op_kernels.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "core/backend.hpp"

namespace ferry::cuda {

class RescoreKernel {
 public:
  Status create(unsigned sm_count);
  // Enqueues the rescore on `stream`. The vectors may be pinned host memory (a staging lease or a
  // registered host buffer): the kernel reads it through unified addressing at the same address.
  Status record(const ops::RescoreArgs& args, std::span<const backend::Binding> bindings,
                cudaStream_t stream) const;
};

}  // namespace ferry::cuda
