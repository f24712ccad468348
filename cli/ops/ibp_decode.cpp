// `ibp_decode`: an IBP stream (encoded on the host when the size is set up) decoded into its
// tensor. A size is bytes of decoded tensor in rows of 4096 elements, or a matrix ROWSxR of
// elements; the variant picks the element type and a family with its typical statistics. The
// output buffer holds the tensor, then the status word.
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "ops/op_case.hpp"

namespace ferry::cli {

namespace {

constexpr std::uint64_t kDefaultRowElements = 4096;

// `elements` elements of `size` bytes: uint8 small ints, bf16 weights ~ N(0, 0.02), float32 ReLU
// activations (half zeros), int64 ids below 2^24.
std::vector<std::byte> make_tensor(std::string_view variant, unsigned size, std::uint64_t elements) {
  std::vector<std::byte> bytes(elements * size);
  std::mt19937_64 rng(0x1b9);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (std::uint64_t i = 0; i < elements; ++i) {
    std::uint64_t x = 0;
    if (variant == "uint8") {
      x = rng() % 16;
    } else if (variant == "bfloat16") {
      const float value = normal(rng);
      std::uint32_t bits;
      std::memcpy(&bits, &value, 4);
      x = bits >> 16;
    } else if (variant == "float32") {
      const float value = std::max(0.0f, normal(rng) * 50);
      std::uint32_t bits;
      std::memcpy(&bits, &value, 4);
      x = bits;
    } else {
      x = rng() & ((std::uint64_t{1} << 24) - 1);
    }
    std::memcpy(bytes.data() + i * size, &x, size);  // little-endian hosts
  }
  return bytes;
}

Result<OpInstance> ibp_decode_instance(const OpSize& size, std::string_view variant) {
  if (size.shape) {
    return Status(ErrorCode::invalid_argument,
                  "ibp_decode takes ROWSxR matrices or bytes, not an NxHxWxC shape");
  }
  const unsigned element = variant == "uint8" ? 1 : variant == "bfloat16" ? 2
                           : variant == "float32" ? 4 : 8;
  ibp::EncodeParams encode;
  encode.element_size = static_cast<std::uint8_t>(element);
  if (size.matrix) {
    encode.row_elements = (*size.matrix)[1];
    encode.elements = std::uint64_t{(*size.matrix)[0]} * (*size.matrix)[1];
  } else {
    encode.row_elements = kDefaultRowElements;
    encode.elements = std::max<std::uint64_t>(size.bytes / element / 4 * 4, 4);
  }
  // The status word right after the tensor: no byte of the output is left unwritten.
  if (encode.elements * element % 4 != 0) {
    return Status(ErrorCode::invalid_argument,
                  "ibp_decode: the bench's tensors are a multiple of 4 bytes");
  }
  const std::vector<std::byte> tensor = make_tensor(variant, element, encode.elements);
  FERRY_ASSIGN_OR_RETURN(std::vector<std::byte> encoded, ibp::encode(tensor, encode));
  auto stream = std::make_shared<const std::vector<std::byte>>(std::move(encoded));
  FERRY_ASSIGN_OR_RETURN(const ibp::Layout layout, ibp::read_layout(*stream));
  IbpDecodeParams params;
  params.layout = layout;
  const std::uint64_t tensor_bytes = layout.raw_bytes();
  const std::uint64_t status_offset = tensor_bytes;
  OpInstance instance{to_string(MatrixShape{static_cast<std::uint32_t>(layout.rows),
                                            static_cast<std::uint32_t>(layout.row_elements)}) +
                          " (ratio " + std::to_string(double(tensor_bytes) / double(stream->size())).substr(0, 4) + ")",
                      stream->size(), status_offset + 4, 2 * tensor_bytes,
                      [params, status_offset](CommandList& commands, const Buffer& input,
                                              const Buffer& output) {
                        // No gather: the indices are not read (the stream stands in).
                        const IbpDecodeBuffers buffers{input,  0, input,  0,
                                                       output, 0, output, status_offset};
                        return ferry::ibp_decode(commands, buffers, params);
                      }};
  instance.shape_input = [stream](std::span<std::byte> input) {
    std::memcpy(input.data(), stream->data(), std::min(input.size(), stream->size()));
  };
  return instance;
}

}  // namespace

const OpCase kIbpDecodeOp = {
    .name = "ibp_decode",
    .summary =
        "an IBP stream (docs/IBP_FORMAT.md, encoded on the host) decoded into its tensor; a size "
        "is bytes of tensor in rows of 4096 elements, or a matrix ROWSxR of elements; bytes "
        "moved: the tensor counted twice, so that the copy it is timed against is a "
        "device-to-device copy of the tensor (op GB/s / 2 is the decoded GB/s)",
    .variants = "uint8,bfloat16,float32,int64",
    .variant_label = "tensor",
    .default_sizes = "16M,256M,1G",
    .quick_sizes = "1M,37x1000",
    .instance = ibp_decode_instance,
};

}  // namespace ferry::cli
