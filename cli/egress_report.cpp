#include "egress_report.hpp"

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

const EgressModeResult* find_mode(const EgressCaseResults& results, EgressMode mode) {
  for (const EgressModeResult& result : results.modes) {
    if (result.mode == mode && result.available) return &result;
  }
  return nullptr;
}

// "met" / "NOT met", or "-" when a figure is missing.
std::string verdict(bool met, double figure) {
  if (!std::isfinite(figure)) return "-";
  return met ? "met" : "NOT met";
}

std::string ms_cell(double seconds) {
  const double ms = seconds * 1e3;
  return format_fixed(ms, ms < 1 ? 3 : 2);
}
std::string percent_cell(double fraction) {
  return std::isfinite(fraction) ? format_fixed(fraction * 100, 1) + "%" : "-";
}
std::string number_cell(double value) { return format_fixed(value, value < 10 ? 2 : 1); }

std::string dims_label(const std::array<std::uint32_t, 4>& dims) {
  return std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + "x" + std::to_string(dims[2]) +
         "x" + std::to_string(dims[3]);
}

}  // namespace

double EgressCaseResults::seconds_per_step(EgressMode mode) const {
  const EgressModeResult* result = find_mode(*this, mode);
  return result != nullptr ? result->seconds_per_step() : kNaN;
}

double EgressCaseResults::efficiency() const {
  return components.bound_seconds() / seconds_per_step(EgressMode::ferry_egress);
}

double EgressCaseResults::steady_efficiency() const {
  const EgressModeResult* result = find_mode(*this, EgressMode::ferry_egress);
  return result != nullptr ? components.bound_seconds() / result->steady_seconds_per_step : kNaN;
}

double EgressReport::duplex_steps_per_second(DuplexMode mode) const {
  for (const DuplexResult& result : duplex_results) {
    if (result.mode == mode) return result.steps_per_second();
  }
  return kNaN;
}

double EgressReport::duplex_ratio() const {
  const double slower = std::min(duplex_steps_per_second(DuplexMode::ingress_alone),
                                 duplex_steps_per_second(DuplexMode::egress_alone));
  return duplex_steps_per_second(DuplexMode::both) / slower;
}

