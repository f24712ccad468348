// What the benches share: test data, memory planning, plain copies and data checks, and the
// frame of a run (the device opened, the report's header, the report rendered at the end).
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

// Long enough for the largest copy on a slow software device; a hang becomes an error instead.
inline constexpr Timeout kWaitTimeout = std::chrono::seconds(120);
inline constexpr std::uint64_t kMiB = 1ull << 20;
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// splitmix64: a well-mixed 64-bit value of `x`; fill_random's bytes are those of seed, seed + 1
// step, ... (fast enough to fill a GiB quickly, and every seed gives different bytes).
std::uint64_t mix64(std::uint64_t x);
void fill_random(std::span<std::byte> bytes, std::uint64_t seed);
std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple);
// Why buffers of `device_need` bytes of device memory (at most 90% of it) and `host_need` of
// host memory (at most 80% of what is available now, device_need included when the device is
// the CPU) do not fit; empty when they do.
std::string memory_shortfall(const DeviceInfo& device, std::uint64_t device_need,
                             std::uint64_t host_need);
Result<std::vector<Buffer>> create_buffers(const Device& device, std::size_t count,
                                           std::uint64_t bytes, MemoryKind kind);
// A host_upload buffer holding a copy of `bytes`.
Result<Buffer> pinned_copy(const Device& device, std::span<const std::byte> bytes);
// A staging pool of `slabs` slabs, all allocated now so that no pinned allocation is timed.
Result<StagingPool> reserved_pool(const Device& device, MemoryKind kind, std::uint64_t slab_bytes,
                                  std::uint32_t slabs);
// One copy of `bytes` from offset 0 to offset 0, submitted (after `after`, when given) and
// waited for.
Status copy_and_wait(const Queue& queue, const BufferRef& src, const BufferRef& dst,
                     std::uint64_t bytes, const TimelinePoint& after = {});
// An ErrorCode::internal "data mismatch in <what>" naming the first wrong byte, or ok.
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
  // "ferry: <what>" on stderr, when it is a terminal and the output is not JSON.
  void progress(const std::string& what) const;
  // Whether `device_need` and `host_need` bytes fit (see memory_shortfall); a row of `skipped`
  // (`item`, then why) when not.
  bool fits(std::vector<Value> item, std::uint64_t device_need, std::uint64_t host_need);
  // `skipped` into the report when it has rows; an error naming them when nothing was measured.
  Status end_skipped(bool nothing_measured);
};

// The frame of every bench: opens the device that --backend and --device name (and the CPU
// reference), starts the report (date, command, device, the native queues serving `queues`),
// runs `body`, closes the devices and renders the report: text, or JSON with --json, on stdout;
// JSON also to --json-file. Returns 0, or 1 after an error of `body` (printed with its
// context), a file that cannot be written, or validation messages.
int run_bench(const Options& options, const std::string& command_line, std::string tool,
              std::initializer_list<QueueKind> queues, bool with_reference,
              const std::function<Status(Bench&)>& body);

}  // namespace ferry::cli
