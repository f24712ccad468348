#include "ingress_modes.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "bench_common.hpp"

namespace ferry::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Long enough for a large batch on a slow software device; a hang becomes an error instead.
constexpr Timeout kWaitTimeout = std::chrono::seconds(120);
constexpr std::size_t kMinLists = 3;
constexpr std::size_t kMaxLists = 100'000;

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

HostImageBatch host_image_batch(const NormalizeShape& shape) {
  return {shape.batch, shape.height, shape.width, shape.channels};
}

const std::uint8_t* as_uint8(const std::byte* bytes) {
  return reinterpret_cast<const std::uint8_t*>(bytes);
}
float* as_float(std::byte* bytes) { return reinterpret_cast<float*>(bytes); }

// One batch of a stream: submits it and returns the point at which it is complete. Points of one
// stream lie on one queue's progress timeline, so reaching one means all before it are done.
using BatchStep = std::function<Result<TimelinePoint>(std::uint64_t index)>;

// Warm-up batches, then waits for them all, so that the timed window starts with the device
// free of warm-up work (an IngressPipeline's producer may already have queued the next batches:
// that read-ahead is its steady state). The window runs until both minimums are met, and ends
// when the last batch is complete. At most `depth` batches are outstanding from the host's side,
// as a consumer that keeps up with the device would have them.
Result<StreamResult> time_stream(const StreamSettings& settings, const BatchStep& step) {
  std::deque<TimelinePoint> outstanding;
  std::uint64_t index = 0;
  auto one = [&]() -> Status {
    if (outstanding.size() >= settings.depth) {
      FERRY_RETURN_IF_ERROR(outstanding.front().wait(kWaitTimeout));
      outstanding.pop_front();
    }
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, step(index));
    outstanding.push_back(std::move(done));
    ++index;
    return ok_status();
  };
  for (std::uint32_t i = 0; i < settings.warmup_batches; ++i) FERRY_RETURN_IF_ERROR(one());
  if (!outstanding.empty()) FERRY_RETURN_IF_ERROR(outstanding.back().wait(kWaitTimeout));
  outstanding.clear();

  StreamResult result;
  const Clock::time_point start = Clock::now();
  do {
    FERRY_RETURN_IF_ERROR(one());
    ++result.batches;
  } while (result.batches < settings.min_batches || Clock::now() - start < settings.min_time);
  FERRY_RETURN_IF_ERROR(outstanding.back().wait(kWaitTimeout));
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace

Result<KernelResult> time_lists(const Queue& queue,
                                const std::function<Result<CommandList>()>& record,
                                const KernelSettings& settings) {
  auto run_one = [&]() -> Result<double> {
    FERRY_ASSIGN_OR_RETURN(CommandList list, record());
    const Clock::time_point t0 = Clock::now();
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, queue.submit(std::move(list)));
    FERRY_RETURN_IF_ERROR(done.wait(kWaitTimeout));
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  FERRY_RETURN_IF_ERROR(run_one().status());
  std::vector<double> seconds;
  const Clock::time_point start = Clock::now();
  while (seconds.size() < kMaxLists) {
    FERRY_ASSIGN_OR_RETURN(double one, run_one());
    seconds.push_back(one);
    if (seconds.size() >= kMinLists && Clock::now() - start >= settings.min_time) break;
  }
  std::sort(seconds.begin(), seconds.end());
  const std::size_t mid = seconds.size() / 2;
  KernelResult result;
  result.commands = settings.commands;
  result.lists = seconds.size();
  result.median_seconds =
      seconds.size() % 2 == 1 ? seconds[mid] : (seconds[mid - 1] + seconds[mid]) / 2;
  return result;
}

namespace {

// How many source/destination sets to cycle through: as many as fit in the budget, at least
// one, at most one per command.
std::uint32_t buffer_sets(std::uint64_t bytes_per_set, const KernelSettings& settings) {
  const std::uint64_t fit = settings.destination_budget / std::max<std::uint64_t>(1, bytes_per_set);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(fit, 1, settings.commands));
}

