#include "bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>

#include "commands.hpp"
#include "format.hpp"
#include "json_writer.hpp"
#include "text_table.hpp"

namespace ferry::cli {

std::string device_label(const DeviceInfo& device) {
  return std::string(to_string(device.backend)) + ":" + std::to_string(device.index) + " " +
         device.name;
}

std::string queue_label(const DeviceInfo& device, QueueKind kind) {
  for (const auto& queue : device.queues) {
    if (queue.kind == kind) {
      return std::string(to_string(kind)) + " family " + std::to_string(queue.family) + " #" +
             std::to_string(queue.index) + (queue.shared ? " (shared)" : "");
    }
  }
  return std::string(to_string(kind)) + " ?";
}

std::string gbps_cell(double gbps) { return format_fixed(gbps, gbps < 10 ? 2 : 1); }
std::string ratio_cell(double ratio) {
  return std::isfinite(ratio) ? format_fixed(ratio, 2) + "x" : "-";
}

void print_bench_header(std::ostream& out, std::string_view tool, std::string_view date,
                        std::string_view command, const DeviceInfo& device) {
  out << tool << " (ferry " FERRY_VERSION_STRING ")\n";
  out << "  date     " << date << "\n";
  out << "  command  " << command << "\n";
  out << "  device   " << device_label(device) << (device.is_cpu ? "  [CPU implementation]" : "")
      << "\n";
  out << "  driver   " << (device.driver.empty() ? "-" : device.driver) << "\n";
  out << "  memory   device " << format_bytes(device.device_memory_bytes) << ", host-visible "
      << format_bytes(device.host_visible_memory_bytes) << "\n";
}

void write_device_json(JsonWriter& json, const DeviceInfo& device) {
  json.begin_object();
  json.field("backend", to_string(device.backend));
  json.field("index", device.index);
  json.field("name", device.name);
  json.field("driver", device.driver);
  json.field("is_cpu", device.is_cpu);
  json.field("device_memory_bytes", device.device_memory_bytes);
  json.end_object();
}

void begin_bench_json(JsonWriter& json, std::string_view tool, const std::string& date,
                      const std::string& command, const DeviceInfo& device) {
  json.begin_object();
  json.field("tool", tool);
  json.field("ferry_version", FERRY_VERSION_STRING);
  json.field("date", date);
  json.field("command", command);
  json.key("device");
  write_device_json(json, device);
}

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

void write_pool_stats(JsonWriter& json, const StagingPoolStats& stats) {
  json.begin_object();
  json.field("bytes_reserved", stats.bytes_reserved);
  json.field("high_water_bytes", stats.high_water_bytes);
  json.field("capacity_bytes", stats.capacity_bytes);
  json.field("acquires", stats.acquires);
  json.field("waits", stats.waits);
  json.field("slabs", stats.slabs);
  json.end_object();
}

}  // namespace

