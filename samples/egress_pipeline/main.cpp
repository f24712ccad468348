// egress_pipeline: device results streamed to files through EgressPipeline, with a timeline.
//
// Each step "computes" an output of M MiB on the compute queue into one of a ring of device
// buffers and pushes it to an EgressPipeline, which downloads it in 1 MiB chunks into pinned
// leases on the download queue; worker threads write each chunk at its offset of the step's file
// and checksum it. At the end every file is read back and checked against the bytes the host
// expects, and a timeline of the first steps shows the compute and download of step i+1
// overlapping the host work on step i.
//
//   egress_pipeline [--backend auto|cpu|vulkan|cuda] [--steps N] [--mib M] [--out DIR]
//                   [--workers W] [--trace FILE]
//
// Exit status: 0 success, 1 error or a file whose bytes are wrong, 2 bad usage.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include "ferry/ferry.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr std::uint64_t kChunkBytes = 1ull << 20;  // the pipeline's download and consumer unit
constexpr std::size_t kRing = 3;                   // device outputs in rotation
constexpr std::uint32_t kScratchFills = 3;         // extra fills that make the compute take time
constexpr std::size_t kTimelineSteps = 6;
constexpr int kBarColumns = 60;

constexpr const char* kUsage =
    "Usage: egress_pipeline [--backend auto|cpu|vulkan|cuda] [--steps N] [--mib M]\n"
    "                       [--out DIR] [--workers W] [--trace FILE]\n"
    "\n"
    "  --backend  device to run on (default auto: cuda, then vulkan, then cpu)\n"
    "  --trace    write a trace of the device's work to FILE (ui.perfetto.dev opens it)\n"
    "  --steps    outputs computed and streamed to files (default 16)\n"
    "  --mib      size of each output in MiB (default 8)\n"
    "  --out      folder for the files step_NNNN.bin (default egress_out)\n"
    "  --workers  consumer threads (default 2)\n"
    "\n"
    "Exit status: 0 success, 1 error or a file whose bytes are wrong, 2 bad usage.\n";

struct Options {
  std::string backend = "auto";
  std::string trace;  // --trace: where to write a trace of the device's work; empty: none
  std::uint32_t steps = 16;
  std::uint32_t mib = 8;
  fs::path out = "egress_out";
  std::uint32_t workers = 2;
};

int fail(const ferry::Status& status) {
  std::fprintf(stderr, "egress_pipeline: %s\n", status.to_string().c_str());
  return kExitFailure;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "egress_pipeline: %s\n\n%s", message.c_str(), kUsage);
  return kExitUsage;
}

std::optional<std::uint32_t> parse_count(std::string_view text, std::uint32_t min,
                                         std::uint32_t max) {
  std::uint32_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return std::nullopt;
  }
  return value;
}

