#include "cuda_device.hpp"

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cuda_buffer.hpp"
#include "cuda_status.hpp"
#include "cuda_timeline.hpp"
#include "kernels/launch.hpp"

namespace ferry::backend::cuda {

namespace {

// Blocks per SM for the grid-stride kernels: enough resident warps to saturate memory bandwidth.
constexpr unsigned kBlocksPerSm = 8;

Result<CudaBuffer*> cuda_buffer(BackendBuffer* buffer, std::uint64_t offset, std::uint64_t size,
                                const char* role) {
  auto* native = dynamic_cast<CudaBuffer*>(buffer);
  if (native == nullptr) {
    return Status(ErrorCode::internal,
                  std::string("CUDA submit: the ") + role + " is not a CUDA buffer");
  }
  // Core validated the range; checked again because a bad range here means memory corruption.
  if (offset > native->size() || size > native->size() - offset) {
    return Status(ErrorCode::internal, std::string("CUDA submit: the ") + role + " range [" +
                                           std::to_string(offset) + ", +" +
                                           std::to_string(size) + ") exceeds its " +
                                           std::to_string(native->size()) + "-byte buffer");
  }
  return native;
}

Result<CudaTimeline*> cuda_timeline(BackendTimeline* timeline, int device) {
  auto* native = dynamic_cast<CudaTimeline*>(timeline);
  if (native == nullptr || native->device() != device) {
    return Status(ErrorCode::internal,
                  "CUDA submit: a timeline of another backend or device was passed");
  }
  return native;
}

}  // namespace

Result<std::unique_ptr<CudaDevice>> CudaDevice::open(int index, DeviceInfo info) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  // Creates (or retains) the device's primary context now, so a broken device fails here and
  // not in the first submission.
  FERRY_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));
  int sm_count = 0;
  FERRY_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, index));

  info.backend = Backend::cuda;
  info.index = index;
  info.queues.clear();
  for (int kind = 0; kind < kQueueKindCount; ++kind) {
    QueueAssignment assignment;
    assignment.kind = static_cast<QueueKind>(kind);
    assignment.family = 0;  // CUDA has no queue families: three streams of one device
    assignment.index = static_cast<std::uint32_t>(kind);
    assignment.shared = false;
    info.queues.push_back(assignment);
  }

  // A tuning query: if it fails (say no kernel image for this GPU), copies still work, and a
  // normalize launch reports the same error with its context.
  unsigned normalize_blocks = kBlocksPerSm;
  if (normalize_blocks_per_sm(&normalize_blocks) != cudaSuccess) {
    normalize_blocks = kBlocksPerSm;
    (void)cudaGetLastError();
  }

  std::unique_ptr<CudaDevice> device(new CudaDevice(index, std::move(info)));
  const unsigned sms = static_cast<unsigned>(sm_count > 0 ? sm_count : 1);
  device->max_blocks_ = sms * kBlocksPerSm;
  device->normalize_max_blocks_ = sms * std::min(normalize_blocks, kBlocksPerSm);
  FERRY_RETURN_IF_ERROR(device->create_streams());  // on error the destructor cleans up
  return device;
}

Status CudaDevice::create_streams() {
  // Lower numbers are higher priorities. Copies get the highest: a copy stream issues little
  // compute work, so its kernels (host-to-host copies) and any copy the driver runs as a kernel
  // are scheduled ahead of long compute kernels and the copy engines stay fed.
  int least = 0;
  int greatest = 0;
  FERRY_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  for (int kind = 0; kind < kQueueKindCount; ++kind) {
    const bool copies = static_cast<QueueKind>(kind) != QueueKind::compute;
    // Non-blocking: never synchronizes with the legacy default stream another library may use.
    FERRY_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(
        &streams_[static_cast<std::size_t>(kind)], cudaStreamNonBlocking,
        copies ? greatest : least));
  }
  return Status();
}

CudaDevice::~CudaDevice() {
  // Core destroys the device after its queues are drained; synchronize anyway so nothing of
  // ours runs once we return. Only our streams: the primary context is shared with every other
  // user of this GPU in the process, so no cudaDeviceSynchronize / cudaDeviceReset.
  (void)cudaSetDevice(index_);
  for (cudaStream_t stream : streams_) {
    if (stream == nullptr) continue;
    (void)cudaStreamSynchronize(stream);
    (void)cudaStreamDestroy(stream);
  }
  (void)cudaGetLastError();
}