void print_egress_table(const EgressReport& report, std::ostream& out) {
  using A = TextTable::Align;
  const DeviceInfo& device = report.device;
  const EgressRunSettings& run = report.run;
  print_bench_header(out, "ferry bench egress", report.date, report.command, device);
  out << "  queues   " << queue_label(device, QueueKind::compute) << "; "
      << queue_label(device, QueueKind::download) << "\n";
  out << "  method   per step: a " << report.output_label << " output ("
      << format_bytes(run.output_bytes) << ") written by fills on the compute\n"
      << "           queue (one fill " << ms_cell(report.fill_seconds)
      << " ms), the last with the step's own pattern\n"
      << "           consumer: checks each chunk ("
      << (run.check == EgressCheck::sampled ? "sampled: a word every 4 KiB" : "full: every word")
      << "), then busy-waits until its\n"
      << "           share of host-ms (CPU time per step) has passed\n"
      << "           " << format_bytes(run.chunk_bytes) << " chunks; " << run.workers
      << " host threads (the pipeline's as_completed workers); ring of " << run.ring << "\n"
      << "           outputs; readback pool " << run.pool_slabs << " x "
      << format_bytes(run.pool_slab_bytes) << "; at most " << run.max_pending_steps
      << " steps pending\n"
      << "           each mode: " << run.warmup_steps << " warm-up steps (checked in full), then "
      << run.steps << " timed steps, timed from\n"
      << "           the first submission to the last host work\n";

  out << "\nEach component alone (ms per step, back to back over " << run.steps << " steps)\n";
  TextTable components;
  components.add_column("setting");
  components.add_column("compute-ms", A::right);
  components.add_column("fills", A::right);
  components.add_column("compute", A::right);
  components.add_column("copy", A::right);
  components.add_column("copy GB/s", A::right);
  components.add_column("host-ms (CPU)", A::right);
  components.add_column("host", A::right);
  components.add_column("bound", A::right);
  components.add_column("bound by");
  for (const EgressCaseResults& c : report.cases) {
    const EgressComponents& parts = c.components;
    const double copy_gbps = static_cast<double>(run.output_bytes) / parts.copy_seconds / 1e9;
    components.add_row({c.setting.name,
                        c.setting.fills ? "-" : number_cell(c.setting.compute_ms),
                        std::to_string(parts.fills), ms_cell(parts.compute_seconds),
                        ms_cell(parts.copy_seconds), gbps_cell(copy_gbps),
                        number_cell(c.setting.host_ms), ms_cell(parts.host_seconds),
                        ms_cell(parts.bound_seconds()), std::string(parts.bound_by())});
  }
  components.print(out, "  ");
  out << "  (compute: the fills on the compute queue; copy: the output in chunks into leases of\n"
      << "   the readback pool on the download queue; host: the consumer on every chunk of the "
         "steps on\n"
      << "   " << run.workers
      << " threads, each taking the next chunk, of any step, when free (as the pipeline's\n"
      << "   as_completed workers do), so about host-ms / " << run.workers
      << " when the checks cost less than the busy\n"
      << "   wait; bound = max(compute, copy, host) as measured)\n";

  out << "\nThe three ways (ms per step over the timed steps)\n";
  TextTable modes;
  modes.add_column("setting");
  modes.add_column("mode");
  modes.add_column("ms/step", A::right);
  modes.add_column("GB/s", A::right);
  modes.add_column("x naive", A::right);
  modes.add_column("x cudaMemcpy", A::right);
  modes.add_column("x pooled", A::right);
  modes.add_column("bound/ms", A::right);
  modes.add_column("steady", A::right);
  for (const EgressCaseResults& c : report.cases) {
    const double naive = c.seconds_per_step(EgressMode::naive);
    const double cuda = c.seconds_per_step(EgressMode::naive_cuda);
    const double pooled = c.seconds_per_step(EgressMode::pooled);
    bool first = true;
    for (const EgressModeResult& mode : c.modes) {
      const std::string name = first ? c.setting.name : "";
      first = false;
      if (!mode.available) {
        modes.add_row({name, std::string(to_string(mode.mode)), "-"});
        continue;
      }
      const double seconds = mode.seconds_per_step();
      modes.add_row({name, std::string(to_string(mode.mode)), ms_cell(seconds),
                     gbps_cell(static_cast<double>(run.output_bytes) / seconds / 1e9),
                     ratio_cell(naive / seconds), ratio_cell(cuda / seconds),
                     ratio_cell(pooled / seconds),
                     percent_cell(c.components.bound_seconds() / seconds),
                     mode.mode == EgressMode::ferry_egress ? percent_cell(c.steady_efficiency())
                                                           : ""});
    }
  }
  modes.print(out, "  ");
  out << "  (naive: compute, wait, ferry::download into pageable memory, host work; "
         "naive-cudaMemcpy:\n"
      << "   the same with the CUDA runtime alone, cudaMemsetAsync as the compute, calibrated to "
         "the same\n"
      << "   time, and a synchronous cudaMemcpy into pageable memory; pooled-sequential: one copy "
         "into a\n"
      << "   pinned lease, waited for, then the host work; ferry-egress: EgressPipeline, compute "
         "i+1,\n"
      << "   download i and host work on i-1 overlapped. x naive etc.: speed-up over that mode; "
         "bound/ms:\n"
      << "   the bound over the measured ms per step; steady: the same from the first to the last "
         "timed\n"
      << "   step's end of host work, without the pipeline's fill and drain)\n";
  for (const EgressModeResult& mode : report.cases.empty() ? std::vector<EgressModeResult>{}
                                                           : report.cases.front().modes) {
    if (!mode.available) out << "  " << to_string(mode.mode) << ": " << mode.reason << "\n";
  }
  for (const EgressCaseResults& c : report.cases) {
    const double efficiency = c.efficiency();
    const double seconds = c.seconds_per_step(EgressMode::ferry_egress);
    out << "  target (" << c.setting.name << "): ferry-egress >= "
        << format_fixed(kTargetEgressEfficiency * 100, 0) << "% of the bound: "
        << percent_cell(efficiency) << " (" << verdict(efficiency >= kTargetEgressEfficiency,
                                                       efficiency)
        << "); " << ms_cell(seconds) << " vs " << ms_cell(c.components.bound_seconds())
        << " ms (" << c.components.bound_by() << "), "
        << ratio_cell(c.seconds_per_step(EgressMode::naive) / seconds) << " naive\n";
  }
  out << "  (bound: max(compute, copy, host) per step, each measured alone; the issue's other "
         "target,\n"
      << "   Vulkan >= " << format_fixed(kTargetVulkanOverCuda * 100, 0)
      << "% of CUDA, compares the ferry-egress ms/step of a vulkan and a cuda run on the\n"
      << "   same GPU)\n";

  if (!report.duplex_results.empty()) {
    const DuplexSettings& duplex = report.duplex;
    std::uint64_t out_bytes = 4;
    for (std::uint32_t dim : duplex.output) out_bytes *= dim;
    out << "\nIngress and egress together (per step: a " << to_string(duplex.input)
        << " uint8 batch up and normalized, one fill\n"
        << "of a " << dims_label(duplex.output) << " float32 output (" << format_bytes(out_bytes)
        << "), that output down; " << duplex.steps << " timed steps after " << duplex.warmup_steps
        << ")\n";
    TextTable table;
    table.add_column("run");
    table.add_column("steps/s", A::right);
    table.add_column("ms/step", A::right);
    for (const DuplexResult& result : report.duplex_results) {
      table.add_row({std::string(to_string(result.mode)), number_cell(result.steps_per_second()),
                     ms_cell(result.seconds / static_cast<double>(result.steps))});
    }
    table.print(out, "  ");
    const double ratio = report.duplex_ratio();
    out << "  target (ingress+egress): both at once ~" << format_fixed(kTargetDuplexOverSlower, 2)
        << "x the steps/s of the slower direction alone: " << ratio_cell(ratio) << "\n";
  }
  if (device.is_cpu) {
    out << "\nThis device is a CPU implementation: the figures check the paths, the targets are "
           "for GPUs.\n";
  }
  // Its high water is the whole pool: every slab is touched once before timing.
  out << "\nReadback pool (" << format_bytes(report.pool.capacity_bytes) << "): "
      << report.pool.waits << " acquires of " << report.pool.acquires
      << " waited for room (push() blocked on a full pool)\n";
}

