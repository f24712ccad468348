// `ferry bench ibp --gather`: mini-batches of random rows from a table in host memory, the way a
// GNN sampler or an embedding lookup fetches them, compressed (ferry's ibp_decode gather reading
// the stream in place) against the PyTorch way and the UVA way, in the same run.
#pragma once

#include "bench_common.hpp"

namespace ferry::cli {

Status measure_ibp_gathers(Bench& bench);

}  // namespace ferry::cli