Status copy_and_wait(const Queue& queue, const BufferRef& src, const BufferRef& dst,
                     std::uint64_t bytes) {
  CommandList commands;
  FERRY_RETURN_IF_ERROR(commands.copy(src, 0, dst, 0, bytes));
  FERRY_ASSIGN_OR_RETURN(TimelinePoint done, queue.submit(std::move(commands)));
  return done.wait(kWaitTimeout);
}

}  // namespace

std::string_view to_string(IngressMode mode) {
  switch (mode) {
    case IngressMode::cpu_convert: return "cpu-convert";
    case IngressMode::upload_f32: return "upload-f32";
    case IngressMode::ferry_ingress: return "ferry-ingress";
    case IngressMode::ferry_ingress_pageable: return "ferry-ingress-pageable";
  }
  return "?";
}

NormalizeParams imagenet_normalize_params(const BatchShape& shape, ElementType output) {
  // ImageNet statistics of 0..1 images, scaled to uint8 units; a fourth channel gets 0.5 / 0.25.
  constexpr double kMean[kMaxNormalizeChannels] = {0.485, 0.456, 0.406, 0.5};
  constexpr double kStd[kMaxNormalizeChannels] = {0.229, 0.224, 0.225, 0.25};
  NormalizeParams params;
  params.input.batch = shape[0];
  params.input.height = shape[1];
  params.input.width = shape[2];
  params.input.channels = shape[3];
  params.input.layout = ImageLayout::nhwc;
  params.output_type = output;
  params.output_layout = ImageLayout::nchw;
  for (std::uint32_t c = 0; c < kMaxNormalizeChannels; ++c) {
    params.mean[c] = kMean[c] * 255.0;
    params.std[c] = kStd[c] * 255.0;
  }
  return params;
}

Result<std::unique_ptr<IngressBench>> IngressBench::create(const Device& device,
                                                           const BatchShape& shape,
                                                           std::uint64_t seed,
                                                           HostThreadPool& threads) {
  std::unique_ptr<IngressBench> bench(new IngressBench());
  bench->device_ = device;
  bench->compute_ = device.queue(QueueKind::compute);
  bench->upload_ = device.queue(QueueKind::upload);
  bench->download_ = device.queue(QueueKind::download);
  bench->threads_ = &threads;
  bench->params_ = imagenet_normalize_params(shape, ElementType::float32);
  FERRY_ASSIGN_OR_RETURN(bench->shape_, resolve_normalize(bench->params_));
  FERRY_ASSIGN_OR_RETURN(bench->factors_, normalize_factors(bench->params_));

  const std::uint64_t input_bytes = bench->shape_.input_bytes;
  for (std::uint32_t i = 0; i < kSourceBatches; ++i) {
    std::vector<std::byte>& pageable = bench->pageable_sources_.emplace_back(input_bytes);
    fill_random(pageable, seed + i);
    FERRY_ASSIGN_OR_RETURN(Buffer pinned,
                           device.create_buffer(input_bytes, MemoryKind::host_upload));
    FERRY_ASSIGN_OR_RETURN(std::span<std::byte> pinned_bytes, pinned.host_span());
    std::memcpy(pinned_bytes.data(), pageable.data(), input_bytes);
    bench->pinned_sources_.push_back(std::move(pinned));
  }
  bench->reference_.resize(bench->shape_.elements());
  convert_nhwc_to_nchw_f32(host_image_batch(bench->shape_),
                           as_uint8(bench->pageable_sources_[0].data()), bench->reference_.data(),
                           bench->factors_, ConvertRounding::fused, threads);
  FERRY_ASSIGN_OR_RETURN(
      bench->readback_,
      device.create_buffer(bench->output_f32_bytes(), MemoryKind::host_readback));
  return bench;
}

Result<StreamResult> IngressBench::run_stream(IngressMode mode, const StreamSettings& settings) {
  Result<StreamResult> result = Status(ErrorCode::invalid_argument, "unknown ingress mode");
  switch (mode) {
    case IngressMode::cpu_convert: result = stream_cpu_convert(settings); break;
    case IngressMode::upload_f32: result = stream_upload_f32(settings); break;
    case IngressMode::ferry_ingress: result = stream_ingress(true, settings); break;
    case IngressMode::ferry_ingress_pageable: result = stream_ingress(false, settings); break;
  }
  // Work queued past the window (a pipeline's read-ahead) ends before the next measurement.
  const Status idle = device_.wait_idle(kWaitTimeout);
  if (!result.ok()) return result.status().with_context(to_string(mode));
  FERRY_RETURN_IF_ERROR(idle);
  result->mode = mode;
  return result;
}

