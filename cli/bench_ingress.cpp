// `ferry bench ingress`: feeding normalized image batches to the device, the old way (convert to
// float32 on the host, upload four times the bytes) against ferry's IngressPipeline (upload
// uint8, normalize on the device), in one run so that the ratios are measured like for like.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>

#include "baselines/cpu_convert.hpp"
#include "bench_common.hpp"
#include "ops/op_case.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kOptions[] = {
    {.name = "--shapes", .kind = OptionKind::shapes, .metavar = "LIST",
     .help = "comma-separated NxHxWxC batch shapes; those that do not fit in memory are skipped "
             "and listed", .fallback = "64x224x224x3,8x1080x1920x3"},
    {.name = "--min-time-ms", .kind = OptionKind::count, .metavar = "N",
     .help = "time measured per stream, after the warm-up", .fallback = "500", .quick = "50",
     .max = 3'600'000},
    {.name = "--depth", .kind = OptionKind::count, .metavar = "N",
     .help = "batches in flight: IngressOptions::depth, and the bound of the other streams",
     .fallback = "3", .min = 2, .max = 16},
};

enum class Mode : std::uint8_t { cpu_convert, upload_f32, ferry_ingress, ferry_ingress_pageable };
constexpr Mode kModes[] = {Mode::cpu_convert, Mode::upload_f32, Mode::ferry_ingress,
                           Mode::ferry_ingress_pageable};
constexpr const char* kModeNames[] = {"cpu-convert", "upload-f32", "ferry-ingress",
                                      "ferry-ingress-pageable"};
constexpr std::uint32_t kSourceBatches = 3;  // of each kind, prepared before timing and cycled
constexpr ElementType kF32 = ElementType::float32;

struct Settings {
  std::uint32_t depth = 3;  // batches in flight (the pipeline's IngressOptions::depth)
  RepeatSettings batches;   // warm-up batches (batch 0 is checked), then timed ones
};

// One steady-state window of a stream: from the start of the first timed batch (warm-up
// drained) to the last one's completion.
struct Stream {
  std::uint64_t batches = 0;
  double seconds = kNaN;
  std::uint64_t h2d_bytes_per_batch = 0;  // host bytes sent over the bus per batch
  double rate() const { return static_cast<double>(batches) / seconds; }  // NaN: not measured
};

// One batch of a stream: submits it and returns the point at which it is complete. Points of one
// stream lie on one queue's progress timeline, so reaching one means all before it are done.
using BatchStep = std::function<Result<TimelinePoint>(std::uint64_t index)>;

// Warm-up batches, then waits for them all, so that the timed window starts with the device
// free of warm-up work (an IngressPipeline's producer may already have queued the next batches:
// that read-ahead is its steady state). The window ends when the last batch is complete. At most
// `depth` batches are outstanding from the host's side, as a consumer that keeps up with the
// device would have them.
Result<Timing> time_stream(const Settings& settings, const BatchStep& step) {
  std::deque<TimelinePoint> outstanding;
  auto drain = [&]() -> Status {
    if (!outstanding.empty()) FERRY_RETURN_IF_ERROR(outstanding.back().wait(kWaitTimeout));
    outstanding.clear();
    return ok_status();
  };
  auto one = [&](std::uint64_t index) -> Status {
    if (outstanding.size() >= settings.depth) {
      FERRY_RETURN_IF_ERROR(outstanding.front().wait(kWaitTimeout));
      outstanding.pop_front();
    }
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, step(index));
    outstanding.push_back(std::move(done));
    return ok_status();
  };
  return repeat_steps(settings.batches, one, drain, drain);
}

// The source batches of one shape on one device, and the exact reference of batch 0.
class IngressBench {
 public:
  IngressBench(const Device& device, const BatchShape& shape, HostThreadPool& threads)
      : device_(device), threads_(threads), params_(imagenet_normalize_params(shape, kF32)) {}

