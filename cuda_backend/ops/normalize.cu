// The normalize kernel (ops::NormalizeArgs): uint8 images to float32 / float16 / bfloat16 tensors.
// One instantiation per output type, output layout and channel count, so a thread's inner loops
// are fully unrolled and branch on none of them (vector or element stores is one branch per work
// item, the same in every thread). Packed 3-channel input to NCHW output (the common case: RGB
// images to a model) has its own kernel per output type and mirroring: word loads, several runs
// in flight per thread (normalize_packed_rgb_thread).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../kernels/launch_grid.cuh"
#include "normalize_thread.cuh"

namespace ferry::cuda {
namespace {

// fma with one rounding to nearest even, subnormals kept. Written as PTX because __fmaf_rn
// follows -ftz=true (it becomes fma.rn.ftz.f32, flushing subnormal results), and no build flag
// may change the op's bits.
__device__ inline float fma_rn(float a, float b, float c) {
  float result;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(result) : "f"(a), "f"(b), "f"(c));
  return result;
}

// Then round to nearest even for the 16-bit types (cvt.rn; overflow gives infinity). The results
// are bit-identical to the CPU reference's std::fma and to_float16_bits / to_bfloat16_bits.
template <NormalizeOutputType kType>
struct DeviceEncoder;

template <>
struct DeviceEncoder<NormalizeOutputType::float32> {
  __device__ static std::uint32_t bits(float value, float scale, float bias) {
    return __float_as_uint(fma_rn(value, scale, bias));
  }
};

template <>
struct DeviceEncoder<NormalizeOutputType::float16> {
  __device__ static std::uint32_t bits(float value, float scale, float bias) {
    return __half_as_ushort(__float2half_rn(fma_rn(value, scale, bias)));
  }
};

template <>
struct DeviceEncoder<NormalizeOutputType::bfloat16> {
  __device__ static std::uint32_t bits(float value, float scale, float bias) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(fma_rn(value, scale, bias)));
  }
};

// The arguments stay in the kernel parameter space (__grid_constant__: no per-thread copy), so
// scale[c] and bias[c] with c unrolled are constant-bank operands, not memory loads.
template <NormalizeOutputType kType, NormalizeOutputLayout kLayout, std::uint32_t kChannels>
__global__ void __launch_bounds__(kKernelBlockSize)
    normalize_kernel(const __grid_constant__ NormalizeKernelParams args) {
  const std::uint32_t thread = blockIdx.x * blockDim.x + threadIdx.x;
  normalize_thread<kType, kLayout, kChannels, DeviceEncoder<kType>>(args, thread);
}

// Threads an SM keeps resident, for the architecture being compiled: 2048 on the data-center
// parts, 1024 on Turing, 1536 on the others and on any this list does not know (asking for more
// than an SM holds is a ptxas warning, for fewer only caps the registers at 40). The host pass,
// which compiles no kernel code, takes 2048.
constexpr int kResidentThreadsPerSm =
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 900 || \
    __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030
    2048;
#elif __CUDA_ARCH__ == 750
    1024;
#else
    1536;
#endif

// Registers for a full SM of packed-RGB threads (at most 32 where 2048 are resident): what keeps
// the memory busy is bytes in flight, and a thread's are its batch's loads. (float32 spills a
// word or two around its stores at 32; that costs L1 traffic only.)
constexpr int kPackedRgbBlocksPerSm = kResidentThreadsPerSm / static_cast<int>(kKernelBlockSize);

template <NormalizeOutputType kType, bool kMirror>
__global__ void __launch_bounds__(kKernelBlockSize, kPackedRgbBlocksPerSm)
    normalize_packed_rgb_kernel(const __grid_constant__ NormalizeKernelParams args) {
  const std::uint32_t thread = blockIdx.x * blockDim.x + threadIdx.x;
  normalize_packed_rgb_thread<kType, kMirror, DeviceEncoder<kType>>(args, thread);
}

template <NormalizeOutputType kType>
cudaError_t enqueue_packed_rgb(const NormalizeKernelParams& args, bool mirror, unsigned blocks,
                               cudaStream_t stream) {
  if (mirror) {
    normalize_packed_rgb_kernel<kType, true><<<blocks, kKernelBlockSize, 0, stream>>>(args);
  } else {
    normalize_packed_rgb_kernel<kType, false><<<blocks, kKernelBlockSize, 0, stream>>>(args);
  }
  return cudaSuccess;
}

template <NormalizeOutputType kType, NormalizeOutputLayout kLayout>
cudaError_t enqueue_for_channels(const NormalizeKernelParams& args, std::uint32_t channels,
                                 unsigned blocks, cudaStream_t stream) {
  switch (channels) {
    case 1:
      normalize_kernel<kType, kLayout, 1><<<blocks, kKernelBlockSize, 0, stream>>>(args);
      return cudaSuccess;
    case 2:
      normalize_kernel<kType, kLayout, 2><<<blocks, kKernelBlockSize, 0, stream>>>(args);
      return cudaSuccess;
    case 3:
      normalize_kernel<kType, kLayout, 3><<<blocks, kKernelBlockSize, 0, stream>>>(args);
      return cudaSuccess;
    case 4:
      normalize_kernel<kType, kLayout, 4><<<blocks, kKernelBlockSize, 0, stream>>>(args);
      return cudaSuccess;
    default:
      return cudaErrorInvalidValue;
  }
}

template <NormalizeOutputType kType>
cudaError_t enqueue_for_layout(const NormalizeKernelParams& args, NormalizeOutputLayout layout,
                               std::uint32_t channels, unsigned blocks, cudaStream_t stream) {
  switch (layout) {
    case NormalizeOutputLayout::nchw:
      return enqueue_for_channels<kType, NormalizeOutputLayout::nchw>(args, channels, blocks,
                                                                      stream);
    case NormalizeOutputLayout::nhwc:
      return enqueue_for_channels<kType, NormalizeOutputLayout::nhwc>(args, channels, blocks,
                                                                      stream);
  }
  return cudaErrorInvalidValue;
}

