// The results of `ferry bench transfer` and their two renderings: an aligned table for people
// and JSON for machines. Ratios are computed here from the medians of one run.
#pragma once

#include <cstdint>
#include <limits>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli_args.hpp"
#include "ferry/ferry.hpp"
#include "baselines/cuda_memcpy.hpp"
#include "transfer_modes.hpp"

namespace ferry::cli {

// What the user asked for.
struct BenchOptions : CommonBenchOptions {
  std::optional<std::vector<std::uint64_t>> sizes;
  std::optional<std::uint64_t> min_time_ms;
  TransferSettings transfer;
};

// One measured combination.
struct Case {
  TransferMode mode;
  TransferDirection direction;
};

struct Measurement {
  std::uint64_t size = 0;
  Case which{};
  std::size_t reps = 0;
  double median_seconds = 0;
  double best_seconds = 0;
  // Bytes moved per transfer: size, or twice the size for both directions at once.
  std::uint64_t bytes_moved() const {
    return which.direction == TransferDirection::both ? 2 * size : size;
  }
  double median_gbps() const { return static_cast<double>(bytes_moved()) / median_seconds / 1e9; }
  double best_gbps() const { return static_cast<double>(bytes_moved()) / best_seconds / 1e9; }
};

struct Skipped {
  std::uint64_t size;
  std::string reason;
};

struct Report {
  std::string date;
  std::string command;  // as typed, for reproducing the run
  DeviceInfo device;
  BenchOptions options;
  std::uint64_t min_time_ms = 0;
  std::vector<std::uint64_t> sizes;  // measured
  std::vector<Skipped> skipped;
  std::vector<Measurement> results;
  StagingPoolStats upload_pool;
  StagingPoolStats readback_pool;
  std::uint64_t validation_messages = 0;
  // CUDA devices only: plain cudaMemcpyAsync / cudaMemcpy of the same sizes, same run.
  std::vector<std::pair<std::uint64_t, CudaMemcpyBaseline>> cuda_baselines;
  // CPU time an application spends per small pooled transfer: acquire + record + submit.
  double submit_overhead_us = std::numeric_limits<double>::quiet_NaN();

  const Measurement* find(std::uint64_t size, TransferMode mode, TransferDirection direction) const {
    for (const auto& m : results) {
      if (m.size == size && m.which.mode == mode && m.which.direction == direction) return &m;
    }
    return nullptr;
  }
  double gbps(std::uint64_t size, TransferMode mode, TransferDirection direction) const {
    const Measurement* m = find(size, mode, direction);
    return m != nullptr ? m->median_gbps() : std::numeric_limits<double>::quiet_NaN();
  }
  // Both directions at once against the faster single direction of the same (pool) path.
  double both_ratio(std::uint64_t size) const {
    const double one = std::max(gbps(size, TransferMode::pool, TransferDirection::h2d),
                                gbps(size, TransferMode::pool, TransferDirection::d2h));
    return gbps(size, TransferMode::pool, TransferDirection::both) / one;
  }
};

// "vulkan:0 NVIDIA H100 80GB HBM3"
std::string device_label(const DeviceInfo& device);

// Pieces every bench report shares (`ferry bench transfer` and `ferry bench ingress`).
class JsonWriter;
// "upload family 1 #0" (with " (shared)" when another of ferry's queues uses that queue).
std::string queue_label(const DeviceInfo& device, QueueKind kind);
std::string gbps_cell(double gbps);    // 2 decimals below 10, else 1
std::string ratio_cell(double ratio);  // "1.23x", or "-" when not finite
// The first lines of a table report: "<tool> (ferry <version>)", date, command, device, driver,
// memory.
void print_bench_header(std::ostream& out, std::string_view tool, std::string_view date,
                        std::string_view command, const DeviceInfo& device);
// The "device" member of a JSON report.
void write_device_json(JsonWriter& json, const DeviceInfo& device);
// Opens a bench's JSON document: tool, ferry version, date, command and device fields.
void begin_bench_json(JsonWriter& json, std::string_view tool, const std::string& date,
                      const std::string& command, const DeviceInfo& device);

// "ferry bench transfer --quick": the command as run, for the report header.
std::string command_line(std::string_view command, const std::vector<std::string_view>& args);
// Opens the device the options name; on failure prints the error and returns nothing.
std::optional<Device> open_bench_device(const CommonBenchOptions& options);

// The end of every bench command: the table (or JSON) on stdout, the JSON also to json_file
// when given; fails when the file cannot be written or validation messages were seen.
int emit_bench_report(bool json, const std::string& json_file,
                      std::uint64_t validation_messages,
                      const std::function<void(std::ostream&)>& print_table,
                      const std::function<void(std::ostream&)>& print_json);
void print_report_table(const Report& report, std::ostream& out);
void print_report_json(const Report& report, std::ostream& out);

}  // namespace ferry::cli