  // Random source batches (`seed` picks them) and the reference tensor of batch 0.
  Status prepare(std::uint64_t seed) {
    FERRY_ASSIGN_OR_RETURN(shape_, resolve_normalize(params_));
    FERRY_ASSIGN_OR_RETURN(factors_, normalize_factors(params_));
    for (std::uint32_t i = 0; i < kSourceBatches; ++i) {
      fill_random(pageable_.emplace_back(shape_.input_bytes), seed + i);
      FERRY_ASSIGN_OR_RETURN(Buffer pinned, pinned_copy(device_, pageable_.back()));
      pinned_.push_back(std::move(pinned));
    }
    reference_.resize(shape_.elements());
    convert(0, reference_.data(), ConvertRounding::fused);
    FERRY_ASSIGN_OR_RETURN(readback_,
                           device_.create_buffer(output_bytes(), MemoryKind::host_readback));
    return ok_status();
  }

  // Warm-up batches (the first checked), then a timed steady-state window.
  Result<Stream> run(Mode mode, const Settings& settings) {
    const std::string what = kModeNames[int(mode)] + std::string(" batch 0");
    Result<Stream> result = mode == Mode::cpu_convert || mode == Mode::upload_f32
                                ? stream_f32(mode == Mode::cpu_convert, settings, what)
                                : stream_ingress(mode == Mode::ferry_ingress, settings, what);
    // Work queued past the window (a pipeline's read-ahead) ends before the next measurement.
    const Status idle = device_.wait_idle(kWaitTimeout);
    if (!result.ok()) return result.status().with_context(kModeNames[int(mode)]);
    FERRY_RETURN_IF_ERROR(idle);
    return result;
  }

 private:
  std::uint64_t output_bytes() const { return shape_.elements() * 4; }
  void convert(std::uint32_t source, float* out, ConvertRounding rounding) {
    convert_nhwc_to_nchw_f32({shape_.batch, shape_.height, shape_.width, shape_.channels},
                             reinterpret_cast<const std::uint8_t*>(pageable_[source].data()), out,
                             factors_, rounding, threads_);
  }

