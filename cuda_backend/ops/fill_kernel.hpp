// fill on CUDA: the fill kernel (fill.cu) and how it is launched. The interface every op's CUDA
// kernel has (op_kernels.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "core/backend.hpp"

namespace ferry::cuda {

class FillKernel {
 public:
  // Once the device is open (it is current on the calling thread).
  Status create(unsigned sm_count);
  // Enqueues the fill on `stream`.
  Status record(const ops::FillArgs& args, std::span<const backend::Binding> bindings,
                cudaStream_t stream) const;

 private:
  unsigned max_blocks_ = 1;  // grid-stride grid cap
};

}  // namespace ferry::cuda
