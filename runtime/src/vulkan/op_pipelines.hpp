// Every op's Vulkan pipeline, generated from ops/op_list.hpp: vulkan::<Type>Pipeline for each
// listed op, so a listed op without one does not compile. Each has kNeeds (the optional device
// features its shader needs), create(context), destroy(), check(args, bindings) (record-time
// limits) and record(command_buffer, args, bindings). Adding an op: its include below.
#pragma once

#include <cstddef>
#include <tuple>

#include "ops/op_list.hpp"
#include "vulkan/context.hpp"
#include "vulkan/ops/binary_quantize.hpp"
#include "vulkan/ops/fill.hpp"
#include "vulkan/ops/hamming_topk.hpp"
#include "vulkan/ops/ibp_decode.hpp"
#include "vulkan/ops/ibp_encode.hpp"
#include "vulkan/ops/normalize.hpp"
#include "vulkan/ops/rescore.hpp"

namespace ferry::vulkan {

#define FERRY_VULKAN_PIPELINE(name, Type) , Type##Pipeline
// In list order: std::get<index of the op's kind>.
using OpPipelines = ops::ApplyToList<std::tuple, void FERRY_OP_LIST(FERRY_VULKAN_PIPELINE)>::type;
#undef FERRY_VULKAN_PIPELINE

// The pipeline that runs an op's arguments.
template <typename Args>
using PipelineFor = std::tuple_element_t<static_cast<std::size_t>(ops::kind_of<Args>()), OpPipelines>;

template <typename Args>
PipelineFor<Args>& pipeline_for(OpPipelines& pipelines) {
  return std::get<static_cast<std::size_t>(ops::kind_of<Args>())>(pipelines);
}
template <typename Args>
const PipelineFor<Args>& pipeline_for(const OpPipelines& pipelines) {
  return std::get<static_cast<std::size_t>(ops::kind_of<Args>())>(pipelines);
}

// The optional features each op needs, by kind.
inline constexpr DeviceFeatures kOpNeeds[] = {
#define FERRY_VULKAN_NEEDS(name, Type) Type##Pipeline::kNeeds,
    FERRY_OP_LIST(FERRY_VULKAN_NEEDS)
#undef FERRY_VULKAN_NEEDS
};

}  // namespace ferry::vulkan
