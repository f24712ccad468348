// The paths `ferry bench egress` compares for one output size: a synthetic compute step (fills of
// the output, repeated to last a chosen time) whose output goes to a host consumer of chosen
// cost, step after step:
// - the components alone: the compute, the download through the readback pool, the host work;
// - naive: compute, wait, a synchronous download into pageable memory, host work, repeat;
// - pooled-sequential: the same into a pinned lease, one copy;
// - ferry-egress: EgressPipeline with a ring of device outputs, everything overlapped;
// and ingress and egress together (upload batch i+1, compute i, download i-1).
// Every step's output has its own pattern, which the consumer checks.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "baselines/cpu_convert.hpp"
#include "cli_args.hpp"
#include "ferry/ferry.hpp"

namespace ferry::cli {

enum class EgressMode : std::uint8_t {
  naive,         // compute, wait, ferry::download into pageable memory, host work
  naive_cuda,    // the same with the CUDA runtime: memsets, cudaMemcpy into pageable memory
  pooled,        // compute, wait, one copy into a pinned lease, wait, host work
  ferry_egress,  // EgressPipeline: compute i+1, download i and host work on i-1 overlap
};
inline constexpr EgressMode kEgressModes[] = {EgressMode::naive, EgressMode::naive_cuda,
                                              EgressMode::pooled, EgressMode::ferry_egress};
std::string_view to_string(EgressMode mode);

// How much of each step's output the consumer checks against the step's pattern. Warm-up steps
// are always checked in full.
enum class EgressCheck : std::uint8_t {
  sampled,  // one 64-bit word every 4 KiB and the last word of each chunk
  full,     // every word
};
std::string_view to_string(EgressCheck check);

// The run-wide settings.
struct EgressRunSettings {
  std::uint64_t output_bytes = 0;  // per step; a multiple of 4
  std::uint64_t chunk_bytes = 16ull << 20;
  std::uint32_t workers = 4;       // consumer threads, and the host threads of the other modes
  std::uint32_t ring = 3;          // device outputs in rotation
  std::uint32_t max_pending_steps = 4;
  std::uint64_t pool_slab_bytes = 64ull << 20;  // the readback pool of the pipeline
  std::uint32_t pool_slabs = 8;
  std::uint32_t warmup_steps = 4;  // per mode, untimed, checked in full
  std::uint32_t steps = 40;        // per mode, timed
  EgressCheck check = EgressCheck::sampled;
  std::chrono::milliseconds calibration_time{200};
};

// One of the benchmark's settings: how long the compute and the host work of a step take.
struct EgressSetting {
  std::string name;        // "copy-bound", ...
  double compute_ms = 0;   // asked for; converted to a number of fills
  double host_ms = 0;      // CPU time of the host work per step, summed over its chunks
  std::optional<std::uint32_t> fills;  // given directly (--compute-fills)
};

// Each component of a step alone, per step, back to back over the timed steps.
struct EgressComponents {
  std::uint32_t fills = 0;     // full-output fills per step
  double compute_seconds = 0;  // the fills, on the compute queue
  double copy_seconds = 0;     // the download through the pool, in chunks, on the download queue
  double host_seconds = 0;     // the consumer on every chunk, on `workers` threads

  double bound_seconds() const;
  std::string_view bound_by() const;  // "compute", "copy" or "host"
};

struct EgressModeResult {
  EgressMode mode{};
  bool available = true;
  std::string reason;      // why not, when unavailable
  std::uint64_t steps = 0;  // timed
  double seconds = 0;       // first timed submission to the last step's host work
  // ferry-egress only: from the first to the last timed step's end of host work, per step,
  // which leaves out the pipeline's fill and drain (NaN elsewhere).
  double steady_seconds_per_step = 0;
  std::uint32_t memsets = 0;  // naive-cudaMemcpy: its compute, calibrated on its own

  double seconds_per_step() const { return seconds / static_cast<double>(steps); }
};

enum class DuplexMode : std::uint8_t { ingress_alone, egress_alone, both };
inline constexpr DuplexMode kDuplexModes[] = {DuplexMode::ingress_alone, DuplexMode::egress_alone,
                                              DuplexMode::both};
std::string_view to_string(DuplexMode mode);

struct DuplexSettings {
  BatchShape input{64, 224, 224, 3};                    // uint8 NHWC, normalized on the device
  std::array<std::uint32_t, 4> output{64, 21, 56, 56};  // float32, written by a fill, downloaded
  std::uint32_t warmup_steps = 8;
  std::uint32_t steps = 400;
};

struct DuplexResult {
  DuplexMode mode{};
  std::uint64_t steps = 0;
  double seconds = 0;
  double steps_per_second() const { return static_cast<double>(steps) / seconds; }
};

// The buffers, pools and threads of one output size on one device.
class EgressBench {
 public:
  static Result<std::unique_ptr<EgressBench>> create(const Device& device,
                                                     const EgressRunSettings& settings);
  ~EgressBench();

  // Seconds per full-output fill: the median of CommandLists of several fills.
  Result<double> calibrate_fill();
  Result<EgressComponents> measure_components(const EgressSetting& setting, std::uint32_t fills);
  // Warm-up steps (checked in full), then the timed steps. naive-cudaMemcpy is unavailable on
  // other backends; it calibrates its own memsets to last components.compute_seconds.
  Result<EgressModeResult> run_mode(EgressMode mode, const EgressSetting& setting,
                                    const EgressComponents& components, int cuda_device_index);
  Result<DuplexResult> run_duplex(DuplexMode mode, const DuplexSettings& settings);

  StagingPoolStats pool_stats() const { return pool_.stats(); }

 private:
  EgressBench() = default;
  struct Chunk {
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
  };
  // The step's compute: fills of outputs_[slot], the last one with `pattern`.
  Result<CommandList> record_compute(std::uint32_t slot, std::uint32_t fills,
                                     std::uint32_t pattern) const;
  // work(i) for i in [0, items) on the `workers` threads, each taking the next index when
  // free; stops after the first error, which it returns.
  Status for_each_chunk(std::size_t items, const std::function<Status(std::size_t)>& work);
  // The host work of one step on `workers` threads, chunk by chunk (as the pipeline's
  // consumer would see it).
  Status host_step(std::span<const std::byte> bytes, std::uint64_t step, std::uint32_t pattern,
                   bool full_check, double host_seconds, std::string_view what);
  Result<EgressModeResult> run_naive(const EgressSetting& setting, std::uint32_t fills);
  Result<EgressModeResult> run_naive_cuda(const EgressSetting& setting, double compute_seconds,
                                          int cuda_device_index);
  Result<EgressModeResult> run_pooled(const EgressSetting& setting, std::uint32_t fills);
  Result<EgressModeResult> run_pipeline(const EgressSetting& setting, std::uint32_t fills);
  // A new pattern for each step of each run, so that stale bytes never pass the check.
  std::uint32_t next_run() { return ++runs_; }

  Device device_;
  Queue compute_, download_;
  EgressRunSettings settings_;
  std::vector<Chunk> chunks_;    // of one step's output
  std::vector<Buffer> outputs_;  // the ring of device outputs
  StagingPool pool_;             // host_readback, chunk-sized leases: the pipeline's
  StagingPool step_pool_;        // host_readback, one lease the size of the output
  std::vector<std::byte> pageable_;
  std::unique_ptr<HostThreadPool> threads_;
  std::uint32_t runs_ = 0;
};

}  // namespace ferry::cli
