// What the benches share: the timing loop, test data, memory planning, plain copies and data
// checks, and the frame of a run (the device opened, the report's header, the report rendered).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/ferry.hpp"
#include "options.hpp"
#include "report.hpp"

namespace ferry::cli {

inline constexpr std::uint64_t kMiB = 1ull << 20;
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Long enough for the largest copy on a slow software device; a hang becomes an error instead.
inline constexpr Timeout kWaitTimeout = std::chrono::seconds(120);

// The one timing loop: untimed warm-up repetitions, then timed ones until both a minimum count
// and a minimum time are reached (or a maximum count); the median and best repetition, and the
// whole timed window.
struct RepeatSettings {
  std::uint64_t warmup = 1;
  std::uint64_t min_reps = 3;
  std::uint64_t max_reps = 1'000'000;
  std::chrono::duration<double, std::milli> min_time{0};
};

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
// its wall time, or less when part of it is set-up (recording a list, say).
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
Result<double> wall_time(const std::function<Status()>& body);
// repeat() with every repetition's wall time: body() once per repetition.
Result<Timing> time_each(const RepeatSettings& settings, const std::function<Status()>& body);

struct ListSettings {
  std::uint32_t commands = 20;  // per CommandList
  std::chrono::milliseconds min_time{500};
  // Buffers are cycled so that successive commands use different ones (no write-after-write
  // barrier between them, no input left in a cache by the command before) within this budget.
  std::uint64_t buffer_budget = 1ull << 30;
};

struct ListTiming {
  std::uint32_t commands = 0;
  std::uint64_t bytes_per_command = 0;  // read + written
  Timing lists;

  double us_per_command() const { return lists.median_seconds / commands * 1e6; }
  double gbps() const {
    return static_cast<double>(bytes_per_command) * commands / lists.median_seconds / 1e9;
  }
};

// One untimed list, then lists made by `record`, each submitted and waited for (the recording
// is not timed), until at least 3 lists and settings.min_time.
Result<ListTiming> time_lists(const Queue& queue,
                              const std::function<Result<CommandList>()>& record,
                              const ListSettings& settings);

// splitmix64; fill_random's bytes are those of seed, seed + 1 step, ... (fast enough to fill a
// GiB quickly, and every seed gives different bytes).
std::uint64_t mix64(std::uint64_t x);
void fill_random(std::span<std::byte> bytes, std::uint64_t seed);
std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple);
// Why `device_need` bytes of device memory (at most 90% of it) and `host_need` of host memory
// (at most 80% of what is available now, device_need included on a CPU device) do not fit;
// empty when they do.
std::string memory_shortfall(const DeviceInfo& device, std::uint64_t device_need,
                             std::uint64_t host_need);
Result<std::vector<Buffer>> create_buffers(const Device& device, std::size_t count,
                                           std::uint64_t bytes, MemoryKind kind);
// A host_upload buffer holding a copy of `bytes`.
Result<Buffer> pinned_copy(const Device& device, std::span<const std::byte> bytes);
// Every slab allocated now, so that no pinned allocation is timed.
Result<StagingPool> reserved_pool(const Device& device, MemoryKind kind, std::uint64_t slab_bytes,
                                  std::uint32_t slabs);
// One copy of `bytes` from offset 0 to offset 0, submitted (after `after`) and waited for.
Status copy_and_wait(const Queue& queue, const BufferRef& src, const BufferRef& dst,
                     std::uint64_t bytes, const TimelinePoint& after = {});
// `bytes` of `buffer` (from offset 0) read back to the host through a host_readback buffer.
Result<std::vector<std::byte>> read_back(const Device& device, const BufferRef& buffer,
                                         std::uint64_t bytes);
// Bytes per second as GB/s (1e9).
double gbps(std::uint64_t bytes, double seconds);
// "data mismatch in <what>" naming the first wrong byte, or ok.
Status compare_bytes(std::span<const std::byte> actual, std::span<const std::byte> expected,
                     std::string_view what);

// A bench being run: its options, its device (and the CPU backend, for benches that check
// results against it), and the report it fills.
struct Bench {
  const Options& options;
  Device device;
  Device reference;  // open when run_bench was asked for it
  Report report;
  Section skipped = {};  // what did not fit: the bench names the items' columns, then "reason"

  std::uint64_t number(std::string_view option) const { return options.number(option); }
  int device_index() const { return static_cast<int>(number("--device")); }
  TextShown shown = {};  // what of the report is on stdout already

  // "ferry: [N s] <what>" on stderr, when it is a terminal and the output is not JSON; an error
  // once Ctrl-C was pressed, so that the bench stops at the next step.
  Status progress(const std::string& what) const;
  // Text output: the header fields and sections added since the last publish, at once. A bench
  // calls it when a section is complete; run_bench prints the rest at the end (or on Ctrl-C).
  void publish();
  // Whether the memory fits (see memory_shortfall); a row of `skipped` (`item`, why) when not.
  bool fits(std::vector<Value> item, std::uint64_t device_need, std::uint64_t host_need);
  // `skipped` into the report when it has rows; an error naming them when nothing was measured.
  Status end_skipped(bool nothing_measured);
};

// An error once Ctrl-C was pressed during run_bench (repeat() and Bench::progress() check it).
Status check_interrupt();

// Opens the device of --backend and --device (and the CPU reference), prints the report's header,
// runs `body`, closes the devices and renders the rest of the report (text or --json on stdout,
// JSON to --json-file). Returns 1 after an error, an unwritable file or validation messages, 130
// after Ctrl-C (what was measured until then printed, the JSON marked "interrupted"), else 0.
int run_bench(const Options& options, const std::string& command_line, std::string tool,
              std::initializer_list<QueueKind> queues, bool with_reference,
              const std::function<Status(Bench&)>& body);

}  // namespace ferry::cli
