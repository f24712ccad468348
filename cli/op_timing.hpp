// Timing device commands: lists of several commands on the compute queue, each list submitted
// and waited for, the median per list; an op checked bit for bit against the CPU backend, and
// a device-to-device copy to hold it against.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "baselines/cuda_memcpy.hpp"
#include "ferry/ferry.hpp"
#include "ops/op_case.hpp"
#include "timing.hpp"

namespace ferry::cli {

struct ListSettings {
  std::uint32_t commands = 20;  // per CommandList
  std::chrono::milliseconds min_time{500};
  // Buffers are cycled so that successive commands use different ones (no write-after-write
  // barrier between them, no input left in a cache by the command before) within this much
  // device memory.
  std::uint64_t buffer_budget = 1ull << 30;
};

struct ListTiming {
  std::uint32_t commands = 0;
  std::uint64_t bytes_per_command = 0;  // read + written
  Timing lists;                         // per list

  double us_per_command() const { return lists.median_seconds / commands * 1e6; }
  double gbps() const {
    return static_cast<double>(bytes_per_command) * commands / lists.median_seconds / 1e9;
  }
};

// One untimed list, then lists made by `record`, each submitted and waited for (the recording
// is not timed), until at least 3 lists and settings.min_time.
Result<ListTiming> time_lists(const Queue& queue,
                              const std::function<Result<CommandList>()>& record,
                              const ListSettings& settings);
// `op` on `device` from random input (`seed` picks it): the first list's output checked bit for
// bit against the same op on the same input on `reference` (a CPU device), then timed.
Result<ListTiming> measure_op(const Device& device, const Device& reference, const OpInstance& op,
                              const ListSettings& settings, std::uint64_t seed);
// The device-to-device copy an op is held against: CommandList::copy of `bytes` between device
// buffers on the compute queue, timed the same way (bytes_per_command counts the bytes read and
// written: 2 * bytes), and cudaMemcpyAsync of as many bytes on CUDA devices (device `index`).
struct CopyBaselines {
  ListTiming ferry;
  CudaCopyBaseline cuda;
};
Result<CopyBaselines> measure_copies(const Device& device, int index, std::uint64_t bytes,
                                     const ListSettings& settings);

}  // namespace ferry::cli