// The options, or the exit status to return (help or a usage error).
std::variant<Options, int> parse_args(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (i + 1 >= argc) return usage_error("missing value after " + std::string(arg));
    const std::string_view value = argv[++i];
    auto count = [&](std::uint32_t& field, std::uint32_t max) -> std::optional<int> {
      const auto parsed = parse_count(value, 1, max);
      if (!parsed) {
        return usage_error(std::string(arg) + " must be 1 to " + std::to_string(max) + ", got '" +
                           std::string(value) + "'");
      }
      field = *parsed;
      return std::nullopt;
    };
    std::optional<int> error;
    if (arg == "--backend") {
      options.backend = value;
    } else if (arg == "--trace") {
      options.trace = value;
    } else if (arg == "--out") {
      options.out = value;
    } else if (arg == "--steps") {
      error = count(options.steps, 100'000);
    } else if (arg == "--mib") {
      error = count(options.mib, 4096);
    } else if (arg == "--workers") {
      error = count(options.workers, 64);
    } else {
      return usage_error("unknown option " + std::string(arg));
    }
    if (error) return *error;
  }
  return options;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A step's output: first_pattern over the first third, second_pattern from there on. fill
// starts the pattern's byte phase at its offset, which here is not a multiple of 4.
std::uint32_t first_pattern(std::uint64_t step) {
  return 0x9E3779B9u * (static_cast<std::uint32_t>(step) + 1);
}
std::uint32_t second_pattern(std::uint64_t step) {
  return 0x85EBCA6Bu * (static_cast<std::uint32_t>(step) + 7);
}
std::uint64_t split(std::uint64_t size) { return size / 3; }

// The "compute": fill (and normalize) are ferry's only kernels, so full-size fills with scratch
// patterns stand in for real work that takes measurable time; the last two leave the result.
ferry::Status record_compute(ferry::CommandList& list, const ferry::Buffer& output,
                             std::uint64_t step, std::uint64_t size) {
  for (std::uint32_t pass = 0; pass < kScratchFills; ++pass) {
    FERRY_RETURN_IF_ERROR(ferry::fill(list, output, 0, size, 0xDEAD0000u + pass));
  }
  FERRY_RETURN_IF_ERROR(ferry::fill(list, output, 0, size, first_pattern(step)));
  return ferry::fill(list, output, split(size), size - split(size), second_pattern(step));
}

// What the host expects the step's file to hold.
std::vector<std::byte> expected_bytes(std::uint64_t step, std::uint64_t size) {
  std::vector<std::byte> bytes(size);
  const std::uint64_t middle = split(size);
  for (std::uint64_t i = 0; i < size; ++i) {
    const std::uint32_t pattern = i < middle ? first_pattern(step) : second_pattern(step);
    const std::uint64_t phase = (i < middle ? i : i - middle) % 4;
    bytes[i] = static_cast<std::byte>(pattern >> (8 * phase));
  }
  return bytes;
}

// FNV-1a, 64-bit: simple, and enough to show that the bytes arrived intact.
std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t hash = 0xCBF29CE484222325ull) {
  for (std::byte b : bytes) hash = (hash ^ std::to_integer<std::uint64_t>(b)) * 0x100000001B3ull;
  return hash;
}

// Chunks reach the consumers in any order (EgressOrder::as_completed), so each chunk is hashed
// on its own and a step's checksum is FNV-1a over its chunks' hashes, in chunk order.
std::uint64_t step_checksum(const std::vector<std::uint64_t>& chunk_hashes) {
  return fnv1a(std::as_bytes(std::span(chunk_hashes)));
}

std::uint64_t expected_checksum(std::span<const std::byte> bytes) {
  std::vector<std::uint64_t> hashes;
  for (std::uint64_t at = 0; at < bytes.size(); at += kChunkBytes) {
    hashes.push_back(
        fnv1a(bytes.subspan(at, std::min<std::uint64_t>(kChunkBytes, bytes.size() - at))));
  }
  return step_checksum(hashes);
}

// Written by the consumer threads, each chunk's entry by one call only; read after drain.
struct StepRecord {
  double submitted_ms = 0;             // the compute submission returned
  double pushed_ms = 0;                // push() returned: every chunk's download is submitted
  std::vector<double> chunk_start_ms;  // the consumer starts once the chunk's download is done
  std::vector<double> chunk_end_ms;
  std::vector<std::uint64_t> chunk_hashes;
};

