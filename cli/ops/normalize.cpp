// `normalize`: uint8 NHWC image batches to NCHW float tensors with ImageNet mean/std. A size is
// a batch shape NxHxWxC, or bytes of uint8 input: rows of 1024 RGB pixels, as many as fit.
#include <algorithm>

#include "ops/op_case.hpp"

namespace ferry::cli {

Result<IngressOptions> normalize_ingress_options(const NormalizeParams& params,
                                                 std::uint32_t depth) {
  IngressOptions options;
  FERRY_ASSIGN_OR_RETURN(options.transform, normalize_transform(params));
  options.depth = depth;
  return options;
}

NormalizeParams imagenet_normalize_params(const BatchShape& shape, ElementType output) {
  // ImageNet statistics of 0..1 images, scaled to uint8 units; a fourth channel gets 0.5 / 0.25.
  constexpr double kMean[kMaxNormalizeChannels] = {0.485, 0.456, 0.406, 0.5};
  constexpr double kStd[kMaxNormalizeChannels] = {0.229, 0.224, 0.225, 0.25};
  NormalizeParams params;
  params.input = {.batch = shape[0], .height = shape[1], .width = shape[2], .channels = shape[3]};
  params.output_type = output;
  params.output_layout = ImageLayout::nchw;
  for (std::uint32_t c = 0; c < kMaxNormalizeChannels; ++c) {
    params.mean[c] = kMean[c] * 255.0;
    params.std[c] = kStd[c] * 255.0;
  }
  return params;
}

namespace {

Result<OpInstance> normalize_instance(const OpSize& size, std::string_view variant) {
  if (size.matrix) {
    return Status(ErrorCode::invalid_argument,
                  "normalize takes NxHxWxC batch shapes or bytes, not a ROWSxCOLS matrix");
  }
  constexpr std::uint32_t kRowBytes = 1024 * 3;
  const BatchShape shape = size.shape.value_or(BatchShape{
      1, static_cast<std::uint32_t>(std::max<std::uint64_t>(1, size.bytes / kRowBytes)), 1024, 3});
  const ElementType type = variant == "float16"    ? ElementType::float16
                           : variant == "bfloat16" ? ElementType::bfloat16
                                                   : ElementType::float32;
  const NormalizeParams params = imagenet_normalize_params(shape, type);
  FERRY_ASSIGN_OR_RETURN(NormalizeShape resolved, resolve_normalize(params));
  return OpInstance{to_string(shape), resolved.input_bytes, resolved.output_bytes,
                    resolved.elements() * (1 + element_size(type)),
                    [params](CommandList& commands, const Buffer& input, const Buffer& output) {
                      return ferry::normalize(commands, input, 0, output, 0, params);
                    }};
}

}  // namespace

const OpCase kNormalizeOp = {
    .name = "normalize",
    .summary =
        "uint8 NHWC images to NCHW float32, float16 and bfloat16 tensors with ImageNet "
        "mean/std; a size is a batch NxHxWxC, or bytes of uint8 input (rows of 1024 RGB "
        "pixels); bytes moved: 1 read and 4 or 2 written per element",
    .variants = "float32,float16,bfloat16",
    .default_sizes = "64x224x224x3,8x1080x1920x3",
    .quick_sizes = "2x64x64x3,1x9x7x4",
    .instance = normalize_instance,
};

}  // namespace ferry::cli
