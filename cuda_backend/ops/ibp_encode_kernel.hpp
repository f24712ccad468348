// ibp_encode on CUDA: the kernels of ibp_encode.cu, one launch per pass of the plan
// (ops/ibp_encode.hpp), in order on the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <span>

#include "core/backend.hpp"

namespace ferry::cuda {

class IbpEncodeKernel {
 public:
  Status create(unsigned sm_count);
  Status record(const ops::IbpEncodeArgs& args, std::span<const backend::Binding> bindings,
                cudaStream_t stream) const;

 private:
  unsigned max_blocks_ = 1;
};

}  // namespace ferry::cuda