// One line per step with a bar, so that step i+1's compute and download can be seen running
// while the consumers work on step i.
void print_timeline(const std::vector<StepRecord>& records, std::uint32_t max_pending_steps) {
  const std::size_t shown = std::min(records.size(), kTimelineSteps);
  double end_ms = 0;
  for (std::size_t i = 0; i < shown; ++i) {
    for (double t : records[i].chunk_end_ms) end_ms = std::max(end_ms, t);
  }
  auto column = [&](double t) {
    return std::clamp(static_cast<int>(t / end_ms * kBarColumns), 0, kBarColumns - 1);
  };
  auto draw = [&](std::string& bar, double from, double to, char mark) {
    for (int c = column(from); c <= column(to); ++c) bar[static_cast<std::size_t>(c)] = mark;
  };
  std::printf(
      "\ntimeline of the first %zu steps (ms from the start; the bars span 0 to %.2f ms)\n"
      "  '=' push() running: it blocks while %u pushed steps are not yet consumed\n"
      "  '.' waiting for the compute, the download (a chunk's consumer starts once its\n"
      "      download is done) or a free worker\n"
      "  '#' a consumer writing and checksumming a chunk\n"
      "step  submitted  pushed   consumed\n",
      shown, end_ms, max_pending_steps);
  for (std::size_t i = 0; i < shown; ++i) {
    const StepRecord& r = records[i];
    const double start = *std::min_element(r.chunk_start_ms.begin(), r.chunk_start_ms.end());
    const double end = *std::max_element(r.chunk_end_ms.begin(), r.chunk_end_ms.end());
    std::string bar(kBarColumns, ' ');
    draw(bar, r.pushed_ms, end, '.');
    draw(bar, r.submitted_ms, r.pushed_ms, '=');
    for (std::size_t c = 0; c < r.chunk_start_ms.size(); ++c) {
      draw(bar, r.chunk_start_ms[c], r.chunk_end_ms[c], '#');
    }
    std::printf("%4zu  %8.2f  %7.2f  %7.2f-%-7.2f |%s|\n", i, r.submitted_ms, r.pushed_ms, start,
                end, bar.c_str());
  }
  std::printf("\n");
}