  // The old way: float32 converted on the host and uploaded, either by the host threads into
  // one of `depth` pinned leases while the previous batch uploads (cpu-convert), or before
  // timing into pinned buffers, leaving the transfer alone (upload-f32).
  Result<Stream> stream_f32(bool convert_each, const Settings& settings, const std::string& what) {
    const std::uint64_t bytes = output_bytes();
    StagingPool pool;                             // cpu-convert: one batch per lease
    std::vector<Buffer> sources;                  // upload-f32
    std::vector<std::span<std::byte>> converted;  // upload-f32: the sources' bytes
    if (convert_each) {
      FERRY_ASSIGN_OR_RETURN(
          pool, reserved_pool(device_, MemoryKind::host_upload, round_up(bytes, kStagingAlignment),
                              settings.depth));
    } else {
      FERRY_ASSIGN_OR_RETURN(
          sources, create_buffers(device_, kSourceBatches, bytes, MemoryKind::host_upload));
      for (std::uint32_t i = 0; i < kSourceBatches; ++i) {
        FERRY_ASSIGN_OR_RETURN(std::span<std::byte> source, sources[i].host_span());
        convert(i, reinterpret_cast<float*>(source.data()), ConvertRounding::separate);
        converted.push_back(source);
      }
    }
    FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> targets,
                           create_buffers(device_, settings.depth, bytes, MemoryKind::device));
    FERRY_ASSIGN_OR_RETURN(
        Timing timing, time_stream(settings, [&](std::uint64_t index) -> Result<TimelinePoint> {
          const std::uint32_t which = index % kSourceBatches;
          Lease lease;  // back to the pool when dropped, once the copy has read it
          if (convert_each) {
            FERRY_ASSIGN_OR_RETURN(lease, pool.acquire(bytes, kWaitTimeout));
            convert(which, reinterpret_cast<float*>(lease.data().data()),
                    ConvertRounding::separate);
          }
          const Buffer& target = targets[index % targets.size()];
          CommandList commands;
          FERRY_RETURN_IF_ERROR(commands.copy(convert_each ? BufferRef(lease) : sources[which], 0,
                                              target, 0, bytes));
          FERRY_ASSIGN_OR_RETURN(TimelinePoint done, upload_.submit(std::move(commands)));
          if (index == 0) {  // the float32 sent arrived intact, and holds the batch's values
            const std::span<const std::byte> sent = convert_each ? lease.data() : converted[0];
            FERRY_RETURN_IF_ERROR(check(target, done, sent, what));
            FERRY_RETURN_IF_ERROR(near_reference(sent, what + " (host conversion)"));
          }
          return done;
        }));
    return Stream{timing.reps, timing.window_seconds, bytes};
  }

  Result<Stream> stream_ingress(bool pinned, const Settings& settings, const std::string& what) {
    // Sources are cycled and never written, so they stay valid for as long as uploads read them.
    IngressSource source = [this, pinned](std::uint64_t index) -> Result<std::optional<HostBatch>> {
      const std::size_t which = index % kSourceBatches;
      return std::optional(pinned ? HostBatch::pinned(pinned_[which])
                                  : HostBatch::pageable(pageable_[which]));
    };
    FERRY_ASSIGN_OR_RETURN(IngressOptions options,
                           normalize_ingress_options(params_, settings.depth));
    FERRY_ASSIGN_OR_RETURN(IngressPipeline pipeline,
                           IngressPipeline::create(device_, options, std::move(source)));
    Result<Timing> timing =
        time_stream(settings, [&](std::uint64_t index) -> Result<TimelinePoint> {
          FERRY_ASSIGN_OR_RETURN(std::optional<IngressBatch> batch, pipeline.next(kWaitTimeout));
          if (!batch) return Status(ErrorCode::internal, "the ingress pipeline ended early");
          if (batch->index() != index) {
            return Status(ErrorCode::internal, "the ingress pipeline handed out batch " +
                                                   std::to_string(batch->index()) + " for " +
                                                   std::to_string(index));
          }
          const TimelinePoint ready = batch->ready();
          if (index == 0) {
            FERRY_RETURN_IF_ERROR(
                check(batch->tensor(), ready, std::as_bytes(std::span(reference_)), what));
          }
          // No GPU consumer: the tensor may be reused once it is ready (the pipeline waits for
          // that point on the device, not on the host).
          FERRY_RETURN_IF_ERROR(batch->release(ready));
          return ready;
        });
    pipeline.close();
    FERRY_RETURN_IF_ERROR(timing.status());
    return Stream{timing->reps, timing->window_seconds, shape_.input_bytes};
  }

  // Reads the tensor at `src` back (once `after` is reached) and compares it bit for bit.
  Status check(const BufferRef& src, const TimelinePoint& after,
               std::span<const std::byte> expected, const std::string& what) {
    FERRY_RETURN_IF_ERROR(copy_and_wait(download_, src, readback_, output_bytes(), after));
    FERRY_ASSIGN_OR_RETURN(std::span<std::byte> bytes, readback_.host_span());
    return compare_bytes(bytes, expected, what);
  }

  // A host conversion of batch 0 against the reference: within a few ulps, as its multiply and
  // add round separately.
  Status near_reference(std::span<const std::byte> converted, const std::string& what) const {
    for (std::size_t i = 0; i < reference_.size(); ++i) {
      float value = 0;
      std::memcpy(&value, converted.data() + i * 4, 4);
      if (std::fabs(value - reference_[i]) <= 1e-6f * (1.0f + std::fabs(reference_[i]))) continue;
      char detail[128];
      std::snprintf(detail, sizeof detail, ": element %zu is %.9g, expected %.9g", i,
                    static_cast<double>(value), static_cast<double>(reference_[i]));
      return Status(ErrorCode::internal, "data mismatch in " + what + detail);
    }
    return ok_status();
  }

  Device device_;
  Queue upload_ = device_.queue(QueueKind::upload);
  Queue download_ = device_.queue(QueueKind::download);
  HostThreadPool& threads_;
  NormalizeParams params_;
  NormalizeShape shape_;
  NormalizeFactors factors_;
  std::vector<std::vector<std::byte>> pageable_;  // uint8 batches in ordinary memory
  std::vector<Buffer> pinned_;                    // the same batches, host_upload
  std::vector<float> reference_;                  // batch 0 normalized with one fma per element
  Buffer readback_;                               // host_readback, a float32 tensor long
};