void print_egress_json(const EgressReport& report, std::ostream& out) {
  const EgressRunSettings& run = report.run;
  JsonWriter json(out);
  begin_bench_json(json, "ferry bench egress", report.date, report.command, report.device);
  json.key("settings").begin_object();
  json.field("output", report.output_label);
  json.field("output_bytes", run.output_bytes);
  json.field("chunk_bytes", run.chunk_bytes);
  json.field("workers", run.workers);
  json.field("order", "as_completed");
  json.field("ring", run.ring);
  json.field("max_pending_steps", run.max_pending_steps);
  json.field("pool_slab_bytes", run.pool_slab_bytes);
  json.field("pool_slabs", run.pool_slabs);
  json.field("warmup_steps", run.warmup_steps);
  json.field("steps", run.steps);
  json.field("check", to_string(run.check));
  json.field("fill_seconds", report.fill_seconds);
  json.field("quick", report.options.quick);
  json.field("host_ms_unit", "CPU milliseconds per step, summed over the step's chunks");
  json.field("gbps_unit", "1e9 bytes per second");
  json.end_object();

  json.key("cases").begin_array();
  for (const EgressCaseResults& c : report.cases) {
    const EgressComponents& parts = c.components;
    json.begin_object();
    json.field("setting", c.setting.name);
    if (c.setting.fills) {
      json.key("compute_ms_requested").null();
    } else {
      json.field("compute_ms_requested", c.setting.compute_ms);
    }
    json.field("host_ms_cpu", c.setting.host_ms);
    json.key("components").begin_object();
    json.field("fills", parts.fills);
    json.field("compute_seconds", parts.compute_seconds);
    json.field("copy_seconds", parts.copy_seconds);
    json.field("copy_gbps", static_cast<double>(run.output_bytes) / parts.copy_seconds / 1e9);
    json.field("host_seconds", parts.host_seconds);
    json.field("bound_seconds", parts.bound_seconds());
    json.field("bound_by", parts.bound_by());
    json.end_object();
    json.key("modes").begin_array();
    for (const EgressModeResult& mode : c.modes) {
      json.begin_object();
      json.field("mode", to_string(mode.mode));
      json.field("available", mode.available);
      if (!mode.available) {
        json.field("reason", mode.reason);
        json.end_object();
        continue;
      }
      json.field("steps", mode.steps);
      json.field("seconds", mode.seconds);
      json.field("seconds_per_step", mode.seconds_per_step());
      json.field("gbps", static_cast<double>(run.output_bytes) / mode.seconds_per_step() / 1e9);
      json.field("bound_over_measured", parts.bound_seconds() / mode.seconds_per_step());
      if (mode.mode == EgressMode::ferry_egress) {
        json.field("steady_seconds_per_step", mode.steady_seconds_per_step);
      }
      if (mode.mode == EgressMode::naive_cuda) json.field("memsets_per_step", mode.memsets);
      json.field("verified", true);
      json.end_object();
    }
    json.end_array();
    const double ferry = c.seconds_per_step(EgressMode::ferry_egress);
    json.key("ratios").begin_object();
    json.field("efficiency", c.efficiency());
    json.field("steady_efficiency", c.steady_efficiency());
    json.field("ferry_egress_over_naive", c.seconds_per_step(EgressMode::naive) / ferry);
    json.field("ferry_egress_over_naive_cuda", c.seconds_per_step(EgressMode::naive_cuda) / ferry);
    json.field("ferry_egress_over_pooled", c.seconds_per_step(EgressMode::pooled) / ferry);
    json.end_object();
    json.key("targets").begin_object();
    json.field("efficiency_min", kTargetEgressEfficiency);
    json.field("efficiency_met", c.efficiency() >= kTargetEgressEfficiency);
    json.end_object();
    json.end_object();
  }
  json.end_array();

  json.key("duplex");
  if (report.duplex_results.empty()) {
    json.null();
  } else {
    const DuplexSettings& duplex = report.duplex;
    json.begin_object();
    json.field("input", to_string(duplex.input) + " uint8 NHWC");
    json.field("output", dims_label(duplex.output) + " float32");
    json.field("warmup_steps", duplex.warmup_steps);
    json.field("steps", duplex.steps);
    json.key("runs").begin_array();
    for (const DuplexResult& result : report.duplex_results) {
      json.begin_object();
      json.field("run", to_string(result.mode));
      json.field("steps", result.steps);
      json.field("seconds", result.seconds);
      json.field("steps_per_second", result.steps_per_second());
      json.end_object();
    }
    json.end_array();
    json.field("both_over_slower", report.duplex_ratio());
    json.field("both_over_slower_target", kTargetDuplexOverSlower);
    json.end_object();
  }
  json.key("pool").begin_object();
  json.field("capacity_bytes", report.pool.capacity_bytes);
  json.field("acquires", report.pool.acquires);
  json.field("waits", report.pool.waits);
  json.end_object();
  json.field("vulkan_over_cuda_min", kTargetVulkanOverCuda);
  json.field("validation_messages", report.validation_messages);
  json.end_object();
  json.finish();
}

}  // namespace ferry::cli
