#include "binary_quantize_kernel.hpp"

#include <string>

#include "../buffer.hpp"
#include "../kernels/launch.hpp"
#include "../status.hpp"
#include "binary_quantize_launch.hpp"
#include "ferry/ops/binary_quantize.hpp"

namespace ferry::cuda {

Status BinaryQuantizeKernel::create(unsigned sm_count) {
  max_blocks_ = sm_count * kBlocksPerSm;
  return Status();
}

Status BinaryQuantizeKernel::record(const ops::BinaryQuantizeArgs& args,
                                    std::span<const backend::Binding> bindings,
                                    cudaStream_t stream) const {
  // Core validated the command; these keep a bad one from becoming out-of-bounds accesses.
  if (args.rows == 0 || args.dims == 0 || args.dims > kMaxBinaryQuantizeDims ||
      bindings.size() != (args.has_thresholds ? 3u : 2u)) {
    return Status(ErrorCode::internal, "CUDA: binary_quantize of " + std::to_string(args.rows) +
                                           "x" + std::to_string(args.dims) + " with " +
                                           std::to_string(bindings.size()) +
                                           " bindings is invalid");
  }
  if (args.input_bytes() > bindings[0].size || args.output_bytes() > bindings[1].size ||
      (args.has_thresholds && std::uint64_t{args.dims} * 4 > bindings[2].size)) {
    return Status(ErrorCode::internal,
                  "CUDA: binary_quantize reads or writes outside its bindings");
  }
  FERRY_ASSIGN_OR_RETURN(std::byte* const input,
                         binding_address(bindings[0], "binary_quantize input"));
  FERRY_ASSIGN_OR_RETURN(std::byte* const codes,
                         binding_address(bindings[1], "binary_quantize codes"));
  std::byte* thresholds = nullptr;
  if (args.has_thresholds) {
    FERRY_ASSIGN_OR_RETURN(thresholds,
                           binding_address(bindings[2], "binary_quantize thresholds"));
  }
  BinaryQuantizeKernelArgs launch;
  launch.input = input;
  launch.codes = codes;
  launch.thresholds = thresholds;
  launch.rows = args.rows;
  launch.dims = args.dims;
  launch.row_stride = args.row_stride;
  switch (args.input_type) {
    case ElementType::float32: launch.input_type = BinaryQuantizeInputType::float32; break;
    case ElementType::float16: launch.input_type = BinaryQuantizeInputType::float16; break;
    case ElementType::bfloat16: launch.input_type = BinaryQuantizeInputType::bfloat16; break;
  }
  const cudaError_t error = launch_binary_quantize(launch, max_blocks_, stream);
  if (error != cudaSuccess) {
    return cuda_status(error, "launch_binary_quantize (binary_quantize kernel)");
  }
  return Status();
}

}  // namespace ferry::cuda