void print_report_table(const Report& report, std::ostream& out) {
  const DeviceInfo& device = report.device;
  const TransferSettings& transfer = report.options.transfer;
  print_bench_header(out, "ferry bench transfer", report.date, report.command, device);
  out << "  queues   " << queue_label(device, QueueKind::upload) << "; "
      << queue_label(device, QueueKind::download) << "\n";
  out << "  method   median GB/s (1e9 B/s) of repeated transfers, >= " << report.min_time_ms
      << " ms per case after a warm-up;\n"
      << "           pool/pageable chunks " << format_bytes(transfer.chunk_bytes) << ", "
      << transfer.in_flight << " pool chunks in flight per direction;\n"
      << "           every case checked once with random bytes\n";

  out << "\nOne direction (median GB/s)\n";
  TextTable table;
  using A = TextTable::Align;
  table.add_column("size", A::right);
  table.add_column("dir");
  table.add_column("direct", A::right);
  table.add_column("pool", A::right);
  table.add_column("pool/direct", A::right);
  table.add_column("pageable-naive", A::right);
  table.add_column("pageable", A::right);
  table.add_column("pageable/naive", A::right);
  for (std::uint64_t size : report.sizes) {
    for (TransferDirection dir : {TransferDirection::h2d, TransferDirection::d2h}) {
      const double direct = report.gbps(size, TransferMode::direct, dir);
      const double pool = report.gbps(size, TransferMode::pool, dir);
      const double naive = report.gbps(size, TransferMode::pageable_naive, dir);
      const double pageable = report.gbps(size, TransferMode::pageable, dir);
      table.add_row({format_bytes(size), dir == TransferDirection::h2d ? "H2D" : "D2H",
                     gbps_cell(direct), gbps_cell(pool), ratio_cell(pool / direct),
                     gbps_cell(naive), gbps_cell(pageable), ratio_cell(pageable / naive)});
    }
  }
  table.print(out, "  ");

  // Small copies are bound by per-transfer overhead, which reads better as time than as GB/s.
  constexpr std::uint64_t kLatencySizeLimit = kMiB;
  if (std::any_of(report.sizes.begin(), report.sizes.end(),
                  [](std::uint64_t size) { return size <= kLatencySizeLimit; })) {
    out << "\nSmall transfers (median microseconds per transfer)\n";
    TextTable latency;
    latency.add_column("size", A::right);
    latency.add_column("dir");
    for (const char* mode : {"direct", "pool", "pageable-naive", "pageable"}) {
      latency.add_column(mode, A::right);
    }
    for (std::uint64_t size : report.sizes) {
      if (size > kLatencySizeLimit) continue;
      for (TransferDirection dir : {TransferDirection::h2d, TransferDirection::d2h}) {
        std::vector<std::string> row = {format_bytes(size),
                                        dir == TransferDirection::h2d ? "H2D" : "D2H"};
        for (TransferMode mode : {TransferMode::direct, TransferMode::pool,
                                  TransferMode::pageable_naive, TransferMode::pageable}) {
          const Measurement* m = report.find(size, mode, dir);
          row.push_back(m != nullptr ? format_fixed(m->median_seconds * 1e6, 1) : "-");
        }
        latency.add_row(std::move(row));
      }
    }
    latency.print(out, "  ");
  }

  out << "\nBoth directions at once (pool path, upload + download queues)\n";
  TextTable both;
  both.add_column("size", A::right);
  both.add_column("total GB/s", A::right);
  both.add_column("pool H2D", A::right);
  both.add_column("pool D2H", A::right);
  both.add_column("both/one-direction", A::right);
  for (std::uint64_t size : report.sizes) {
    both.add_row({format_bytes(size),
                  gbps_cell(report.gbps(size, TransferMode::pool, TransferDirection::both)),
                  gbps_cell(report.gbps(size, TransferMode::pool, TransferDirection::h2d)),
                  gbps_cell(report.gbps(size, TransferMode::pool, TransferDirection::d2h)),
                  ratio_cell(report.both_ratio(size))});
  }
  both.print(out, "  ");
  out << "  (both/one-direction: total GB/s over the faster single direction)\n";

  if (!report.cuda_baselines.empty()) {
    out << "\nAgainst plain CUDA runtime copies of the same sizes (same run, median GB/s)\n";
    TextTable cuda;
    cuda.add_column("size", A::right);
    cuda.add_column("dir");
    cuda.add_column("cudaMemcpyAsync", A::right);
    cuda.add_column("pool", A::right);
    cuda.add_column("pool/cuda", A::right);
    cuda.add_column("cudaMemcpy pageable", A::right);
    cuda.add_column("pageable", A::right);
    cuda.add_column("pageable/cuda", A::right);
    for (const auto& [size, base] : report.cuda_baselines) {
      if (!base.available) {
        cuda.add_row({format_bytes(size), "-", base.reason, "", "", "", "", ""});
        continue;
      }
      for (TransferDirection dir : {TransferDirection::h2d, TransferDirection::d2h}) {
        const bool up = dir == TransferDirection::h2d;
        const double pinned = up ? base.h2d_pinned : base.d2h_pinned;
        const double pageable = up ? base.h2d_pageable : base.d2h_pageable;
        const double pool = report.gbps(size, TransferMode::pool, dir);
        const double ours = report.gbps(size, TransferMode::pageable, dir);
        cuda.add_row({format_bytes(size), up ? "H2D" : "D2H", gbps_cell(pinned), gbps_cell(pool),
                      ratio_cell(pool / pinned), gbps_cell(pageable), gbps_cell(ours),
                      ratio_cell(ours / pageable)});
      }
      const double ours_both = report.gbps(size, TransferMode::pool, TransferDirection::both);
      cuda.add_row({format_bytes(size), "both", gbps_cell(base.both_pinned), gbps_cell(ours_both),
                    ratio_cell(ours_both / base.both_pinned), "", "", ""});
    }
    cuda.print(out, "  ");
    out << "  (cudaMemcpyAsync: pinned cudaHostAlloc memory, one copy + cudaStreamSynchronize;\n"
           "   cudaMemcpy pageable: the same std::vector-style memory ferry's pageable path reads)\n";
  }

  out << "\nPer-transfer CPU overhead of the pool path (acquire + record + submit, 4 KiB): "
      << format_fixed(report.submit_overhead_us, 2) << " us\n";

  if (!report.skipped.empty()) {
    out << "\nSkipped sizes\n";
    for (const auto& skipped : report.skipped) {
      out << "  " << format_bytes(skipped.size) << ": " << skipped.reason << "\n";
    }
  }
  const StagingPoolStats& up = report.upload_pool;
  out << "\nStaging pools: upload high water " << format_bytes(up.high_water_bytes) << " of "
      << format_bytes(up.capacity_bytes) << ", " << up.waits << " waits in " << up.acquires
      << " acquires; readback high water " << format_bytes(report.readback_pool.high_water_bytes)
      << ", " << report.readback_pool.waits << " waits\n";
}

