// The paths `ferry bench ingress` compares for one batch shape, each checked once against an exact
// host reference, and their timing loops:
// - streams of batches: the CPU converting to float32 and uploading it, the float32 upload alone,
//   and ferry's IngressPipeline from pinned and from pageable memory;
// - the normalize op alone, device buffer to device buffer, and a device-to-device copy to
//   compare it with.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "baselines/cpu_convert.hpp"
#include "cli_args.hpp"
#include "ferry/ferry.hpp"

namespace ferry::cli {

enum class IngressMode : std::uint8_t {
  cpu_convert,             // host threads convert to float32 into a pinned lease; upload that
  upload_f32,              // already-normalized float32 from pinned buffers: the transfer alone
  ferry_ingress,           // IngressPipeline, pinned source (HostBatch::pinned)
  ferry_ingress_pageable,  // IngressPipeline, pageable source (HostBatch::pageable)
};
inline constexpr IngressMode kIngressModes[] = {IngressMode::cpu_convert, IngressMode::upload_f32,
                                                IngressMode::ferry_ingress,
                                                IngressMode::ferry_ingress_pageable};
std::string_view to_string(IngressMode mode);

// Source batches of each kind, prepared before timing and cycled.
inline constexpr std::uint32_t kSourceBatches = 3;

struct StreamSettings {
  std::uint32_t depth = 3;            // batches in flight (the pipeline's IngressOptions::depth)
  std::uint32_t warmup_batches = 5;   // before the timed window; batch 0 is checked
  std::uint64_t min_batches = 20;     // timed, at least
  std::chrono::milliseconds min_time{500};
};

// One steady-state window of a stream.
struct StreamResult {
  IngressMode mode{};
  std::uint64_t batches = 0;  // timed
  // From the start of the first timed batch (warm-up drained) to the last one's completion.
  double seconds = 0;
  std::uint64_t h2d_bytes_per_batch = 0;  // host bytes sent over the bus per batch

  double batches_per_second() const { return static_cast<double>(batches) / seconds; }
  double ms_per_batch() const { return seconds * 1e3 / static_cast<double>(batches); }
  double h2d_gbps() const {
    return static_cast<double>(h2d_bytes_per_batch * batches) / seconds / 1e9;
  }
};

struct KernelSettings {
  std::uint32_t commands = 20;  // per CommandList
  std::chrono::milliseconds min_time{500};
  // Destinations are cycled so that successive commands write different buffers (no
  // write-after-write barrier between them) within this much device memory.
  std::uint64_t destination_budget = 1ull << 30;
};

// Repeated CommandLists of `commands` commands on the compute queue (submit, wait).
struct KernelResult {
  std::uint32_t commands = 0;
  std::uint64_t lists = 0;              // timed
  std::uint64_t bytes_per_command = 0;  // read + written
  double median_seconds = 0;            // per list

  double gbps() const {
    return static_cast<double>(bytes_per_command) * commands / median_seconds / 1e9;
  }
};

// One untimed list, then lists recorded by `record` (each submitted and waited for) until at
// least 3 lists and settings.min_time have passed; the median time per list.
Result<KernelResult> time_lists(const Queue& queue,
                                const std::function<Result<CommandList>()>& record,
                                const KernelSettings& settings);

// uint8 NHWC in, `output` NCHW out, ImageNet mean and std in uint8 units (0.485 * 255, ...).
NormalizeParams imagenet_normalize_params(const BatchShape& shape, ElementType output);

// The buffers of one batch shape on one device, and its exact reference.
class IngressBench {
 public:
  // Allocates and fills the source batches (random bytes, `seed` picks them) and computes the
  // reference tensor of source batch 0.
  static Result<std::unique_ptr<IngressBench>> create(const Device& device, const BatchShape& shape,
                                                      std::uint64_t seed, HostThreadPool& threads);

  const NormalizeShape& shape() const { return shape_; }
  std::uint64_t input_bytes() const { return shape_.input_bytes; }
  std::uint64_t output_f32_bytes() const { return shape_.elements() * 4; }

  // Warm-up batches (the first checked), then a timed steady-state window.
  Result<StreamResult> run_stream(IngressMode mode, const StreamSettings& settings);
  // The normalize op alone, from a device buffer holding source batch 0 (checked once).
  Result<KernelResult> run_normalize_kernel(ElementType output, const KernelSettings& settings);

 private:
  IngressBench() = default;
  Result<StreamResult> stream_cpu_convert(const StreamSettings& settings);
  Result<StreamResult> stream_upload_f32(const StreamSettings& settings);
  Result<StreamResult> stream_ingress(bool pinned, const StreamSettings& settings);
  // Copies `bytes` of `src` (waiting for `after` first) into the readback buffer and waits.
  Status read_back(const BufferRef& src, std::uint64_t bytes, const TimelinePoint& after = {});
  // The readback buffer against the reference: exactly (float32, float16), or within a few
  // ulps (the host conversion, whose multiply and add round separately).
  Status check_output(ElementType type, bool exact, std::string_view what);

  Device device_;
  Queue compute_, upload_, download_;
  HostThreadPool* threads_ = nullptr;
  NormalizeParams params_;
  NormalizeShape shape_;
  NormalizeFactors factors_;
  std::vector<std::vector<std::byte>> pageable_sources_;  // uint8 batches in ordinary memory
  std::vector<Buffer> pinned_sources_;                    // the same batches, host_upload
  std::vector<float> reference_;  // source 0 normalized with one fma per element
  Buffer readback_;               // host_readback, a float32 tensor long
};

// `commands` copies of a `bytes` device buffer into device buffers per CommandList on the compute
// queue; bytes_per_command counts the bytes read and written (2 * bytes).
Result<KernelResult> measure_device_copy(const Device& device, std::uint64_t bytes,
                                         const KernelSettings& settings);

}  // namespace ferry::cli