void CudaDevice::finish_teardown_work() {
  (void)cudaSetDevice(index_);
  for (cudaStream_t stream : streams_) {
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
  }
  (void)cudaGetLastError();
}

Result<std::unique_ptr<BackendBuffer>> CudaDevice::create_buffer(std::uint64_t size,
                                                                 MemoryKind kind) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<CudaBuffer> buffer,
                         CudaBuffer::allocate(index_, size, kind));
  return std::unique_ptr<BackendBuffer>(std::move(buffer));
}

Result<std::unique_ptr<BackendBuffer>> CudaDevice::register_host_memory(std::byte* data,
                                                                        std::uint64_t size,
                                                                        MemoryKind kind) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<CudaBuffer> buffer,
                         CudaBuffer::register_host(index_, data, size, kind));
  return std::unique_ptr<BackendBuffer>(std::move(buffer));
}

Result<std::unique_ptr<BackendTimeline>> CudaDevice::create_timeline(std::uint64_t initial) {
  return std::unique_ptr<BackendTimeline>(std::make_unique<CudaTimeline>(index_, initial));
}

Status CudaDevice::record_copy(const CopyCommand& copy, cudaStream_t stream) const {
  FERRY_ASSIGN_OR_RETURN(CudaBuffer * src,
                         cuda_buffer(copy.src, copy.src_offset, copy.size, "copy source"));
  FERRY_ASSIGN_OR_RETURN(CudaBuffer * dst,
                         cuda_buffer(copy.dst, copy.dst_offset, copy.size, "copy destination"));
  std::byte* to = dst->data() + copy.dst_offset;
  const std::byte* from = src->data() + copy.src_offset;
  if (src->is_host() && dst->is_host()) {
    // cudaMemcpyAsync between two host ranges is synchronous for the host and not documented to
    // follow stream order; a kernel reading and writing the mapped pinned memory is both.
    const cudaError_t error = launch_copy(to, from, copy.size, max_blocks_, stream);
    if (error != cudaSuccess) return cuda_status(error, "launch_copy (host to host copy kernel)");
    return Status();
  }
  // Unified addressing: the runtime infers the direction from the pointers.
  FERRY_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, static_cast<std::size_t>(copy.size),
                                             cudaMemcpyDefault, stream));
  return Status();
}

Status CudaDevice::record_fill(const FillCommand& fill, cudaStream_t stream) const {
  FERRY_ASSIGN_OR_RETURN(CudaBuffer * dst,
                         cuda_buffer(fill.dst, fill.offset, fill.size, "fill destination"));
  const cudaError_t error =
      launch_fill(dst->data() + fill.offset, fill.size, fill.pattern, max_blocks_, stream);
  if (error != cudaSuccess) return cuda_status(error, "launch_fill (fill kernel)");
  return Status();
}

Status CudaDevice::record_normalize(const NormalizeCommand& normalize, cudaStream_t stream) const {
  // Core validated the command; these keep a bad one from becoming out-of-bounds accesses.
  if (normalize.batch == 0 || normalize.height == 0 || normalize.width == 0 ||
      normalize.channels == 0 || normalize.channels > kNormalizeMaxChannels) {
    return Status(ErrorCode::internal,
                  "CUDA submit: normalize shape " + std::to_string(normalize.batch) + "x" +
                      std::to_string(normalize.channels) + "x" + std::to_string(normalize.height) +
                      "x" + std::to_string(normalize.width) + " (n x c x h x w) is invalid");
  }
  FERRY_ASSIGN_OR_RETURN(CudaBuffer * src, cuda_buffer(normalize.src, normalize.src_offset,
                                                       normalize.input_span(), "normalize source"));
  FERRY_ASSIGN_OR_RETURN(CudaBuffer * dst,
                         cuda_buffer(normalize.dst, normalize.dst_offset, normalize.output_bytes(),
                                     "normalize destination"));
  NormalizeLaunch launch;
  // src may be pinned host memory (a staging lease): the kernel reads it through unified
  // addressing at the same address.
  launch.src = src->data() + normalize.src_offset;
  launch.dst = dst->data() + normalize.dst_offset;
  launch.batch = normalize.batch;
  launch.channels = normalize.channels;
  launch.height = normalize.height;
  launch.width = normalize.width;
  launch.image_stride = normalize.image_stride;
  launch.channel_stride = normalize.channel_stride;
  launch.row_stride = normalize.row_stride;
  launch.pixel_stride = normalize.pixel_stride;
  launch.mirror = normalize.mirror;
  switch (normalize.output_type) {
    case ElementType::float32: launch.output_type = NormalizeOutputType::float32; break;
    case ElementType::float16: launch.output_type = NormalizeOutputType::float16; break;
    case ElementType::bfloat16: launch.output_type = NormalizeOutputType::bfloat16; break;
  }
  switch (normalize.output_layout) {
    case ImageLayout::nchw: launch.output_layout = NormalizeOutputLayout::nchw; break;
    case ImageLayout::nhwc: launch.output_layout = NormalizeOutputLayout::nhwc; break;
  }
  for (std::uint32_t c = 0; c < normalize.channels; ++c) {
    launch.scale[c] = normalize.scale[c];
    launch.bias[c] = normalize.bias[c];
  }
  const cudaError_t error = launch_normalize(launch, normalize_max_blocks_, stream);
  if (error != cudaSuccess) return cuda_status(error, "launch_normalize (normalize kernel)");
  return Status();
}