struct ShapeResults {
  BatchShape shape{};
  std::uint64_t input_bytes = 0, output_bytes = 0;  // uint8 in, float32 out
  std::array<Stream, std::size(kModes)> streams = {};

  double rate(Mode mode) const { return streams[int(mode)].rate(); }  // batches/s
};

Status measure_shape(Bench& bench, HostThreadPool& threads, const Settings& settings,
                     std::uint64_t seed, ShapeResults& results) {
  const std::string label = to_string(results.shape);
  FERRY_RETURN_IF_ERROR(bench.progress("preparing " + label));
  IngressBench streams(bench.device, results.shape, threads);
  FERRY_RETURN_IF_ERROR(streams.prepare(seed));
  for (Mode mode : kModes) {
    FERRY_RETURN_IF_ERROR(bench.progress("measuring " + label + " " + kModeNames[int(mode)]));
    FERRY_ASSIGN_OR_RETURN(results.streams[int(mode)], streams.run(mode, settings));
  }
  return ok_status();
}

void add_method(Report& report, const Options& options, const Settings& settings,
                unsigned host_threads) {
  const std::string min_time = options.text("--min-time-ms");
  report.add_method(
      "uint8 NHWC batches -> float32 NCHW with ImageNet mean/std; " +
          std::to_string(kSourceBatches) + " source batches cycled; streams: " +
          std::to_string(settings.batches.warmup) +
          " warm-up batches (batch 0 checked against an exact host reference), then >= " +
          min_time + " ms and >= " + std::to_string(settings.batches.min_reps) +
          " batches timed from the drained device to the last batch's completion; " +
          std::to_string(settings.depth) + " batches in flight; cpu-convert on " +
          std::to_string(host_threads) + " host threads",
      {{"min_time_ms", options.number("--min-time-ms")}, {"depth", std::uint64_t{settings.depth}},
       {"warmup_batches", settings.batches.warmup}, {"min_batches", settings.batches.min_reps},
       {"source_batches", std::uint64_t{kSourceBatches}},
       {"host_threads", std::uint64_t{host_threads}}});
}

// The shape's section, printed as soon as it is measured, and its summary line.
void add_shape_section(Bench& bench, const ShapeResults& shape) {
  Report& report = bench.report;
  const std::string label = to_string(shape.shape);
  Section& section = report.add_section(
      "Streaming " + label + " (" + format_bytes(shape.input_bytes) + " uint8 -> " +
          format_bytes(shape.output_bytes) + " float32 per batch)",
      "streaming_" + label);
  section.columns = {{"mode", "mode"}, {"batches/s", "batches_per_second", Unit::number},
                     {"ms/batch", "ms_per_batch", Unit::ms},
                     {"H2D/batch", "h2d_bytes_per_batch", Unit::bytes},
                     {"H2D GB/s", "h2d_gbps", Unit::gbps}, {"batches", "batches", Unit::count},
                     {"seconds", "seconds", Unit::seconds, true},
                     {"x upload-f32", "over_upload_f32", Unit::ratio},
                     {"x cpu-convert", "over_cpu_convert", Unit::ratio}};
  const double upload = shape.rate(Mode::upload_f32), convert = shape.rate(Mode::cpu_convert);
  for (Mode mode : kModes) {
    const Stream& s = shape.streams[int(mode)];
    section.add_row({kModeNames[int(mode)], s.rate(), 1e3 / s.rate(), s.h2d_bytes_per_batch,
                     s.h2d_bytes_per_batch * s.rate() / 1e9, s.batches, s.seconds,
                     s.rate() / upload, s.rate() / convert});
  }
  const double ingress = shape.rate(Mode::ferry_ingress);
  report.summary.emplace_back(
      "ingress " + label,
      "ferry-ingress/upload-f32 " + ratio_text(ingress / upload) + " (" +
          format_value(1e3 / ingress, Unit::ms) + " ms per batch); pageable/upload-f32 " +
          ratio_text(shape.rate(Mode::ferry_ingress_pageable) / upload) +
          "; ferry-ingress/cpu-convert " + ratio_text(ingress / convert));
  bench.publish();
}

