// `binary_quantize`: float rows to packed binary codes (sign against 0, no thresholds: the
// common binarization of embeddings). A size is a matrix ROWSxDIMS, or bytes of float input:
// rows of 256 dimensions, as many as fit. The variant is the input element type.
#include <algorithm>

#include "ops/op_case.hpp"

namespace ferry::cli {

namespace {

constexpr std::uint32_t kDefaultDims = 256;

Result<OpInstance> binary_quantize_instance(const OpSize& size, std::string_view variant) {
  if (size.shape) {
    return Status(ErrorCode::invalid_argument,
                  "binary_quantize takes ROWSxDIMS matrices or bytes, not an NxHxWxC shape");
  }
  const ElementType type = variant == "float16"    ? ElementType::float16
                           : variant == "bfloat16" ? ElementType::bfloat16
                                                   : ElementType::float32;
  BinaryQuantizeParams params;
  params.input_type = type;
  if (size.matrix) {
    params.rows = (*size.matrix)[0];
    params.dims = (*size.matrix)[1];
  } else {
    const std::uint64_t row_bytes = std::uint64_t{kDefaultDims} * element_size(type);
    params.rows = static_cast<std::uint32_t>(
        std::clamp<std::uint64_t>(size.bytes / row_bytes, 1, UINT32_MAX));
    params.dims = kDefaultDims;
  }
  // Errors (dims above the maximum) come back as the size's reason for being skipped.
  FERRY_ASSIGN_OR_RETURN(const BinaryQuantizeShape shape, resolve_binary_quantize(params));
  return OpInstance{to_string(MatrixShape{params.rows, params.dims}), shape.input_bytes,
                    shape.output_bytes, shape.input_bytes + shape.output_bytes,
                    [params](CommandList& commands, const Buffer& input, const Buffer& output) {
                      return ferry::binary_quantize(commands, input, 0, output, 0, params);
                    }};
}

}  // namespace

const OpCase kBinaryQuantizeOp = {
    .name = "binary_quantize",
    .summary =
        "float32, float16 and bfloat16 rows to packed binary "
        "codes, 1 bit per dimension (x > 0), rows padded to 64 bits; a size is a matrix "
        "ROWSxDIMS, or bytes of input (rows of 256 dimensions); bytes moved: the input read and "
        "the codes written",
    .variants = "float32,float16,bfloat16",
    .variant_label = "input",
    .default_sizes = "1000000x256,100000x1024,1000000x100",
    .quick_sizes = "1000x256,37x1000",
    .instance = binary_quantize_instance,
};

}  // namespace ferry::cli
