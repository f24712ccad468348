// normalize on CUDA: the normalize kernels (normalize.cu) and how they are launched.
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "core/backend.hpp"

namespace ferry::cuda {

class NormalizeKernel {
 public:
  // Once the device is open (it is current on the calling thread): the grid cap, as many blocks
  // as are resident at once.
  Status create(unsigned sm_count);
  // Enqueues the normalize on `stream`. Either binding may be pinned host memory (a staging
  // lease): the kernel reads it through unified addressing at the same address.
  Status record(const ops::NormalizeArgs& args, std::span<const backend::Binding> bindings,
                cudaStream_t stream) const;

 private:
  unsigned max_blocks_ = 1;
};

}  // namespace ferry::cuda
