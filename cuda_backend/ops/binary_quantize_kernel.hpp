// binary_quantize on CUDA: the binary_quantize kernel (binary_quantize.cu) and how it is
// launched. The interface every op's CUDA kernel has (op_kernels.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "core/backend.hpp"

namespace ferry::cuda {

class BinaryQuantizeKernel {
 public:
  // Once the device is open (it is current on the calling thread): the grid cap.
  Status create(unsigned sm_count);
  // Enqueues the binary_quantize on `stream`. The input and thresholds may be pinned host memory
  // (a staging lease): the kernel reads it through unified addressing at the same address.
  Status record(const ops::BinaryQuantizeArgs& args, std::span<const backend::Binding> bindings,
                cudaStream_t stream) const;

 private:
  unsigned max_blocks_ = 1;  // grid-stride grid cap
};

}  // namespace ferry::cuda
