// The whole public API.
#pragma once

#include "ferry/buffer.hpp"
#include "ferry/device.hpp"
#include "ferry/egress.hpp"
#include "ferry/element_type.hpp"
#include "ferry/faults.hpp"
#include "ferry/ingress.hpp"
#include "ferry/ops/binary_quantize.hpp"
#include "ferry/ops/fill.hpp"
#include "ferry/ops/hamming_topk.hpp"
#include "ferry/ops/normalize.hpp"
#include "ferry/queue.hpp"
#include "ferry/staging_pool.hpp"
#include "ferry/status.hpp"
#include "ferry/timeline.hpp"
#include "ferry/transfer.hpp"
#include "ferry/types.hpp"