int run(const Options& options) {
  using namespace ferry;
  const std::uint64_t bytes = std::uint64_t{options.mib} << 20;
  const std::uint64_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;

  DeviceOptions device_options;
  device_options.trace_path = options.trace;
  auto device = Device::open(options.backend, 0, device_options);
  if (!device.ok()) return fail(device.status());
  std::printf("device: %s (%s)\n", device->info().name.c_str(),
              std::string(to_string(device->backend())).c_str());

  // One file per step, made empty up front so the consumers only open, seek and write.
  std::error_code error;
  fs::create_directories(options.out, error);
  if (error) {
    return fail(Status(ErrorCode::failed_precondition,
                       "--out " + options.out.string() + ": " + error.message()));
  }
  std::vector<fs::path> files;
  std::vector<StepRecord> records(options.steps);
  for (std::uint32_t step = 0; step < options.steps; ++step) {
    char name[32];
    std::snprintf(name, sizeof(name), "step_%04u.bin", step);
    files.push_back(options.out / name);
    if (!std::ofstream(files.back(), std::ios::binary | std::ios::trunc)) {
      return fail(Status(ErrorCode::failed_precondition, "cannot create " + files.back().string()));
    }
    records[step].chunk_start_ms.resize(chunks);
    records[step].chunk_end_ms.resize(chunks);
    records[step].chunk_hashes.resize(chunks);
  }

  std::vector<Buffer> outputs;
  for (std::size_t i = 0; i < kRing; ++i) {
    auto output = device->create_buffer(bytes);
    if (!output.ok()) return fail(output.status());
    outputs.push_back(std::move(*output));
  }

  Clock::time_point start;  // set once the pipeline is made, before the first step
  EgressOptions egress;
  egress.workers = options.workers;
  egress.order = EgressOrder::as_completed;
  egress.chunk_bytes = kChunkBytes;
  auto consumer = [&records, &files, &start, chunks](const EgressChunk& chunk) -> Status {
    if (chunk.index >= chunks) {
      return Status(ErrorCode::internal, "chunk " + std::to_string(chunk.index) + " of a step of " +
                                             std::to_string(chunks));
    }
    StepRecord& record = records[chunk.step];
    record.chunk_start_ms[chunk.index] = ms_since(start);
    std::fstream file(files[chunk.step], std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(chunk.offset));
    file.write(reinterpret_cast<const char*>(chunk.bytes.data()),
               static_cast<std::streamsize>(chunk.bytes.size()));
    file.close();
    if (!file) {
      return Status(ErrorCode::failed_precondition,
                    "writing " + std::to_string(chunk.bytes.size()) + " bytes at offset " +
                        std::to_string(chunk.offset) + " of " + files[chunk.step].string());
    }
    record.chunk_hashes[chunk.index] = fnv1a(chunk.bytes);
    record.chunk_end_ms[chunk.index] = ms_since(start);
    return Status();
  };
  auto pipeline = EgressPipeline::create(*device, egress, consumer);
  if (!pipeline.ok()) return fail(pipeline.status());

  start = Clock::now();
  const Queue compute_queue = device->queue(QueueKind::compute);
  std::vector<TimelinePoint> last_read(kRing);  // per ring slot: its previous download is done
  for (std::uint32_t step = 0; step < options.steps; ++step) {
    const std::size_t slot = step % kRing;
    CommandList compute;
    if (Status s = record_compute(compute, outputs[slot], step, bytes); !s.ok()) return fail(s);
    // Overwrite the slot only once the download of the step that used it last has read it: a
    // wait on the device, so the host never blocks here.
    SubmitSync sync;
    if (last_read[slot].timeline) sync.wait.push_back(last_read[slot]);
    auto ready = compute_queue.submit(std::move(compute), sync);
    if (!ready.ok()) return fail(ready.status());
    records[step].submitted_ms = ms_since(start);
    auto ticket = pipeline->push(outputs[slot], 0, bytes, *ready);
    if (!ticket.ok()) return fail(ticket.status());
    records[step].pushed_ms = ms_since(start);
    last_read[slot] = ticket->output_read;
  }
  if (Status s = pipeline->close(); !s.ok()) return fail(s);
  const double seconds = ms_since(start) / 1e3;

  print_timeline(records, egress.max_pending_steps);
  const double megabytes = static_cast<double>(bytes) * options.steps / 1e6;
  std::printf(
      "%u steps of %u MiB (%llu chunks each, %u workers) in %.3f s: %.1f MB/s computed, "
      "downloaded, written and checksummed\n\n",
      options.steps, options.mib, static_cast<unsigned long long>(chunks), options.workers, seconds,
      megabytes / seconds);

  // Check: each file and each consumer checksum against the bytes the fills must have made.
  bool all_ok = true;
  std::vector<std::byte> written(bytes);
  for (std::uint32_t step = 0; step < options.steps; ++step) {
    const std::vector<std::byte> expected = expected_bytes(step, bytes);
    const std::uint64_t checksum = step_checksum(records[step].chunk_hashes);
    std::ifstream file(files[step], std::ios::binary);
    file.read(reinterpret_cast<char*>(written.data()), static_cast<std::streamsize>(bytes));
    const bool same_file = file.gcount() == static_cast<std::streamsize>(bytes) &&
                           file.peek() == std::ifstream::traits_type::eof() &&
                           std::memcmp(written.data(), expected.data(), bytes) == 0;
    const bool same_checksum = checksum == expected_checksum(expected);
    all_ok = all_ok && same_file && same_checksum;
    std::printf("step %u: %llu bytes, checksum %016llx, %s\n", step,
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(checksum),
                same_file && same_checksum ? "ok"
                : same_file                ? "WRONG (checksum differs from the expected bytes')"
                                           : "WRONG (the file differs from the expected bytes)");
  }

  if (const std::uint64_t messages = device->validation_message_count(); messages != 0) {
    return fail(Status(ErrorCode::internal,
                       std::to_string(messages) + " validation messages (printed above)"));
  }
  return all_ok ? 0 : kExitFailure;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parse_args(argc, argv);
  if (const int* exit_status = std::get_if<int>(&parsed)) return *exit_status;
  return run(std::get<Options>(parsed));
}
