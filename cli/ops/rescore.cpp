// `rescore`: random queries against a random database, each query's candidates (10 per result,
// at most 4096, drawn at random from the rows, repeats included) ranked by exact scores, the best
// k kept. A size is QxNxDxK: queries, database rows, dims, k; the variant picks the vectors'
// element and the metric. Bytes moved count the candidates' rows the op reads (its real traffic:
// rows gathered at random), the queries, the candidate lists and the results.
#include <algorithm>
#include <cstring>
#include <string>

#include "bench_common.hpp"
#include "ops/op_case.hpp"

namespace ferry::cli {

namespace {

constexpr std::uint32_t kOversample = 10;  // candidates per result

Result<RescoreParams> params_of(const BatchShape& s, std::string_view variant) {
  RescoreParams params;
  params.element = variant.starts_with("int8") ? RescoreElement::int8 : RescoreElement::float32;
  params.metric = variant.ends_with("l2") ? RescoreMetric::l2 : RescoreMetric::inner_product;
  params.queries = s[0];
  params.database_rows = s[1];
  params.dims = s[2];
  params.k = s[3];
  params.candidates = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(std::uint64_t{s[3]} * kOversample, kRescoreMaxCandidates));
  if (params.k > kRescoreMaxK || params.dims > kRescoreMaxDims || params.k == 0 ||
      params.dims == 0 || params.queries == 0 || params.database_rows == 0) {
    return Status(ErrorCode::invalid_argument,
                  "rescore sizes need k from 1 to " + std::to_string(kRescoreMaxK) +
                      " and dims from 1 to " + std::to_string(kRescoreMaxDims));
  }
  return params;
}

Result<OpInstance> rescore_instance(const OpSize& size, std::string_view variant) {
  if (!size.shape) {
    return Status(ErrorCode::invalid_argument,
                  "rescore sizes are QxNxDxK (queries, database rows, dims, k)");
  }
  FERRY_ASSIGN_OR_RETURN(const RescoreParams params, params_of(*size.shape, variant));
  const std::uint64_t element = params.element == RescoreElement::float32 ? 4 : 1;
  const std::uint64_t row = params.dims * element;
  const std::uint64_t query_bytes = params.queries * row;
  const std::uint64_t database_at = query_bytes;
  const std::uint64_t candidates_at = round_up(database_at + params.database_rows * row, 4);
  const std::uint64_t candidate_count = std::uint64_t{params.queries} * params.candidates;
  const std::uint64_t input = candidates_at + candidate_count * 4;
  const std::uint64_t output = 2 * std::uint64_t{params.queries} * params.k * 4;
  const std::uint64_t moved = query_bytes + candidate_count * (row + 4) + output;
  const std::string label = std::to_string(params.queries) + "x" +
                            std::to_string(params.database_rows) + " " +
                            std::to_string(params.dims) + "-dim k" + std::to_string(params.k) +
                            " of " + std::to_string(params.candidates);
  OpInstance instance{label, input, output, moved,
                      [params, database_at, candidates_at, output](
                          CommandList& commands, const Buffer& in, const Buffer& out) {
                        return ferry::rescore(commands,
                                              {in, 0, in, database_at, in, candidates_at, out, 0,
                                               out, output / 2},
                                              params);
                      }};
  // Floats in [-1, 1) (random bits would be NaNs and infinities often), candidates in range.
  instance.shape_input = [params, candidates_at](std::span<std::byte> bytes) {
    if (params.element == RescoreElement::float32) {
      for (std::uint64_t at = 0; at + 4 <= candidates_at; at += 4) {
        std::uint32_t bits;
        std::memcpy(&bits, bytes.data() + at, 4);
        const float value = static_cast<float>(bits >> 8) * 0x1p-23f - 1.0f;
        std::memcpy(bytes.data() + at, &value, 4);
      }
    }
    for (std::uint64_t at = candidates_at; at + 4 <= bytes.size(); at += 4) {
      std::uint32_t bits;
      std::memcpy(&bits, bytes.data() + at, 4);
      const auto index = static_cast<std::uint32_t>(bits % params.database_rows);
      std::memcpy(bytes.data() + at, &index, 4);
    }
  };
  return instance;
}

}  // namespace

const OpCase kRescoreOp = {
    .name = "rescore",
    .summary = "exact re-ranking of each query's candidate rows (ferry::rescore) on random "
               "vectors, 10 random candidates per result (at most 4096); a size is QxNxDxK "
               "(queries, database rows, dims, k); the op's time per rescore is the figure",
    .variants = "float32-ip,float32-l2,int8-ip,int8-l2",
    .variant_label = "vectors",
    .default_sizes = "1000x100000x768x10,1000x100000x768x100,100x100000x1024x400",
    .quick_sizes = "16x20000x128x10",
    .instance = rescore_instance,
};

}  // namespace ferry::cli