void print_report_json(const Report& report, std::ostream& out) {
  const DeviceInfo& device = report.device;
  JsonWriter json(out);
  begin_bench_json(json, "ferry bench transfer", report.date, report.command, device);
  json.key("settings").begin_object();
  json.field("min_time_ms", report.min_time_ms);
  json.field("chunk_bytes", report.options.transfer.chunk_bytes);
  json.field("in_flight", report.options.transfer.in_flight);
  json.field("quick", report.options.quick);
  json.field("gbps_unit", "1e9 bytes per second; median of repetitions");
  json.end_object();
  json.key("results").begin_array();
  for (const auto& m : report.results) {
    json.begin_object();
    json.field("size_bytes", m.size);
    json.field("mode", to_string(m.which.mode));
    json.field("direction", to_string(m.which.direction));
    json.field("median_gbps", m.median_gbps());
    json.field("best_gbps", m.best_gbps());
    json.field("median_seconds", m.median_seconds);
    json.field("reps", static_cast<std::uint64_t>(m.reps));
    json.field("verified", true);
    json.end_object();
  }
  json.end_array();
  json.key("ratios").begin_array();
  for (std::uint64_t size : report.sizes) {
    for (TransferDirection dir : {TransferDirection::h2d, TransferDirection::d2h}) {
      json.begin_object();
      json.field("size_bytes", size);
      json.field("direction", to_string(dir));
      json.field("pool_over_direct", report.gbps(size, TransferMode::pool, dir) /
                                         report.gbps(size, TransferMode::direct, dir));
      json.field("pageable_over_pageable_naive",
                 report.gbps(size, TransferMode::pageable, dir) /
                     report.gbps(size, TransferMode::pageable_naive, dir));
      json.end_object();
    }
    json.begin_object();
    json.field("size_bytes", size);
    json.field("direction", "both");
    json.field("both_over_one_direction", report.both_ratio(size));
    json.end_object();
  }
  json.end_array();
  json.key("skipped").begin_array();
  for (const auto& skipped : report.skipped) {
    json.begin_object();
    json.field("size_bytes", skipped.size);
    json.field("reason", skipped.reason);
    json.end_object();
  }
  json.end_array();
  json.key("staging_pools").begin_object();
  json.key("upload");
  write_pool_stats(json, report.upload_pool);
  json.key("readback");
  write_pool_stats(json, report.readback_pool);
  json.end_object();
  json.field("submit_overhead_us", report.submit_overhead_us);
  json.key("cuda_baselines").begin_array();
  for (const auto& [size, base] : report.cuda_baselines) {
    json.begin_object();
    json.field("size_bytes", size);
    json.field("available", base.available);
    json.field("reason", base.reason);
    json.field("h2d_pinned_gbps", base.h2d_pinned);
    json.field("d2h_pinned_gbps", base.d2h_pinned);
    json.field("h2d_pageable_gbps", base.h2d_pageable);
    json.field("d2h_pageable_gbps", base.d2h_pageable);
    json.field("both_pinned_gbps", base.both_pinned);
    json.end_object();
  }
  json.end_array();
  json.field("validation_messages", report.validation_messages);
  json.end_object();
  json.finish();
}

std::string command_line(std::string_view command, const std::vector<std::string_view>& args) {
  std::string line(command);
  for (std::string_view arg : args) line.append(" ").append(arg);
  return line;
}

std::optional<Device> open_bench_device(const CommonBenchOptions& options) {
  Result<Device> opened = Device::open(options.backend, options.device_index, device_options());
  if (!opened.ok()) {
    library_error(opened.status(), "opening " + options.backend + " device " +
                                       std::to_string(options.device_index));
    return std::nullopt;
  }
  return std::move(opened).value();
}

int emit_bench_report(bool json, const std::string& json_file,
                      std::uint64_t validation_messages,
                      const std::function<void(std::ostream&)>& print_table,
                      const std::function<void(std::ostream&)>& print_json) {
  if (json) {
    print_json(std::cout);
  } else {
    print_table(std::cout);
  }
  if (!json_file.empty()) {
    std::ofstream file(json_file);
    print_json(file);
    if (!file) {
      std::cerr << "ferry: error: cannot write " << json_file << "\n";
      return kExitFailure;
    }
  }
  if (validation_messages != 0) {
    std::cerr << "ferry: error: " << validation_messages
              << " validation messages during the benchmark\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace ferry::cli
