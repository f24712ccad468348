// Every op's CUDA kernel, generated from ops/op_list.hpp: cuda::<Type>Kernel for each listed op,
// so a listed op without one does not compile. Each has create(sm_count) and
// record(args, bindings, stream). Adding an op: its include below.
#pragma once

#include <cstddef>
#include <tuple>

#include "ops/binary_quantize_kernel.hpp"
#include "ops/fill_kernel.hpp"
#include "ops/hamming_topk_kernel.hpp"
#include "ops/ibp_decode_kernel.hpp"
#include "ops/ibp_encode_kernel.hpp"
#include "ops/normalize_kernel.hpp"
#include "ops/op_list.hpp"
#include "ops/rescore_kernel.hpp"

namespace ferry::cuda {

#define FERRY_CUDA_KERNEL(name, Type) , Type##Kernel
// In list order: std::get<index of the op's kind>.
using OpKernels = ops::ApplyToList<std::tuple, void FERRY_OP_LIST(FERRY_CUDA_KERNEL)>::type;
#undef FERRY_CUDA_KERNEL

// The kernel that runs an op's arguments.
template <typename Args>
const auto& kernel_for(const OpKernels& kernels) {
  return std::get<static_cast<std::size_t>(ops::kind_of<Args>())>(kernels);
}

}  // namespace ferry::cuda