Result<StreamResult> IngressBench::stream_cpu_convert(const StreamSettings& settings) {
  const std::uint64_t bytes = output_f32_bytes();
  // One float32 batch per lease, `depth` of them: batch i+1 is converted while i uploads.
  StagingPoolOptions pool_options;
  pool_options.kind = MemoryKind::host_upload;
  pool_options.slab_bytes = round_up(bytes, kStagingAlignment);
  pool_options.max_slabs = settings.depth;
  pool_options.reserved_slabs = settings.depth;
  FERRY_ASSIGN_OR_RETURN(StagingPool pool, device_.create_staging_pool(pool_options));
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> targets,
                         create_buffers(device_, settings.depth, bytes, MemoryKind::device));
  const HostImageBatch batch = host_image_batch(shape_);

  auto step = [&](std::uint64_t index) -> Result<TimelinePoint> {
    FERRY_ASSIGN_OR_RETURN(Lease lease, pool.acquire(bytes, kWaitTimeout));
    convert_nhwc_to_nchw_f32(batch, as_uint8(pageable_sources_[index % kSourceBatches].data()),
                             as_float(lease.data().data()), factors_,
                             ConvertRounding::separate, *threads_);
    CommandList commands;
    const Buffer& target = targets[index % targets.size()];
    FERRY_RETURN_IF_ERROR(commands.copy(lease, 0, target, 0, bytes));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, upload_.submit(std::move(commands)));
    lease.release();  // back to the pool once the copy has read it
    if (index == 0) {
      FERRY_RETURN_IF_ERROR(read_back(target, bytes, done));
      FERRY_RETURN_IF_ERROR(check_output(ElementType::float32, false, "cpu-convert batch 0"));
    }
    return done;
  };
  FERRY_ASSIGN_OR_RETURN(StreamResult result, time_stream(settings, step));
  result.h2d_bytes_per_batch = bytes;
  return result;
}

Result<StreamResult> IngressBench::stream_upload_f32(const StreamSettings& settings) {
  const std::uint64_t bytes = output_f32_bytes();
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> sources,
                         create_buffers(device_, kSourceBatches, bytes, MemoryKind::host_upload));
  for (std::uint32_t i = 0; i < kSourceBatches; ++i) {
    FERRY_ASSIGN_OR_RETURN(std::span<std::byte> source, sources[i].host_span());
    convert_nhwc_to_nchw_f32(host_image_batch(shape_), as_uint8(pageable_sources_[i].data()),
                             as_float(source.data()), factors_, ConvertRounding::separate,
                             *threads_);
  }
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> targets,
                         create_buffers(device_, settings.depth, bytes, MemoryKind::device));

  auto step = [&](std::uint64_t index) -> Result<TimelinePoint> {
    CommandList commands;
    const Buffer& target = targets[index % targets.size()];
    FERRY_RETURN_IF_ERROR(
        commands.copy(sources[index % kSourceBatches], 0, target, 0, bytes));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, upload_.submit(std::move(commands)));
    if (index == 0) {
      FERRY_RETURN_IF_ERROR(read_back(target, bytes, done));
      FERRY_ASSIGN_OR_RETURN(std::span<std::byte> expected, sources[0].host_span());
      FERRY_ASSIGN_OR_RETURN(std::span<std::byte> actual, readback_.host_span());
      if (std::memcmp(expected.data(), actual.data(), bytes) != 0) {
        return Status(ErrorCode::internal,
                      "data mismatch in upload-f32 batch 0: the device copy differs from its "
                      "pinned source");
      }
    }
    return done;
  };
  FERRY_ASSIGN_OR_RETURN(StreamResult result, time_stream(settings, step));
  result.h2d_bytes_per_batch = bytes;
  return result;
}

