// The results of `ferry bench ingress` and their two renderings: an aligned table for people and
// JSON for machines. Ratios and the targets are evaluated here, from one run.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "baselines/cuda_memcpy.hpp"
#include "cli_args.hpp"
#include "ferry/ferry.hpp"
#include "ingress_modes.hpp"

namespace ferry::cli {

// What the user asked for.
struct IngressBenchOptions : CommonBenchOptions {
  std::optional<std::vector<BatchShape>> shapes;
  std::optional<std::uint64_t> min_time_ms;
  std::uint32_t depth = 3;
  std::optional<std::uint32_t> kernel_commands;
  std::optional<std::uint64_t> copy_bytes;
};

// The targets of the issue, printed with the results.
// batches/s of ferry-ingress over those of upload-f32
inline constexpr double kTargetIngressOverUploadF32 = 3.8;
// ms per batch of ferry-ingress, for batches of this shape
inline constexpr BatchShape kTargetLatencyShape = {64, 224, 224, 3};
inline constexpr double kTargetLatencyMs = 0.2;
// GB/s of the normalize kernel over those of a device-to-device copy
inline constexpr double kTargetKernelOverCopy = 0.80;

struct ShapeResults {
  BatchShape shape{};
  std::uint64_t input_bytes = 0;
  std::uint64_t output_f32_bytes = 0;
  std::vector<StreamResult> streams;
  std::vector<std::pair<ElementType, KernelResult>> kernels;

  // NaN when the mode was not measured.
  double batches_per_second(IngressMode mode) const;
  double ms_per_batch(IngressMode mode) const;
};

struct SkippedShape {
  BatchShape shape{};
  std::string reason;
};

struct IngressReport {
  std::string date;
  std::string command;  // as typed, for reproducing the run
  DeviceInfo device;
  IngressBenchOptions options;
  StreamSettings stream;
  KernelSettings kernel;
  std::uint64_t copy_bytes = 0;
  unsigned host_threads = 0;  // of the cpu-convert baseline
  std::vector<ShapeResults> shapes;
  std::vector<SkippedShape> skipped;
  KernelResult device_copy;  // ferry's CommandList::copy, device to device
  CudaCopyBaseline cuda_copy;  // measured on CUDA devices only
  std::uint64_t validation_messages = 0;

  // The faster of ferry's copy and cudaMemcpyAsync (when measured): the bandwidth a
  // device-to-device kernel is held against.
  double copy_gbps() const;
};

void print_ingress_table(const IngressReport& report, std::ostream& out);
void print_ingress_json(const IngressReport& report, std::ostream& out);

}  // namespace ferry::cli
