#include "timing.hpp"

#include <algorithm>
#include <vector>

namespace ferry::cli {

using Clock = std::chrono::steady_clock;

Result<double> wall_time(const std::function<Status()>& body) {
  const Clock::time_point start = Clock::now();
  FERRY_RETURN_IF_ERROR(body());
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Result<Timing> repeat(const RepeatSettings& settings, const Repetition& rep,
                      const std::function<Status()>& settle,
                      const std::function<Status()>& finish) {
  std::uint64_t index = 0;
  for (; index < settings.warmup; ++index) FERRY_RETURN_IF_ERROR(rep(index).status());
  if (settle) FERRY_RETURN_IF_ERROR(settle());
  std::vector<double> samples;
  const Clock::time_point start = Clock::now();
  while (samples.size() < settings.max_reps) {
    FERRY_ASSIGN_OR_RETURN(double seconds, rep(index++));
    samples.push_back(seconds);
    if (samples.size() >= settings.min_reps && Clock::now() - start >= settings.min_time) break;
  }
  if (finish) FERRY_RETURN_IF_ERROR(finish());
  Timing timing;
  timing.window_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  timing.reps = samples.size();
  if (samples.empty()) return timing;
  std::sort(samples.begin(), samples.end());
  const std::size_t mid = samples.size() / 2;
  timing.median_seconds =
      samples.size() % 2 == 1 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
  timing.best_seconds = samples.front();
  return timing;
}

Result<Timing> repeat_steps(const RepeatSettings& settings,
                            const std::function<Status(std::uint64_t)>& step,
                            const std::function<Status()>& settle,
                            const std::function<Status()>& finish) {
  const Repetition rep = [&](std::uint64_t i) -> Result<double> {
    FERRY_RETURN_IF_ERROR(step(i));
    return 0.0;
  };
  return repeat(settings, rep, settle, finish);
}

}  // namespace ferry::cli