Result<StreamResult> IngressBench::stream_ingress(bool pinned, const StreamSettings& settings) {
  IngressOptions options;
  FERRY_ASSIGN_OR_RETURN(options.transform, normalize_transform(params_));
  options.depth = settings.depth;
  // Sources are cycled and never written, so they stay valid for as long as uploads read them.
  IngressSource source = [this, pinned](std::uint64_t index) -> Result<std::optional<HostBatch>> {
    const std::size_t which = index % kSourceBatches;
    if (pinned) return std::optional<HostBatch>(HostBatch::pinned(pinned_sources_[which]));
    return std::optional<HostBatch>(HostBatch::pageable(pageable_sources_[which]));
  };
  FERRY_ASSIGN_OR_RETURN(IngressPipeline pipeline,
                         IngressPipeline::create(device_, options, std::move(source)));
  const std::string what = pinned ? "ferry-ingress batch 0" : "ferry-ingress-pageable batch 0";

  auto step = [&](std::uint64_t index) -> Result<TimelinePoint> {
    FERRY_ASSIGN_OR_RETURN(std::optional<IngressBatch> batch, pipeline.next(kWaitTimeout));
    if (!batch) return Status(ErrorCode::internal, "the ingress pipeline ended early");
    if (batch->index() != index) {
      return Status(ErrorCode::internal, "the ingress pipeline handed out batch " +
                                             std::to_string(batch->index()) + " for " +
                                             std::to_string(index));
    }
    const TimelinePoint ready = batch->ready();
    if (index == 0) {
      FERRY_RETURN_IF_ERROR(read_back(batch->tensor(), output_f32_bytes(), ready));
      FERRY_RETURN_IF_ERROR(check_output(ElementType::float32, true, what));
    }
    // No GPU consumer: the tensor may be reused once it is ready (the pipeline waits for
    // that point on the device, not on the host).
    FERRY_RETURN_IF_ERROR(batch->release(ready));
    return ready;
  };
  FERRY_ASSIGN_OR_RETURN(StreamResult result, time_stream(settings, step));
  pipeline.close();
  result.h2d_bytes_per_batch = input_bytes();
  return result;
}

Result<KernelResult> IngressBench::run_normalize_kernel(ElementType output,
                                                        const KernelSettings& settings) {
  const NormalizeParams params = imagenet_normalize_params(
      {shape_.batch, shape_.height, shape_.width, shape_.channels}, output);
  const std::uint64_t out_bytes = shape_.elements() * element_size(output);
  // Source and destination pairs are cycled so that a command does not find the previous
  // command's input in the device's cache.
  const std::uint32_t sets = buffer_sets(input_bytes() + out_bytes, settings);
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> sources,
                         create_buffers(device_, sets, input_bytes(), MemoryKind::device));
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> targets,
                         create_buffers(device_, sets, out_bytes, MemoryKind::device));
  for (const Buffer& source : sources) {
    FERRY_RETURN_IF_ERROR(copy_and_wait(upload_, pinned_sources_[0], source, input_bytes()));
  }
  auto record = [&]() -> Result<CommandList> {
    CommandList commands;
    for (std::uint32_t k = 0; k < settings.commands; ++k) {
      FERRY_RETURN_IF_ERROR(ferry::normalize(commands, sources[k % sets], 0, targets[k % sets], 0, params));
    }
    return commands;
  };
  const std::string what = "normalize kernel (" + std::string(to_string(output)) + ")";
  {
    FERRY_ASSIGN_OR_RETURN(CommandList commands, record());
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute_.submit(std::move(commands)));
    FERRY_RETURN_IF_ERROR(read_back(targets[0], out_bytes, done).with_context(what));
    FERRY_RETURN_IF_ERROR(check_output(output, true, what));
  }
  Result<KernelResult> result = time_lists(compute_, record, settings);
  if (!result.ok()) return result.status().with_context(what);
  result->bytes_per_command = shape_.elements() * (1 + element_size(output));
  return result;
}

Status IngressBench::read_back(const BufferRef& src, std::uint64_t bytes,
                               const TimelinePoint& after) {
  CommandList commands;
  FERRY_RETURN_IF_ERROR(commands.copy(src, 0, readback_, 0, bytes));
  SubmitSync sync;
  if (after.timeline) sync.wait.push_back(after);
  FERRY_ASSIGN_OR_RETURN(TimelinePoint done, download_.submit(std::move(commands), sync));
  return done.wait(kWaitTimeout);
}

