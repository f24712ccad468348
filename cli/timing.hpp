// The one timing loop of the benches: untimed warm-up repetitions, then timed ones until both a
// minimum count and a minimum time are reached (or a maximum count); the median and best
// repetition, and the whole timed window.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "ferry/status.hpp"

namespace ferry::cli {

struct RepeatSettings {
  std::uint64_t warmup = 1;  // untimed repetitions first
  std::uint64_t min_reps = 3;
  std::uint64_t max_reps = 1'000'000;
  std::chrono::duration<double, std::milli> min_time{0};
};

// Exactly `steps` timed repetitions after `warmup`.
inline RepeatSettings exactly(std::uint64_t warmup, std::uint64_t steps) {
  return {.warmup = warmup, .min_reps = steps, .max_reps = steps};
}

struct Timing {
  std::uint64_t reps = 0;     // timed
  double median_seconds = 0;  // per repetition (the mean of the middle two for an even count)
  double best_seconds = 0;
  double window_seconds = 0;  // from the first timed repetition to the end of `finish`

  double window_per_rep() const { return window_seconds / static_cast<double>(reps); }
};

// One repetition (i counts from 0, warm-up included); returns the seconds that count for it:
// its wall time (see wall_time), or less when part of it is set-up (recording a list, say).
using Repetition = std::function<Result<double>(std::uint64_t i)>;

// The warm-up, then `settle` (untimed: e.g. wait for the warm-up's work to drain), then the
// timed repetitions, then `finish` (inside the window: e.g. wait for the last one to complete).
Result<Timing> repeat(const RepeatSettings& settings, const Repetition& rep,
                      const std::function<Status()>& settle = {},
                      const std::function<Status()>& finish = {});
// The same for steps that overlap (submitted, not waited for): only the window counts.
Result<Timing> repeat_steps(const RepeatSettings& settings,
                            const std::function<Status(std::uint64_t i)>& step,
                            const std::function<Status()>& settle = {},
                            const std::function<Status()>& finish = {});
// The wall time of body() in seconds, or its error.
Result<double> wall_time(const std::function<Status()>& body);

}  // namespace ferry::cli
