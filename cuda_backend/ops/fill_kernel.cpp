#include "fill_kernel.hpp"

#include "../buffer.hpp"
#include "../kernels/launch.hpp"
#include "fill_launch.hpp"
#include "../status.hpp"

namespace ferry::cuda {

Status FillKernel::create(unsigned sm_count) {
  max_blocks_ = sm_count * kBlocksPerSm;
  return Status();
}

Status FillKernel::record(const ops::FillArgs& args, std::span<const backend::Binding> bindings,
                          cudaStream_t stream) const {
  FERRY_ASSIGN_OR_RETURN(std::byte* const dst, binding_address(bindings[0], "fill destination"));
  const cudaError_t error = launch_fill(dst, bindings[0].size, args.pattern, max_blocks_, stream);
  if (error != cudaSuccess) return cuda_status(error, "launch_fill (fill kernel)");
  return Status();
}

}  // namespace ferry::cuda
