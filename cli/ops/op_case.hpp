// The ops `ferry bench op` knows, one small file each (fill.cpp, normalize.cpp, ...): how to make an
// op's input for a size, how to record it, the bytes it moves. The list is kOps in bench_op.cpp;
// adding an op is its file, its k<Op>Op declaration below and one line there.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "ferry/ferry.hpp"
#include "options.hpp"

namespace ferry::cli {

// One op at one size and variant, ready to record.
struct OpInstance {
  std::string label;              // "64x224x224x3", "16 MiB"
  std::uint64_t input_bytes = 0;  // 0: the op reads no buffer
  std::uint64_t output_bytes = 0;
  std::uint64_t bytes_moved = 0;  // per command: bytes read + bytes written
  // Records the op reading `input` (an empty Buffer when input_bytes is 0), writing `output`.
  std::function<Status(CommandList&, const Buffer& input, const Buffer& output)> record;
  // Turns the random input bytes into what the op needs (indices in range, values in a range);
  // none: the random bytes as they are.
  std::function<void(std::span<std::byte> input)> shape_input = {};
};

struct OpCase {
  std::string_view name = {};           // as `ferry bench op` takes it
  std::string_view summary = {};        // for --help: what is measured, what a size means
  std::string_view variants = {};       // comma-separated ("float32,float16"); empty: one
  std::string_view variant_label = "output";  // what a variant picks (the help, the tables)
  std::string_view default_sizes = {};  // as --sizes takes them
  std::string_view quick_sizes = {};
  Result<OpInstance> (*instance)(const OpSize& size, std::string_view variant) = nullptr;
};

extern const OpCase kFillOp, kNormalizeOp, kBinaryQuantizeOp, kHammingTopkOp, kRescoreOp;
extern const OpCase kIbpDecodeOp;
extern const OpCase kIbpEncodeOp;

// An IngressPipeline's options that normalize each batch with `params`.
Result<IngressOptions> normalize_ingress_options(const NormalizeParams& params,
                                                 std::uint32_t depth);

// uint8 NHWC in, `output` NCHW out, ImageNet mean and std in uint8 units (0.485 * 255, ...).
NormalizeParams imagenet_normalize_params(const BatchShape& shape, ElementType output);

}  // namespace ferry::cli
