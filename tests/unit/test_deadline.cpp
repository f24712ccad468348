// One deadline helper for every wait (core/deadline.hpp): timeouts of any length wait that long
// (clamped to forever), never "at once"; negative timeouts do not wait.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/deadline.hpp"

using ferry::Timeout;
using ferry::detail::Deadline;
using Clock = std::chrono::steady_clock;

TEST_CASE("deadline: huge timeouts are forever, never already passed") {
  for (const Timeout timeout :
       {ferry::kInfinite, Timeout::max() - Timeout(1), Timeout::max() / 2, Deadline::kForever,
        Timeout(std::chrono::hours(24 * 365 * 200))}) {
    CAPTURE(timeout.count());
    const Deadline deadline(timeout);
    CHECK(deadline.infinite());
    CHECK_FALSE(deadline.passed());
    CHECK(deadline.remaining() == ferry::kInfinite);
    CHECK(deadline.at() == Clock::time_point::max());
  }
}

TEST_CASE("deadline: finite timeouts count down; zero and negative ones have passed") {
  const Deadline hour(std::chrono::hours(1));
  CHECK_FALSE(hour.infinite());
  CHECK_FALSE(hour.passed());
  CHECK(hour.remaining() <= std::chrono::hours(1));
  CHECK(hour.remaining() > std::chrono::minutes(59));
  const Deadline long_but_finite(Deadline::kForever - std::chrono::hours(1));
  CHECK_FALSE(long_but_finite.infinite());
  CHECK(long_but_finite.remaining() > std::chrono::hours(24 * 365 * 99));
  for (const Timeout timeout : {Timeout::zero(), Timeout(-1), Timeout::min(),
                                Timeout(std::chrono::seconds(-5))}) {
    CAPTURE(timeout.count());
    const Deadline deadline(timeout);
    CHECK_FALSE(deadline.infinite());
    CHECK(deadline.passed());
    CHECK(deadline.remaining() == Timeout::zero());
  }
}

TEST_CASE("deadline: a condition-variable wait with a huge timeout waits for the condition") {
  std::mutex mutex;
  std::condition_variable cv;
  bool ready = false;
  const auto start = Clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    {
      std::lock_guard lock(mutex);
      ready = true;
    }
    cv.notify_all();
  });
  std::unique_lock lock(mutex);
  CHECK(Deadline(Timeout::max() - Timeout(1)).wait(cv, lock, [&] { return ready; }));
  lock.unlock();
  setter.join();
  CHECK(Clock::now() - start >= std::chrono::milliseconds(45));

  // A short one runs out, in about the time asked for.
  lock.lock();
  const auto short_start = Clock::now();
  CHECK_FALSE(Deadline(std::chrono::milliseconds(30)).wait(cv, lock, [] { return false; }));
  const auto waited = Clock::now() - short_start;
  CHECK(waited >= std::chrono::milliseconds(29));
  CHECK(waited < std::chrono::seconds(5));
}
