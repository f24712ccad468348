// `hamming_topk`: random query codes against random database codes, the k nearest of each. A size
// is QxNxBITSxK: queries, database rows, bits per code, k. The copy it is held against moves as
// many bytes (codes read, results written), which says little about a search, whose cost is the
// q * n distances: the op's own time is the figure to read (`ferry bench search` will have the
// baselines that matter).
#include "ops/op_case.hpp"

namespace ferry::cli {

namespace {

Result<OpInstance> hamming_instance(const OpSize& size, std::string_view) {
  if (!size.shape) {
    return Status(ErrorCode::invalid_argument,
                  "hamming_topk sizes are QxNxBITSxK (queries, rows, bits per code, k)");
  }
  const BatchShape& s = *size.shape;
  const HammingTopkParams params{s[2], s[0], s[1], s[3]};
  const std::uint64_t code_bytes = params.code_bits / 8;
  const std::uint64_t query_bytes = std::uint64_t{params.queries} * code_bytes;
  const std::uint64_t input = query_bytes + params.database_rows * code_bytes;
  const std::uint64_t output = 2ull * params.queries * params.k * 4;
  const std::string label = std::to_string(s[0]) + "x" + std::to_string(s[1]) + " " +
                            std::to_string(s[2]) + "-bit k" + std::to_string(s[3]);
  return OpInstance{label, input, output, input + output,
                    [params, query_bytes, output](CommandList& commands, const Buffer& in,
                                                  const Buffer& out) {
                      return ferry::hamming_topk(
                          commands, {in, 0, in, query_bytes, out, 0, out, output / 2}, params);
                    }};
}

}  // namespace

const OpCase kHammingTopkOp = {
    .name = "hamming_topk",
    .summary = "the k nearest database codes of each query code by Hamming distance "
               "(ferry::hamming_topk) on random codes; a size is QxNxBITSxK (queries, database "
               "rows, bits per code, k); the op's time per search is the figure",
    .default_sizes = "1000x1000000x256x10,1000x1000000x256x100,100x1000000x1024x10",
    .quick_sizes = "16x20000x256x10",
    .instance = hamming_instance,
};

}  // namespace ferry::cli
