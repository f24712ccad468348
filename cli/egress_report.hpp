// The results of `ferry bench egress` and their two renderings: an aligned table for people and
// JSON for machines. Ratios and the targets are evaluated here, from one run.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli_args.hpp"
#include "egress_modes.hpp"
#include "ferry/ferry.hpp"

namespace ferry::cli {

// What the user asked for.
struct EgressBenchOptions : CommonBenchOptions {
  std::optional<std::vector<std::uint32_t>> output_shape;  // float32 elements, any rank
  std::optional<std::uint64_t> output_mib;
  std::optional<std::uint32_t> steps;
  std::optional<double> compute_ms;  // overrides every setting's
  std::optional<double> host_ms;     // overrides every setting's
  std::optional<std::uint32_t> compute_fills;
  std::uint32_t workers = 4;
  std::optional<std::uint64_t> chunk_bytes;
  std::optional<std::vector<std::string>> settings;  // names: copy, compute, host
  EgressCheck check = EgressCheck::sampled;
  bool duplex = true;
};

// The targets of the issue, printed with the results.
// ms per step of the bound max(compute, copy, host) over those of ferry-egress, every setting
inline constexpr double kTargetEgressEfficiency = 0.95;
// ferry-egress on Vulkan against CUDA on the same GPU: compared across two runs, not here
inline constexpr double kTargetVulkanOverCuda = 0.90;
// steps/s of ingress and egress together over the slower direction alone
inline constexpr double kTargetDuplexOverSlower = 1.0;

struct EgressCaseResults {
  EgressSetting setting;
  EgressComponents components;
  std::vector<EgressModeResult> modes;

  // NaN when the mode was not measured or is unavailable.
  double seconds_per_step(EgressMode mode) const;
  // bound / ferry-egress seconds per step (first submission to drain), and the same from the
  // steady state (first to last timed step's completion).
  double efficiency() const;
  double steady_efficiency() const;
};

struct EgressReport {
  std::string date;
  std::string command;  // as typed, for reproducing the run
  DeviceInfo device;
  EgressBenchOptions options;
  EgressRunSettings run;
  std::string output_label;  // "16x21x512x512 float32" or "336 MiB"
  double fill_seconds = 0;   // one full-output fill, calibrated
  std::vector<EgressCaseResults> cases;
  DuplexSettings duplex;
  std::vector<DuplexResult> duplex_results;  // empty when not run
  StagingPoolStats pool;
  std::uint64_t validation_messages = 0;

  double duplex_steps_per_second(DuplexMode mode) const;  // NaN when not measured
  // Both directions together over the slower direction alone.
  double duplex_ratio() const;
};

void print_egress_table(const EgressReport& report, std::ostream& out);
void print_egress_json(const EgressReport& report, std::ostream& out);

}  // namespace ferry::cli
