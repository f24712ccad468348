#include "normalize_kernel.hpp"

#include <algorithm>
#include <string>

#include "../buffer.hpp"
#include "core/checked.hpp"
#include "../kernels/launch.hpp"
#include "normalize_launch.hpp"
#include "../status.hpp"

namespace ferry::cuda {

Status NormalizeKernel::create(unsigned sm_count) {
  // A tuning query: if it fails (say no kernel image for this GPU), the device still opens, and
  // a normalize launch reports the same error with its context.
  unsigned blocks = kBlocksPerSm;
  if (normalize_blocks_per_sm(&blocks) != cudaSuccess) {
    blocks = kBlocksPerSm;
    (void)cudaGetLastError();
  }
  max_blocks_ = sm_count * std::min(blocks, kBlocksPerSm);
  return Status();
}

Status NormalizeKernel::record(const ops::NormalizeArgs& normalize,
                               std::span<const backend::Binding> bindings,
                               cudaStream_t stream) const {
  // Core validated the command; these keep a bad one from becoming out-of-bounds accesses.
  if (normalize.batch == 0 || normalize.height == 0 || normalize.width == 0 ||
      normalize.channels == 0 || normalize.channels > kNormalizeMaxChannels) {
    return Status(ErrorCode::internal,
                  "CUDA: normalize shape " + std::to_string(normalize.batch) + "x" +
                      std::to_string(normalize.channels) + "x" + std::to_string(normalize.height) +
                      "x" + std::to_string(normalize.width) + " (n x c x h x w) is invalid");
  }
  FERRY_ASSIGN_OR_RETURN(std::byte* const src, binding_address(bindings[0], "normalize source"));
  FERRY_ASSIGN_OR_RETURN(std::byte* const dst,
                         binding_address(bindings[1], "normalize destination"));
  if (!detail::range_within(normalize.first_read, normalize.input_span(), bindings[0].size) ||
      normalize.output_bytes() > bindings[1].size) {
    return Status(ErrorCode::internal, "CUDA: normalize reads or writes outside its bindings");
  }
  NormalizeKernelArgs launch;
  launch.src = src + normalize.first_read;
  launch.dst = dst;
  launch.batch = normalize.batch;
  launch.channels = normalize.channels;
  launch.height = normalize.height;
  launch.width = normalize.width;
  launch.image_stride = normalize.image_stride;
  launch.channel_stride = normalize.channel_stride;
  launch.row_stride = normalize.row_stride;
  launch.pixel_stride = normalize.pixel_stride;
  launch.mirror = normalize.mirror;
  switch (normalize.output_type) {
    case ElementType::float32: launch.output_type = NormalizeOutputType::float32; break;
    case ElementType::float16: launch.output_type = NormalizeOutputType::float16; break;
    case ElementType::bfloat16: launch.output_type = NormalizeOutputType::bfloat16; break;
  }
  switch (normalize.output_layout) {
    case ImageLayout::nchw: launch.output_layout = NormalizeOutputLayout::nchw; break;
    case ImageLayout::nhwc: launch.output_layout = NormalizeOutputLayout::nhwc; break;
  }
  for (std::uint32_t c = 0; c < normalize.channels; ++c) {
    launch.scale[c] = normalize.scale[c];
    launch.bias[c] = normalize.bias[c];
  }
  const cudaError_t error = launch_normalize(launch, max_blocks_, stream);
  if (error != cudaSuccess) return cuda_status(error, "launch_normalize (normalize kernel)");
  return Status();
}

}  // namespace ferry::cuda
