// `ibp_encode`: a tensor to its IBP stream on the device (docs/IBP_FORMAT.md). A size is a matrix
// ROWSxELEMENTS, or bytes of input: rows of 1024 elements, as many as fit; groups of 1024 rows.
// The input is small integers with a few outliers (ids, indices: a compressible tensor); the
// variant is the element type. Bytes moved: the input read and the largest stream written.
// Each command is a fill of the output (zeros past the stream, for the check) and the encode.
#include <algorithm>
#include <cstring>
#include <random>

#include "ops/op_case.hpp"

namespace ferry::cli {

namespace {

constexpr std::uint64_t kDefaultRowElements = 1024;
constexpr std::uint32_t kGroupRows = 1024;

Result<OpInstance> ibp_encode_instance(const OpSize& size, std::string_view variant) {
  if (size.shape) {
    return Status(ErrorCode::invalid_argument,
                  "ibp_encode takes ROWSxELEMENTS matrices or bytes, not an NxHxWxC shape");
  }
  ibp::EncodeParams params;
  params.element_size = variant == "int64" ? 8 : variant == "int16" ? 2 : variant == "uint8" ? 1 : 4;
  params.group_rows = kGroupRows;
  if (size.matrix) {
    params.row_elements = (*size.matrix)[1];
    params.elements = std::uint64_t{(*size.matrix)[0]} * (*size.matrix)[1];
  } else {
    params.row_elements = kDefaultRowElements;
    params.elements = std::max<std::uint64_t>(size.bytes / params.element_size / kDefaultRowElements, 1) *
                      kDefaultRowElements;
  }
  FERRY_ASSIGN_OR_RETURN(const std::uint64_t stream_bytes, ibp::max_stream_bytes(params));
  const std::uint64_t input_bytes = params.elements * params.element_size;
  OpInstance instance{
      to_string(MatrixShape{static_cast<std::uint32_t>(params.elements / params.row_elements),
                            static_cast<std::uint32_t>(params.row_elements)}),
      input_bytes, stream_bytes, input_bytes + stream_bytes,
      [params, stream_bytes](CommandList& commands, const Buffer& input, const Buffer& output) {
        // The op leaves the bytes past the stream as they were, and the stream's length depends
        // on the data: zero the output first so that the whole of it compares with the CPU's
        // (a fill at copy speed, a few percent of the encode's time).
        FERRY_RETURN_IF_ERROR(ferry::fill(commands, output, 0, stream_bytes, 0));
        return ferry::ibp_encode(commands, {input, 0, output, 0}, params);
      }};
  const unsigned es = params.element_size;
  instance.shape_input = [es](std::span<std::byte> input) {
    // Values below 4096, one in a hundred anything: the random bytes pick which and what.
    for (std::size_t at = 0; at + es <= input.size(); at += es) {
      const bool outlier = static_cast<unsigned>(input[at]) < 3;
      if (outlier) continue;
      for (unsigned b = 1; b < es; ++b) input[at + b] = b == 1 ? (input[at + b] & std::byte{0x0f}) : std::byte{0};
    }
  };
  return instance;
}

}  // namespace

const OpCase kIbpEncodeOp = {
    .name = "ibp_encode",
    .summary =
        "a tensor to its IBP stream (docs/IBP_FORMAT.md) in groups of 1024 rows; input: small "
        "integers with 1% outliers; a size is a matrix ROWSxELEMENTS, or bytes of input (rows of "
        "1024 elements); bytes moved: the input read and the largest stream written",
    .variants = "int32,int64,int16,uint8",
    .variant_label = "element",
    .default_sizes = "65536x1024,1000000x128",
    .quick_sizes = "100x1000,37x129",
    .instance = ibp_encode_instance,
};

}  // namespace ferry::cli
