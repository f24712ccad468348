// `fill`: a 32-bit pattern written over the whole buffer; a size is the bytes written.
#include "ops/op_case.hpp"
#include "report.hpp"

namespace ferry::cli {

namespace {

Result<OpInstance> fill_instance(const OpSize& size, std::string_view) {
  const std::uint64_t bytes = size.bytes;
  return OpInstance{format_bytes(bytes), 0, bytes, bytes,
                    [bytes](CommandList& commands, const Buffer&, const Buffer& output) {
                      return ferry::fill(commands, output, 0, bytes, 0xC0FFEE11u);
                    }};
}

}  // namespace

const OpCase kFillOp = {
    .name = "fill",
    .summary =
        "a 32-bit pattern written over a device buffer (ferry::fill); a size is "
        "the bytes written, which are all it moves",
    .default_sizes = "64K,1M,16M,256M",
    .quick_sizes = "64K,1M",
    .instance = fill_instance,
};

}  // namespace ferry::cli
