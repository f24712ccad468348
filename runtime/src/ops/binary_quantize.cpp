// binary_quantize: parameter validation, the public call (lowering to ops::BinaryQuantizeArgs)
// and the CPU reference.
#include "ferry/ops/binary_quantize.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "core/float_bits.hpp"
#include "core/op_record.hpp"
#include "ops/binary_quantize.hpp"

namespace ferry {

namespace {

constexpr const char* kParams = "binary_quantize";

Status invalid(const std::string& what) {
  return Status(ErrorCode::invalid_argument, std::string(kParams) + ": " + what);
}

bool known_type(ElementType type) {
  return type == ElementType::float32 || type == ElementType::float16 ||
         type == ElementType::bfloat16;
}

// invalid_argument unless `memory.base + offset` (the offset from the start of the memory, which
// is what the device sees) is a multiple of `alignment`.
Status check_alignment(const char* call, const BufferRef& memory, std::uint64_t offset,
                       std::uint64_t alignment, const char* role, const std::string& unit) {
  const std::uint64_t address = memory.base + offset;  // inside the memory: check_range passed
  if (address % alignment == 0) return Status();
  return Status(ErrorCode::invalid_argument,
                std::string(call) + ": " + role + " offset " + std::to_string(address) +
                    " is not a multiple of the " + std::to_string(alignment) + "-byte " + unit);
}

}  // namespace

Result<BinaryQuantizeShape> resolve_binary_quantize(const BinaryQuantizeParams& params) {
  if (params.rows == 0 || params.dims == 0) {
    return invalid("rows and dims must be > 0 (got " + std::to_string(params.rows) + "x" +
                   std::to_string(params.dims) + ")");
  }
  if (params.dims > kMaxBinaryQuantizeDims) {
    return invalid("dims " + std::to_string(params.dims) + " is above the maximum " +
                   std::to_string(kMaxBinaryQuantizeDims));
  }
  if (!known_type(params.input_type)) {
    return invalid("unknown input type " + std::to_string(static_cast<int>(params.input_type)));
  }
  const std::uint32_t element = element_size(params.input_type);
  BinaryQuantizeShape shape;
  shape.rows = params.rows;
  shape.dims = params.dims;
  shape.words_per_row = static_cast<std::uint32_t>(binary_code_bytes(params.dims) / 4);
  // dims <= 2^16: neither a row nor a code row can overflow; only the pitch times the rows can.
  const std::uint64_t row_bytes = std::uint64_t{params.dims} * element;
  shape.row_stride = params.row_pitch != 0 ? params.row_pitch : row_bytes;
  if (shape.row_stride < row_bytes) {
    return invalid("row_pitch " + std::to_string(params.row_pitch) + " is smaller than a row (" +
                   std::to_string(params.dims) + " " + std::string(to_string(params.input_type)) +
                   " elements: " + std::to_string(row_bytes) + " bytes)");
  }
  if (shape.row_stride % element != 0) {
    return invalid("row_pitch " + std::to_string(params.row_pitch) +
                   " is not a multiple of the " + std::to_string(element) + "-byte " +
                   std::string(to_string(params.input_type)) + " element");
  }
  const auto input_bytes = detail::checked_mul_add(shape.row_stride, params.rows - 1, row_bytes);
  const auto output_bytes = detail::checked_mul(params.rows, binary_code_bytes(params.dims));
  if (!input_bytes || !output_bytes) {
    return invalid("input size overflows 64 bits (rows " + std::to_string(params.rows) +
                   ", row_pitch " + std::to_string(params.row_pitch) + ")");
  }
  shape.input_bytes = *input_bytes;
  shape.output_bytes = *output_bytes;
  shape.threshold_bytes =
      params.thresholds.buffer != nullptr ? std::uint64_t{params.dims} * sizeof(float) : 0;
  return shape;
}

// ---- the public call ----

Status binary_quantize(CommandList& commands, const BufferRef& input, std::uint64_t input_offset,
                       const BufferRef& codes, std::uint64_t codes_offset,
                       const BinaryQuantizeParams& params) {
  static constexpr const char* kCall = "ferry::binary_quantize";
  // Parameter errors read "binary_quantize: ..." (resolve_binary_quantize's wording).
  FERRY_ASSIGN_OR_RETURN(const BinaryQuantizeShape shape, resolve_binary_quantize(params));
  const BufferRef* thresholds = params.thresholds.buffer;
  const std::uint64_t thresholds_offset = params.thresholds.offset;
  // Ranges first (they also catch released memory), so that the alignment checks below read
  // offsets that lie inside their memory.
  FERRY_RETURN_IF_ERROR(detail::check_range(input, kCall, "input", input_offset, shape.input_bytes));
  FERRY_RETURN_IF_ERROR(
      detail::check_range(codes, kCall, "codes", codes_offset, shape.output_bytes));
  if (thresholds != nullptr) {
    FERRY_RETURN_IF_ERROR(detail::check_range(*thresholds, kCall, "thresholds", thresholds_offset,
                                              shape.threshold_bytes));
  }
  // Every backend loads whole elements and stores whole 32-bit words (Vulkan storage buffers,
  // CUDA's typed loads), so each range starts on its unit.
  const std::uint32_t element = element_size(params.input_type);
  FERRY_RETURN_IF_ERROR(check_alignment(kCall, input, input_offset, element, "input",
                                        std::string(to_string(params.input_type)) + " element"));
  FERRY_RETURN_IF_ERROR(check_alignment(kCall, codes, codes_offset, 4, "codes", "code word"));
  if (thresholds != nullptr) {
    FERRY_RETURN_IF_ERROR(check_alignment(kCall, *thresholds, thresholds_offset, 4, "thresholds",
                                          "float32 threshold"));
  }
  ops::BinaryQuantizeArgs args;
  args.rows = shape.rows;
  args.dims = shape.dims;
  args.input_type = params.input_type;
  args.row_stride = shape.row_stride;
  args.has_thresholds = thresholds != nullptr;
  const detail::BindingRequest bindings[] = {
      {&input, input_offset, shape.input_bytes, backend::Access::read, "input"},
      {&codes, codes_offset, shape.output_bytes, backend::Access::write, "codes"},
      {thresholds, thresholds_offset, shape.threshold_bytes, backend::Access::read, "thresholds"}};
  return detail::OpRecorder::record(commands, kCall, args,
                                    std::span(bindings, thresholds != nullptr ? 3 : 2));
}

// ---- the CPU reference (integer code: no dependence on the host's float environment, whose
// denormals-are-zero mode another library in the process may have set) ----

namespace {

// float32 bits ordered as the values: for two non-NaN floats, a > b exactly when
// key(a) > key(b); -0 and +0 both map to 0.
std::int32_t order_key(std::uint32_t bits) {
  const auto magnitude = static_cast<std::int32_t>(bits & 0x7fffffffu);
  return (bits >> 31) != 0 ? -magnitude : magnitude;
}

bool is_nan(std::uint32_t bits) { return (bits & 0x7fffffffu) > 0x7f800000u; }

template <ElementType kType>
std::uint32_t element_bits(const std::byte* row, std::uint32_t j) {
  if constexpr (kType == ElementType::float32) {
    std::uint32_t bits;
    std::memcpy(&bits, row + std::size_t{j} * 4, 4);
    return bits;
  } else {
    std::uint16_t half;
    std::memcpy(&half, row + std::size_t{j} * 2, 2);
    return kType == ElementType::float16 ? detail::float16_to_float32_bits(half)
                                         : detail::bfloat16_to_float32_bits(half);
  }
}

template <ElementType kType>
void run(const ops::BinaryQuantizeArgs& args, const std::byte* input, std::byte* codes,
         const std::byte* thresholds) {
  const std::uint32_t dims = args.dims;
  const std::uint32_t words = args.words_per_row();
  // The thresholds once, as comparison keys; a NaN threshold can never be exceeded.
  std::vector<std::int32_t> keys(dims, 0);
  std::vector<bool> nan_threshold(dims, false);
  if (thresholds != nullptr) {
    for (std::uint32_t j = 0; j < dims; ++j) {
      std::uint32_t bits;
      std::memcpy(&bits, thresholds + std::size_t{j} * 4, 4);
      keys[j] = order_key(bits);
      nan_threshold[j] = is_nan(bits);
    }
  }
  for (std::uint64_t r = 0; r < args.rows; ++r) {
    const std::byte* row = input + r * args.row_stride;
    std::byte* code_row = codes + r * words * 4;
    for (std::uint32_t w = 0; w < words; ++w) {
      std::uint32_t word = 0;
      for (std::uint32_t b = 0; b < 32 && w * 32 + b < dims; ++b) {
        const std::uint32_t j = w * 32 + b;
        const std::uint32_t x = element_bits<kType>(row, j);
        if (!is_nan(x) && !nan_threshold[j] && order_key(x) > keys[j]) word |= 1u << b;
      }
      // Little-endian words, whatever the host's byte order.
      for (std::uint32_t k = 0; k < 4; ++k) {
        code_row[w * 4 + k] = static_cast<std::byte>((word >> (8 * k)) & 0xffu);
      }
    }
  }
}

}  // namespace

namespace ops {

void run_on_cpu(const BinaryQuantizeArgs& args, std::span<const std::span<std::byte>> bindings) {
  const std::byte* thresholds = args.has_thresholds ? bindings[2].data() : nullptr;
  switch (args.input_type) {
    case ElementType::float32:
      run<ElementType::float32>(args, bindings[0].data(), bindings[1].data(), thresholds);
      break;
    case ElementType::float16:
      run<ElementType::float16>(args, bindings[0].data(), bindings[1].data(), thresholds);
      break;
    case ElementType::bfloat16:
      run<ElementType::bfloat16>(args, bindings[0].data(), bindings[1].data(), thresholds);
      break;
  }
}

}  // namespace ops
}  // namespace ferry
