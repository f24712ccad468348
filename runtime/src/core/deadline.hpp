// One way to turn a Timeout into a point in time, used by every wait in ferry (core, pipelines,
// backends). A timeout of any size means that long, never "at once": timeouts too long to add to
// the clock (Timeout::max() - 1, say) are clamped to "forever", negative ones mean "do not wait".
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "ferry/types.hpp"

namespace ferry::detail {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Timeouts at least this long wait forever (adding them to the clock could overflow).
  static constexpr Timeout kForever = std::chrono::hours(24 * 365 * 100);

  explicit Deadline(Timeout timeout) : infinite_(timeout >= kForever) {
    if (!infinite_) {
      at_ = Clock::now() +
            std::chrono::duration_cast<Clock::duration>(std::max(timeout, Timeout::zero()));
    }
  }
  static Deadline forever() { return Deadline(kInfinite); }

  bool infinite() const noexcept { return infinite_; }
  bool passed() const { return !infinite_ && Clock::now() >= at_; }
  // What is left: kInfinite when infinite, zero once passed.
  Timeout remaining() const {
    if (infinite_) return kInfinite;
    const auto left = at_ - Clock::now();
    return left > Clock::duration::zero() ? std::chrono::duration_cast<Timeout>(left)
                                          : Timeout::zero();
  }
  // The point in time; Clock::time_point::max() when infinite.
  Clock::time_point at() const noexcept { return infinite_ ? Clock::time_point::max() : at_; }

  // Waits on `cv` until `ready()` or the deadline; returns ready().
  template <typename Predicate>
  bool wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
            Predicate ready) const {
    if (infinite_) {
      cv.wait(lock, ready);
      return true;
    }
    return cv.wait_until(lock, at_, ready);
  }

 private:
  bool infinite_;
  Clock::time_point at_{};
};

}  // namespace ferry::detail
