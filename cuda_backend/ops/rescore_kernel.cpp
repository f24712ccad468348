#include "rescore_kernel.hpp"

#include <string>

#include "../buffer.hpp"
#include "../status.hpp"
#include "ops/rescore.hpp"
#include "rescore_launch.hpp"

namespace ferry::cuda {

static_assert(kRescoreSlotCount == ops::kRescoreSlots);

Status RescoreKernel::create(unsigned) { return Status(); }

Status RescoreKernel::record(const ops::RescoreArgs& args,
                             std::span<const backend::Binding> bindings,
                             cudaStream_t stream) const {
  if (bindings.size() != 5) {
    return Status(ErrorCode::internal,
                  "CUDA: rescore with " + std::to_string(bindings.size()) + " bindings");
  }
  const char* roles[] = {"rescore queries", "rescore database", "rescore candidates",
                         "rescore scores", "rescore indices"};
  std::byte* addresses[5] = {};
  for (int i = 0; i < 5; ++i) {
    FERRY_ASSIGN_OR_RETURN(addresses[i], binding_address(bindings[i], roles[i]));
  }
  RescoreLaunch launch;
  launch.queries = reinterpret_cast<const unsigned char*>(addresses[0]);
  launch.database = reinterpret_cast<const unsigned char*>(addresses[1]);
  launch.candidates = reinterpret_cast<const std::uint32_t*>(addresses[2]);
  launch.scores = reinterpret_cast<std::uint32_t*>(addresses[3]);
  launch.indices = reinterpret_cast<std::uint32_t*>(addresses[4]);
  launch.query_stride = args.query_stride;
  launch.database_stride = args.database_stride;
  launch.int8 = args.element == RescoreElement::int8;
  launch.l2 = args.metric == RescoreMetric::l2;
  launch.dims = args.dims;
  launch.queries_count = args.queries;
  launch.rows = args.rows;
  launch.candidates_count = args.candidates;
  launch.k = args.k;
  const cudaError_t error = launch_rescore(launch, stream);
  if (error != cudaSuccess) return cuda_status(error, "launch_rescore (rescore kernel)");
  return Status();
}

}  // namespace ferry::cuda
