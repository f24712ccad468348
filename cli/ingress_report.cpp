#include "ingress_report.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bench_report.hpp"
#include "format.hpp"
#include "json_writer.hpp"
#include "text_table.hpp"

namespace ferry::cli {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const StreamResult* find_stream(const ShapeResults& shape, IngressMode mode) {
  for (const StreamResult& stream : shape.streams) {
    if (stream.mode == mode) return &stream;
  }
  return nullptr;
}

// "met" / "not met", or "-" when a figure is missing.
std::string verdict(bool met, double figure) {
  if (!std::isfinite(figure)) return "-";
  return met ? "met" : "NOT met";
}

std::string ms_cell(double ms) { return format_fixed(ms, ms < 1 ? 3 : 2); }
std::string rate_cell(double rate) { return format_fixed(rate, rate < 100 ? 2 : 1); }

}  // namespace

double ShapeResults::batches_per_second(IngressMode mode) const {
  const StreamResult* stream = find_stream(*this, mode);
  return stream != nullptr ? stream->batches_per_second() : kNaN;
}

double ShapeResults::ms_per_batch(IngressMode mode) const {
  const StreamResult* stream = find_stream(*this, mode);
  return stream != nullptr ? stream->ms_per_batch() : kNaN;
}

double IngressReport::copy_gbps() const {
  const double ferry = device_copy.lists != 0 ? device_copy.gbps() : kNaN;
  if (!cuda_copy.available) return ferry;
  return std::isfinite(ferry) ? std::max(ferry, cuda_copy.gbps) : cuda_copy.gbps;
}