template <NormalizeOutputType kType, NormalizeOutputLayout kLayout, std::uint32_t kChannels>
cudaError_t lower_to_resident_blocks(int* fewest) {
  int blocks = 0;
  const cudaError_t error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, normalize_kernel<kType, kLayout, kChannels>, kKernelBlockSize, 0);
  if (error == cudaSuccess && blocks < *fewest) *fewest = blocks;
  return error;
}

template <NormalizeOutputType kType, NormalizeOutputLayout kLayout>
cudaError_t lower_to_resident_blocks_for_channels(int* fewest) {
  cudaError_t error = lower_to_resident_blocks<kType, kLayout, 1>(fewest);
  if (error == cudaSuccess) error = lower_to_resident_blocks<kType, kLayout, 2>(fewest);
  if (error == cudaSuccess) error = lower_to_resident_blocks<kType, kLayout, 3>(fewest);
  if (error == cudaSuccess) error = lower_to_resident_blocks<kType, kLayout, 4>(fewest);
  return error;
}

template <NormalizeOutputType kType>
cudaError_t lower_to_resident_blocks_for_layouts(int* fewest) {
  cudaError_t error =
      lower_to_resident_blocks_for_channels<kType, NormalizeOutputLayout::nchw>(fewest);
  if (error == cudaSuccess) {
    error = lower_to_resident_blocks_for_channels<kType, NormalizeOutputLayout::nhwc>(fewest);
  }
  return error;
}

// Keeps blocks * kKernelBlockSize within 32 bits (thread indices are 32-bit).
constexpr unsigned kMaxNormalizeBlocks = 1u << 20;

// The packed-RGB grid: one batch of kNormalizePackedRuns runs per thread, so no thread loops and
// the block scheduler balances the SMs (a grid of resident blocks that each loop would leave some
// SMs idle while the rest finish a last, partial iteration).
unsigned packed_rgb_blocks(std::uint64_t work_items) {
  const std::uint64_t threads = (work_items + kNormalizePackedRuns - 1) / kNormalizePackedRuns;
  const std::uint64_t blocks = (threads + kKernelBlockSize - 1) / kKernelBlockSize;
  return static_cast<unsigned>(blocks < kMaxNormalizeBlocks ? blocks : kMaxNormalizeBlocks);
}

cudaError_t enqueue_packed_rgb_for_type(const NormalizeKernelParams& args, NormalizeOutputType type,
                                        bool mirror, unsigned blocks, cudaStream_t stream) {
  switch (type) {
    case NormalizeOutputType::float32:
      return enqueue_packed_rgb<NormalizeOutputType::float32>(args, mirror, blocks, stream);
    case NormalizeOutputType::float16:
      return enqueue_packed_rgb<NormalizeOutputType::float16>(args, mirror, blocks, stream);
    case NormalizeOutputType::bfloat16:
      return enqueue_packed_rgb<NormalizeOutputType::bfloat16>(args, mirror, blocks, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_normalize(const NormalizeKernelArgs& launch, unsigned max_blocks,
                             cudaStream_t stream) {
  (void)cudaGetLastError();  // see launch_fill
  if (!normalize_launch_valid(launch)) return cudaErrorInvalidValue;
  if (normalize_packed_rgb(launch)) {
    const unsigned blocks = packed_rgb_blocks(normalize_work_items(launch));
    const NormalizeKernelParams args = make_normalize_params(launch, blocks * kKernelBlockSize);
    const cudaError_t enqueued =
        enqueue_packed_rgb_for_type(args, launch.output_type, launch.mirror, blocks, stream);
    if (enqueued != cudaSuccess) return enqueued;
    return cudaGetLastError();
  }
  unsigned blocks = grid_blocks(normalize_work_items(launch), max_blocks);
  if (blocks > kMaxNormalizeBlocks) blocks = kMaxNormalizeBlocks;
  const NormalizeKernelParams args = make_normalize_params(launch, blocks * kKernelBlockSize);
  cudaError_t enqueued = cudaErrorInvalidValue;
  switch (launch.output_type) {
    case NormalizeOutputType::float32:
      enqueued = enqueue_for_layout<NormalizeOutputType::float32>(args, launch.output_layout,
                                                                  launch.channels, blocks, stream);
      break;
    case NormalizeOutputType::float16:
      enqueued = enqueue_for_layout<NormalizeOutputType::float16>(args, launch.output_layout,
                                                                  launch.channels, blocks, stream);
      break;
    case NormalizeOutputType::bfloat16:
      enqueued = enqueue_for_layout<NormalizeOutputType::bfloat16>(args, launch.output_layout,
                                                                   launch.channels, blocks, stream);
      break;
  }
  if (enqueued != cudaSuccess) return enqueued;
  return cudaGetLastError();
}

cudaError_t normalize_blocks_per_sm(unsigned* blocks) {
  int fewest = 1 << 30;
  cudaError_t error = lower_to_resident_blocks_for_layouts<NormalizeOutputType::float32>(&fewest);
  if (error == cudaSuccess) {
    error = lower_to_resident_blocks_for_layouts<NormalizeOutputType::float16>(&fewest);
  }
  if (error == cudaSuccess) {
    error = lower_to_resident_blocks_for_layouts<NormalizeOutputType::bfloat16>(&fewest);
  }
  if (error != cudaSuccess) return error;
  *blocks = fewest > 0 ? static_cast<unsigned>(fewest) : 1u;
  return cudaSuccess;
}

}  // namespace ferry::cuda