Status run_ingress(Bench& bench) {
  const Options& options = bench.options;
  const bool quick = options.flag("--quick");
  Settings settings;
  settings.depth = static_cast<std::uint32_t>(bench.number("--depth"));
  settings.batches = {.warmup = quick ? 2 : std::max<std::uint32_t>(5, settings.depth + 2),
                      .min_reps = quick ? 3u : 20u,
                      .min_time = std::chrono::milliseconds(bench.number("--min-time-ms"))};
  bench.skipped = {"Skipped shapes", "skipped", {}, {{"shape", "shape"}, {"reason", "reason"}}};
  std::vector<ShapeResults> shapes;
  const std::uint64_t depth = settings.depth;
  for (const BatchShape& shape : options.shapes("--shapes")) {
    Result<NormalizeShape> resolved = resolve_normalize(imagenet_normalize_params(shape, kF32));
    if (!resolved.ok()) {
      bench.skipped.add_row({to_string(shape), resolved.status().message()});
      continue;
    }
    const std::uint64_t in = resolved->input_bytes, out = resolved->output_bytes;
    // Device: the pipeline's tensors and inputs (the largest stream). Host: the pageable and
    // pinned sources, the reference and readback tensors, the largest stream's own buffers
    // (float32 sources or cpu-convert leases).
    const std::uint64_t host_need = 2 * kSourceBatches * in + 2 * out +
                                    std::max<std::uint64_t>(kSourceBatches, depth) * out;
    if (bench.fits({to_string(shape)}, depth * (in + out), host_need))
      shapes.push_back({shape, in, out});
  }
  if (shapes.empty()) return bench.end_skipped(true);

  HostThreadPool threads;
  add_method(bench.report, options, settings, threads.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    FERRY_RETURN_IF_ERROR(
        measure_shape(bench, threads, settings, 0x5eed + kSourceBatches * i, shapes[i])
            .with_context("shape " + to_string(shapes[i].shape)));
    add_shape_section(bench, shapes[i]);
  }
  return bench.end_skipped(false);
}

int run(const Options& options, const std::string& command_line) {
  const auto queues = {QueueKind::upload, QueueKind::compute, QueueKind::download};
  return run_bench(options, command_line, "ferry bench ingress", queues, false, run_ingress);
}

}  // namespace

const Command kBenchIngress = {
    .name = "bench ingress",
    .summary =
        "Image batches to normalized float tensors on the device: host conversion and a float32 "
        "upload against ferry's IngressPipeline.",
    .about =
        "Per batch shape, uint8 NHWC image batches to float32 NCHW tensors (ImageNet mean/std):\n"
        "  cpu-convert             all host threads convert each batch into a pinned lease while\n"
        "                          the previous one uploads (the old way)\n"
        "  upload-f32              float32 converted before timing: the old way's transfer alone\n"
        "  ferry-ingress           IngressPipeline from pinned uint8 batches (HostBatch::pinned):\n"
        "                          upload queue, then normalize on the compute queue\n"
        "  ferry-ingress-pageable  the same from ordinary memory (HostBatch::pageable)\n"
        "in batches/s, ms per batch and H2D GB/s. Batch 0 is checked against an exact host\n"
        "reference (exit 1 on a mismatch), then a steady-state window is timed. The normalize\n"
        "kernel alone: `ferry bench op normalize`.\n",
    .options = kOptions,
    .run = run,
};

}  // namespace ferry::cli