void print_ingress_table(const IngressReport& report, std::ostream& out) {
  using A = TextTable::Align;
  const DeviceInfo& device = report.device;
  print_bench_header(out, "ferry bench ingress", report.date, report.command, device);
  out << "  queues   " << queue_label(device, QueueKind::upload) << "; "
      << queue_label(device, QueueKind::compute) << "; "
      << queue_label(device, QueueKind::download) << "\n";
  out << "  method   uint8 NHWC batches -> float32 NCHW with ImageNet mean/std; "
      << kSourceBatches << " source batches cycled;\n"
      << "           streams: " << report.stream.warmup_batches
      << " warm-up batches (batch 0 checked against an exact host reference), then\n"
      << "           >= " << report.stream.min_time.count() << " ms and >= "
      << report.stream.min_batches
      << " batches timed from the drained device to the last batch's completion;\n"
      << "           " << report.stream.depth << " batches in flight; cpu-convert on "
      << report.host_threads << " host threads;\n"
      << "           kernels: " << report.kernel.commands
      << " commands per CommandList on the compute queue, median list time over\n"
      << "           >= " << report.kernel.min_time.count() << " ms after a warm-up list\n";

  for (const ShapeResults& shape : report.shapes) {
    out << "\nStreaming " << to_string(shape.shape) << " (" << format_bytes(shape.input_bytes)
        << " uint8 -> " << format_bytes(shape.output_f32_bytes) << " float32 per batch)\n";
    TextTable table;
    table.add_column("mode");
    table.add_column("batches/s", A::right);
    table.add_column("ms/batch", A::right);
    table.add_column("H2D/batch", A::right);
    table.add_column("H2D GB/s", A::right);
    table.add_column("batches", A::right);
    table.add_column("x upload-f32", A::right);
    table.add_column("x cpu-convert", A::right);
    const double upload_rate = shape.batches_per_second(IngressMode::upload_f32);
    const double convert_rate = shape.batches_per_second(IngressMode::cpu_convert);
    for (const StreamResult& stream : shape.streams) {
      const double rate = stream.batches_per_second();
      table.add_row({std::string(to_string(stream.mode)), rate_cell(rate),
                     ms_cell(stream.ms_per_batch()), format_bytes(stream.h2d_bytes_per_batch),
                     gbps_cell(stream.h2d_gbps()), std::to_string(stream.batches),
                     ratio_cell(rate / upload_rate), ratio_cell(rate / convert_rate)});
    }
    table.print(out, "  ");
    const double ratio = shape.batches_per_second(IngressMode::ferry_ingress) / upload_rate;
    const std::string target = "  target (" + to_string(shape.shape) + "): ferry-ingress ";
    out << target << ">= " << format_fixed(kTargetIngressOverUploadF32, 2)
        << "x the batches/s of upload-f32: " << ratio_cell(ratio) << " ("
        << verdict(ratio >= kTargetIngressOverUploadF32, ratio) << ")\n";
    if (shape.shape == kTargetLatencyShape) {
      const double ms = shape.ms_per_batch(IngressMode::ferry_ingress);
      out << target << "<= " << format_fixed(kTargetLatencyMs, 3) << " ms per batch: "
          << ms_cell(ms) << " ms (" << verdict(ms <= kTargetLatencyMs, ms) << ")\n";
    }
  }

  const double copy = report.copy_gbps();
  out << "\nNormalize kernel alone (device buffer to device buffer, median GB/s)\n";
  TextTable kernels;
  kernels.add_column("shape");
  kernels.add_column("output");
  kernels.add_column("us/command", A::right);
  kernels.add_column("GB/s", A::right);
  kernels.add_column("x ferry copy", A::right);
  kernels.add_column("x cudaMemcpy D2D", A::right);
  kernels.add_column("target >= " + format_fixed(kTargetKernelOverCopy, 2) + "x", A::right);
  const double ferry_copy = report.device_copy.lists != 0 ? report.device_copy.gbps() : kNaN;
  const double cuda_copy = report.cuda_copy.available ? report.cuda_copy.gbps : kNaN;
  for (const ShapeResults& shape : report.shapes) {
    for (const auto& [type, kernel] : shape.kernels) {
      const double gbps = kernel.gbps();
      kernels.add_row({to_string(shape.shape), std::string(to_string(type)),
                       format_fixed(kernel.median_seconds / kernel.commands * 1e6, 1),
                       gbps_cell(gbps), ratio_cell(gbps / ferry_copy), ratio_cell(gbps / cuda_copy),
                       verdict(gbps / copy >= kTargetKernelOverCopy, gbps / copy)});
    }
  }
  kernels.print(out, "  ");
  out << "  device-to-device copy of " << format_bytes(report.copy_bytes) << ": ferry "
      << "CommandList::copy (compute queue) " << gbps_cell(ferry_copy) << " GB/s; cudaMemcpyAsync "
      << (report.cuda_copy.available ? gbps_cell(cuda_copy) + " GB/s"
                                     : "- (" + report.cuda_copy.reason + ")")
      << "\n"
      << "  (GB/s count bytes read and written: normalize reads 1 B and writes 4 B (float32) or\n"
      << "   2 B (float16) per element; a copy reads and writes its size)\n"
      << "  (target: normalize >= " << format_fixed(kTargetKernelOverCopy, 2)
      << "x the device-to-device copy bandwidth, the faster of the copies above)\n";
  if (device.is_cpu) {
    out << "\nThis device is a CPU implementation: the figures check the paths, the targets are "
           "for GPUs.\n";
  }
  if (!report.skipped.empty()) {
    out << "\nSkipped shapes\n";
    for (const SkippedShape& skipped : report.skipped) {
      out << "  " << to_string(skipped.shape) << ": " << skipped.reason << "\n";
    }
  }
}