Status CudaDevice::submit(QueueKind queue, const Submission& submission) {
  const auto queue_index = static_cast<std::size_t>(queue);
  if (queue_index >= streams_.size()) {
    return Status(ErrorCode::internal, "CUDA submit: unknown queue kind");
  }
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  cudaStream_t stream = streams_[queue_index];

  // 1. Everything that can fail without side effects: resolve timelines, take signal events.
  struct PreparedSignal {
    CudaTimeline* timeline;
    std::uint64_t value;
    cudaEvent_t event;
  };
  std::vector<PreparedSignal> signals;
  signals.reserve(submission.signals.size());
  auto give_back_events = [&signals] {
    for (const auto& signal : signals) signal.timeline->release_event(signal.event);
  };
  for (const auto& signal : submission.signals) {
    auto timeline = cuda_timeline(signal.timeline, index_);
    if (!timeline.ok()) {
      give_back_events();
      return timeline.status();
    }
    auto event = (*timeline)->acquire_event();
    if (!event.ok()) {
      give_back_events();
      return event.status();
    }
    signals.push_back({*timeline, signal.value, *event});
  }

  // 2. Waits, then the commands, in order on the queue's stream. If one of these fails, work
  // already enqueued before it may still run (CUDA cannot take it back), but no signal of this
  // submission is published, so nothing is ever reported complete.
  auto fail = [&give_back_events](Status status) {
    give_back_events();
    return status;
  };
  for (const auto& wait : submission.waits) {
    auto timeline = cuda_timeline(wait.timeline, index_);
    if (!timeline.ok()) return fail(timeline.status());
    if (Status status = (*timeline)->enqueue_wait(stream, wait.value); !status.ok()) {
      return fail(std::move(status));
    }
  }
  for (std::size_t i = 0; i < submission.commands.size(); ++i) {
    const Command& command = submission.commands[i];
    Status status = std::visit(
        [&](const auto& recorded) -> Status {
          using Recorded = std::decay_t<decltype(recorded)>;
          if constexpr (std::is_same_v<Recorded, CopyCommand>) {
            return record_copy(recorded, stream);
          } else if constexpr (std::is_same_v<Recorded, FillCommand>) {
            return record_fill(recorded, stream);
          } else {
            // A command type added without a recorder here fails to compile.
            static_assert(std::is_same_v<Recorded, NormalizeCommand>);
            return record_normalize(recorded, stream);
          }
        },
        command);
    if (!status.ok()) {
      status.with_context("command " + std::to_string(i + 1) + " of " +
                          std::to_string(submission.commands.size()));
      return fail(std::move(status));
    }
  }

  // 3. Signals: record every event before publishing any, so a failed record publishes none.
  for (const auto& signal : signals) {
    if (const cudaError_t error = cudaEventRecord(signal.event, stream); error != cudaSuccess) {
      return fail(cuda_status(error, "cudaEventRecord (signal of timeline value " +
                                         std::to_string(signal.value) + ")"));
    }
  }
  for (const auto& signal : signals) {
    signal.timeline->publish_signal(signal.value, stream, signal.event);
  }
  return Status();
}

}  // namespace ferry::backend::cuda
