// ibp_decode on CUDA: the ibp_decode kernel (ibp_decode.cu) and how it is launched. The interface
// every op's CUDA kernel has (op_kernels.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "core/backend.hpp"

namespace ferry::cuda {

class IbpDecodeKernel {
 public:
  // Once the device is open (it is current on the calling thread): the grid cap.
  Status create(unsigned sm_count);
  // Enqueues the status clear and the decode on `stream`. The stream may be pinned host memory
  // (a lease): the kernel reads it in place through unified addressing (zero-copy).
  Status record(const ops::IbpDecodeArgs& args, std::span<const backend::Binding> bindings,
                cudaStream_t stream) const;

 private:
  unsigned max_blocks_ = 1;
};

}  // namespace ferry::cuda