void print_ingress_json(const IngressReport& report, std::ostream& out) {
  JsonWriter json(out);
  begin_bench_json(json, "ferry bench ingress", report.date, report.command, report.device);
  json.key("settings").begin_object();
  json.field("min_time_ms", static_cast<std::uint64_t>(report.stream.min_time.count()));
  json.field("depth", report.stream.depth);
  json.field("warmup_batches", report.stream.warmup_batches);
  json.field("min_batches", report.stream.min_batches);
  json.field("source_batches", kSourceBatches);
  json.field("kernel_commands", report.kernel.commands);
  json.field("kernel_destination_budget_bytes", report.kernel.destination_budget);
  json.field("copy_bytes", report.copy_bytes);
  json.field("host_threads", report.host_threads);
  json.field("quick", report.options.quick);
  json.field("input", "uint8 NHWC");
  json.field("output", "float32 NCHW, ImageNet mean/std");
  json.field("gbps_unit", "1e9 bytes per second");
  json.end_object();

  json.key("shapes").begin_array();
  for (const ShapeResults& shape : report.shapes) {
    json.begin_object();
    json.field("shape", to_string(shape.shape));
    json.field("input_bytes", shape.input_bytes);
    json.field("output_float32_bytes", shape.output_f32_bytes);
    json.key("streams").begin_array();
    for (const StreamResult& stream : shape.streams) {
      json.begin_object();
      json.field("mode", to_string(stream.mode));
      json.field("batches", stream.batches);
      json.field("seconds", stream.seconds);
      json.field("batches_per_second", stream.batches_per_second());
      json.field("ms_per_batch", stream.ms_per_batch());
      json.field("h2d_bytes_per_batch", stream.h2d_bytes_per_batch);
      json.field("h2d_gbps", stream.h2d_gbps());
      json.field("verified", true);
      json.end_object();
    }
    json.end_array();
    const double ingress = shape.batches_per_second(IngressMode::ferry_ingress);
    const double pageable = shape.batches_per_second(IngressMode::ferry_ingress_pageable);
    const double upload = shape.batches_per_second(IngressMode::upload_f32);
    const double convert = shape.batches_per_second(IngressMode::cpu_convert);
    json.key("ratios").begin_object();
    json.field("ferry_ingress_over_upload_f32", ingress / upload);
    json.field("ferry_ingress_over_cpu_convert", ingress / convert);
    json.field("ferry_ingress_pageable_over_upload_f32", pageable / upload);
    json.field("ferry_ingress_pageable_over_cpu_convert", pageable / convert);
    json.end_object();
    json.key("targets").begin_object();
    json.field("ferry_ingress_over_upload_f32_min", kTargetIngressOverUploadF32);
    json.field("ferry_ingress_over_upload_f32_met",
               ingress / upload >= kTargetIngressOverUploadF32);
    if (shape.shape == kTargetLatencyShape) {
      const double ms = shape.ms_per_batch(IngressMode::ferry_ingress);
      json.field("ferry_ingress_ms_per_batch_max", kTargetLatencyMs);
      json.field("ferry_ingress_ms_per_batch_met", ms <= kTargetLatencyMs);
    }
    json.end_object();
    json.key("normalize_kernel").begin_array();
    for (const auto& [type, kernel] : shape.kernels) {
      json.begin_object();
      json.field("output_type", to_string(type));
      json.field("commands_per_list", kernel.commands);
      json.field("lists", kernel.lists);
      json.field("median_list_seconds", kernel.median_seconds);
      json.field("bytes_per_command", kernel.bytes_per_command);
      json.field("gbps", kernel.gbps());
      json.field("over_copy", kernel.gbps() / report.copy_gbps());
      json.field("over_copy_met", kernel.gbps() / report.copy_gbps() >= kTargetKernelOverCopy);
      json.field("verified", true);
      json.end_object();
    }
    json.end_array();
    json.end_object();
  }
  json.end_array();

  json.key("device_copy").begin_object();
  json.field("bytes", report.copy_bytes);
  json.field("commands_per_list", report.device_copy.commands);
  json.field("lists", report.device_copy.lists);
  json.field("ferry_gbps", report.device_copy.lists != 0 ? report.device_copy.gbps() : kNaN);
  json.field("cuda_available", report.cuda_copy.available);
  json.field("cuda_reason", report.cuda_copy.reason);
  json.field("cuda_gbps", report.cuda_copy.available ? report.cuda_copy.gbps : kNaN);
  json.field("reference_gbps", report.copy_gbps());
  json.field("kernel_over_copy_min", kTargetKernelOverCopy);
  json.end_object();

  json.key("skipped").begin_array();
  for (const SkippedShape& skipped : report.skipped) {
    json.begin_object();
    json.field("shape", to_string(skipped.shape));
    json.field("reason", skipped.reason);
    json.end_object();
  }
  json.end_array();
  json.field("validation_messages", report.validation_messages);
  json.end_object();
  json.finish();
}

}  // namespace ferry::cli
