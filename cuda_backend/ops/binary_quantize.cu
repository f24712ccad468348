// The binary_quantize kernel (ops::BinaryQuantizeArgs): float32 / float16 / bfloat16 rows to
// packed binary codes. One instantiation per input type, with or without thresholds, vector or
// element loads, so a thread's loops are unrolled and branch on none of them.
#include <cstdint>

#include "../kernels/launch_grid.cuh"
#include "binary_quantize_thread.cuh"

namespace ferry::cuda {
namespace {

// The arguments stay in the kernel parameter space (__grid_constant__: no per-thread copy).
template <BinaryQuantizeInputType kType, bool kThresholds, bool kVector>
__global__ void __launch_bounds__(kKernelBlockSize)
    binary_quantize_kernel(const __grid_constant__ BinaryQuantizeKernelParams params) {
  const std::uint64_t thread =
      static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  binary_quantize_thread<kType, kThresholds, kVector>(params, thread);
}

template <BinaryQuantizeInputType kType, bool kThresholds>
void enqueue_for_loads(const BinaryQuantizeKernelParams& params, bool vector, unsigned blocks,
                       cudaStream_t stream) {
  if (vector) {
    binary_quantize_kernel<kType, kThresholds, true>
        <<<blocks, kKernelBlockSize, 0, stream>>>(params);
  } else {
    binary_quantize_kernel<kType, kThresholds, false>
        <<<blocks, kKernelBlockSize, 0, stream>>>(params);
  }
}

template <BinaryQuantizeInputType kType>
void enqueue_for_thresholds(const BinaryQuantizeKernelParams& params, bool vector,
                            unsigned blocks, cudaStream_t stream) {
  if (params.thresholds != nullptr) {
    enqueue_for_loads<kType, true>(params, vector, blocks, stream);
  } else {
    enqueue_for_loads<kType, false>(params, vector, blocks, stream);
  }
}

}  // namespace

cudaError_t launch_binary_quantize(const BinaryQuantizeKernelArgs& launch, unsigned max_blocks,
                                   cudaStream_t stream) {
  (void)cudaGetLastError();  // see launch_fill
  if (!binary_quantize_launch_valid(launch)) return cudaErrorInvalidValue;
  const std::uint64_t items =
      std::uint64_t{launch.rows} * binary_quantize_words_per_row(launch.dims);
  const unsigned blocks = grid_blocks(items, max_blocks);
  const BinaryQuantizeKernelParams params =
      make_binary_quantize_params(launch, std::uint64_t{blocks} * kKernelBlockSize);
  const bool vector = binary_quantize_vector_loads(launch);
  switch (launch.input_type) {
    case BinaryQuantizeInputType::float32:
      enqueue_for_thresholds<BinaryQuantizeInputType::float32>(params, vector, blocks, stream);
      break;
    case BinaryQuantizeInputType::float16:
      enqueue_for_thresholds<BinaryQuantizeInputType::float16>(params, vector, blocks, stream);
      break;
    case BinaryQuantizeInputType::bfloat16:
      enqueue_for_thresholds<BinaryQuantizeInputType::bfloat16>(params, vector, blocks, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace ferry::cuda