Status IngressBench::check_output(ElementType type, bool exact, std::string_view what) {
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> bytes, readback_.host_span());
  const std::uint64_t count = shape_.elements();
  // The element as read back, and its expected value, as bits of the output type.
  auto expected_bits = [&](std::uint64_t i) -> std::uint32_t {
    switch (type) {
      case ElementType::float16: return to_float16_bits(reference_[i]);
      case ElementType::bfloat16: return to_bfloat16_bits(reference_[i]);
      case ElementType::float32: break;
    }
    return std::bit_cast<std::uint32_t>(reference_[i]);
  };
  auto actual_bits = [&](std::uint64_t i) -> std::uint32_t {
    if (type == ElementType::float32) {
      std::uint32_t word = 0;
      std::memcpy(&word, bytes.data() + i * 4, 4);
      return word;
    }
    std::uint16_t half = 0;
    std::memcpy(&half, bytes.data() + i * 2, 2);
    return half;
  };
  auto as_value = [&](std::uint32_t bits) -> float {
    switch (type) {
      case ElementType::float16: return from_float16_bits(static_cast<std::uint16_t>(bits));
      case ElementType::bfloat16: return from_bfloat16_bits(static_cast<std::uint16_t>(bits));
      case ElementType::float32: break;
    }
    return std::bit_cast<float>(bits);
  };
  // The host conversion rounds its multiply and add separately: a few ulps apart at most.
  auto matches = [&](std::uint32_t expected, std::uint32_t actual) {
    if (exact || expected == actual) return expected == actual;
    const float e = as_value(expected);
    return std::fabs(as_value(actual) - e) <= 1e-6f * (1.0f + std::fabs(e));
  };

  std::uint64_t wrong = 0;
  std::uint64_t first = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (!matches(expected_bits(i), actual_bits(i))) {
      if (wrong++ == 0) first = i;
    }
  }
  if (wrong == 0) return ok_status();
  const std::uint64_t plane = std::uint64_t{shape_.height} * shape_.width;
  char detail[256];
  std::snprintf(detail, sizeof detail,
                ": %llu of %llu elements wrong, first at image %llu channel %llu row %llu column "
                "%llu (expected %.9g, got %.9g)",
                static_cast<unsigned long long>(wrong), static_cast<unsigned long long>(count),
                static_cast<unsigned long long>(first / plane / shape_.channels),
                static_cast<unsigned long long>(first / plane % shape_.channels),
                static_cast<unsigned long long>(first % plane / shape_.width),
                static_cast<unsigned long long>(first % shape_.width),
                static_cast<double>(as_value(expected_bits(first))),
                static_cast<double>(as_value(actual_bits(first))));
  return Status(ErrorCode::internal, "data mismatch in " + std::string(what) + detail);
}

Result<KernelResult> measure_device_copy(const Device& device, std::uint64_t bytes,
                                         const KernelSettings& settings) {
  const Queue compute = device.queue(QueueKind::compute);
  const std::uint32_t sets = buffer_sets(2 * bytes, settings);
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> sources,
                         create_buffers(device, sets, bytes, MemoryKind::device));
  FERRY_ASSIGN_OR_RETURN(std::vector<Buffer> targets,
                         create_buffers(device, sets, bytes, MemoryKind::device));
  {
    CommandList fills;
    for (const Buffer& source : sources) {
      FERRY_RETURN_IF_ERROR(ferry::fill(fills, source, 0, bytes, 0x5a5a5a5a));
    }
    FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute.submit(std::move(fills)));
    FERRY_RETURN_IF_ERROR(done.wait(kWaitTimeout));
  }
  auto record = [&]() -> Result<CommandList> {
    CommandList commands;
    for (std::uint32_t k = 0; k < settings.commands; ++k) {
      FERRY_RETURN_IF_ERROR(commands.copy(sources[k % sets], 0, targets[k % sets], 0, bytes));
    }
    return commands;
  };
  FERRY_ASSIGN_OR_RETURN(KernelResult result, time_lists(compute, record, settings));
  result.bytes_per_command = 2 * bytes;
  return result;
}

}  // namespace ferry::cli
