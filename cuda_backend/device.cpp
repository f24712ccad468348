#include "device.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "buffer.hpp"
#include "status.hpp"
#include "timeline.hpp"
#include "kernels/launch.hpp"
#include "op_kernels.hpp"

namespace ferry::cuda {

namespace {

Result<CudaTimeline*> cuda_timeline(backend::BackendTimeline* timeline, int device) {
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

  std::unique_ptr<CudaDevice> device(new CudaDevice(index, std::move(info)));
  const unsigned sms = static_cast<unsigned>(sm_count > 0 ? sm_count : 1);
  device->max_blocks_ = sms * kBlocksPerSm;
  // Every op's kernel (op_kernels.hpp).
  Status created;
  std::apply([&](auto&... kernel) { ((created = created.ok() ? kernel.create(sms) : created), ...); },
             device->kernels_);
  FERRY_RETURN_IF_ERROR(created);
  device->info_.search_path = kernel_for<ops::HammingTopkArgs>(device->kernels_).search_path();
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
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
  }
  for (StreamTimer& timer : timers_) timer.destroy();
  for (cudaStream_t stream : streams_) {
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
  if (peer_stream_ != nullptr) (void)cudaStreamDestroy(peer_stream_);
  for (cudaEvent_t event : stream_wait_events_) {
    if (event != nullptr) (void)cudaEventDestroy(event);
  }
  (void)cudaGetLastError();
}

namespace {

// Lets device `device` reach `peer`'s memory, once per pair for the process (peer access belongs
// to the primary contexts, shared by every device opened over these GPUs). Where the GPUs cannot
// (no NVLink or PCIe peer path), copies between them still work: the driver stages them.
Status enable_peer_access(int device, int peer) {
  static std::mutex mutex;
  static std::vector<std::pair<int, int>> enabled;
  std::lock_guard lock(mutex);
  if (std::find(enabled.begin(), enabled.end(), std::pair(device, peer)) != enabled.end()) {
    return Status();
  }
  int can_access = 0;
  FERRY_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can_access, device, peer));
  if (can_access != 0) {
    const cudaError_t error = cudaDeviceEnablePeerAccess(peer, 0);
    if (error == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
    } else {
      FERRY_CUDA_RETURN_IF_ERROR(error);
    }
  }
  enabled.emplace_back(device, peer);
  return Status();
}

}  // namespace

Result<bool> CudaDevice::copy_from_device(backend::BackendDevice& source,
                                          backend::BackendBuffer& src, std::uint64_t src_offset,
                                          backend::BackendBuffer& dst, std::uint64_t dst_offset,
                                          std::uint64_t size) {
  auto* const from = dynamic_cast<CudaDevice*>(&source);
  auto* const src_buffer = dynamic_cast<CudaBuffer*>(&src);
  auto* const dst_buffer = dynamic_cast<CudaBuffer*>(&dst);
  if (from == nullptr || src_buffer == nullptr || dst_buffer == nullptr) return false;
  std::lock_guard lock(peer_mutex_);
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  if (from->index_ != index_) FERRY_RETURN_IF_ERROR(enable_peer_access(index_, from->index_));
  if (peer_stream_ == nullptr) {
    FERRY_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&peer_stream_, cudaStreamNonBlocking));
  }
  // Unified addressing names every buffer of the process by its address: cudaMemcpyDefault
  // finds a peer (or host, or same-GPU) copy from the two addresses.
  FERRY_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst_buffer->data() + dst_offset,
                                             src_buffer->data() + src_offset,
                                             static_cast<std::size_t>(size), cudaMemcpyDefault,
                                             peer_stream_));
  FERRY_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(peer_stream_));
  return true;
}

Status CudaDevice::enable_execution_timing(backend::ExecutionTimes* times) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  for (std::size_t kind = 0; kind < timers_.size(); ++kind) {
    const Status created = timers_[kind].create(static_cast<QueueKind>(kind), times);
    if (!created.ok()) {
      for (StreamTimer& timer : timers_) timer.destroy();
      for (int q = 0; q < kQueueKindCount; ++q) {
        times->cannot_time(static_cast<QueueKind>(q), created.message());
      }
      return created;
    }
  }
  return Status();
}

void CudaDevice::report_execution_times() {
  if (cudaSetDevice(index_) != cudaSuccess) return;
  for (StreamTimer& timer : timers_) timer.collect();
}

void CudaDevice::finish_teardown_work() {
  (void)cudaSetDevice(index_);
  for (cudaStream_t stream : streams_) {
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
  }
  (void)cudaGetLastError();
}

Result<std::unique_ptr<backend::BackendBuffer>> CudaDevice::create_buffer(std::uint64_t size,
                                                                 MemoryKind kind) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<CudaBuffer> buffer,
                         CudaBuffer::allocate(index_, size, kind));
  return std::unique_ptr<backend::BackendBuffer>(std::move(buffer));
}

Result<std::unique_ptr<backend::BackendBuffer>> CudaDevice::register_host_memory(std::byte* data,
                                                                        std::uint64_t size,
                                                                        MemoryKind kind) {
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<CudaBuffer> buffer,
                         CudaBuffer::register_host(index_, data, size, kind));
  return std::unique_ptr<backend::BackendBuffer>(std::move(buffer));
}

namespace {

// Interop calls come from the application's threads, which may have a current device of their
// own (PyTorch's, say): set ours for the call and put theirs back.
class CurrentDevice {
 public:
  CurrentDevice() { had_ = cudaGetDevice(&previous_) == cudaSuccess; }
  ~CurrentDevice() {
    if (had_) (void)cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
  bool had_ = false;
};

}  // namespace

Result<std::unique_ptr<backend::BackendBuffer>> CudaDevice::wrap_memory(std::byte* data,
                                                                        std::uint64_t size,
                                                                        MemoryKind kind) {
  const CurrentDevice restore;
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  cudaPointerAttributes attributes{};
  if (const cudaError_t error = cudaPointerGetAttributes(&attributes, data); error != cudaSuccess) {
    return cuda_status(error, "cudaPointerGetAttributes of the memory to wrap");
  }
  if (kind == MemoryKind::device) {
    if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
      return Status(ErrorCode::invalid_argument,
                    "wrapping as device memory: the address is not CUDA device memory (host "
                    "memory goes in as host_upload or host_readback)");
    }
    if (attributes.device != index_) {
      return Status(ErrorCode::invalid_argument,
                    "wrapping as device memory: the memory belongs to CUDA device " +
                        std::to_string(attributes.device) + ", this device is CUDA device " +
                        std::to_string(index_));
    }
    return std::unique_ptr<backend::BackendBuffer>(CudaBuffer::borrow(index_, data, size, kind));
  }
  if (attributes.type == cudaMemoryTypeHost) {
    // Already page-locked (cudaHostAlloc, a pinned tensor): the device reaches it as it is,
    // provided it is mapped at its host address (always so with unified addressing).
    if (attributes.devicePointer != data) {
      return Status(ErrorCode::unavailable,
                    "wrapping pinned host memory: it is not mapped at its host address on this "
                    "device");
    }
    return std::unique_ptr<backend::BackendBuffer>(CudaBuffer::borrow(index_, data, size, kind));
  }
  if (attributes.type != cudaMemoryTypeUnregistered) {
    return Status(ErrorCode::invalid_argument, "wrapping as host memory: the address is CUDA "
                                               "device memory (wrap it as device memory)");
  }
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<CudaBuffer> buffer,
                         CudaBuffer::register_host(index_, data, size, kind));
  return std::unique_ptr<backend::BackendBuffer>(std::move(buffer));
}

Status CudaDevice::stream_wait(backend::BackendTimeline& timeline, std::uint64_t value,
                               std::uintptr_t stream) {
  const CurrentDevice restore;
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  FERRY_ASSIGN_OR_RETURN(CudaTimeline * cuda, cuda_timeline(&timeline, index_));
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a stream handle given as an integer (DLPack)
  return cuda->enqueue_wait(reinterpret_cast<cudaStream_t>(stream), value);
}

Status CudaDevice::queue_wait_stream(QueueKind queue, std::uintptr_t stream) {
  const auto queue_index = static_cast<std::size_t>(queue);
  if (queue_index >= streams_.size()) {
    return Status(ErrorCode::internal, "CUDA queue_wait_stream: unknown queue kind");
  }
  const CurrentDevice restore;
  FERRY_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  cudaEvent_t& event = stream_wait_events_[queue_index];
  if (event == nullptr) {
    FERRY_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a stream handle given as an integer (DLPack)
  cudaError_t error = cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream));
  if (error == cudaSuccess) error = cudaStreamWaitEvent(streams_[queue_index], event, 0);
  if (error != cudaSuccess) {
    return cuda_status(error, "ordering the " + std::string(to_string(queue)) +
                                  " queue behind a native stream (cudaEventRecord, "
                                  "cudaStreamWaitEvent)");
  }
  return Status();
}

Result<std::unique_ptr<backend::BackendTimeline>> CudaDevice::create_timeline(
    std::uint64_t initial) {
  return std::unique_ptr<backend::BackendTimeline>(std::make_unique<CudaTimeline>(index_, initial));
}

Status CudaDevice::record_copy(const backend::CopyCommand& copy, cudaStream_t stream) const {
  const backend::Binding source{copy.src, copy.src_offset, copy.size, backend::Access::read};
  const backend::Binding destination{copy.dst, copy.dst_offset, copy.size, backend::Access::write};
  FERRY_ASSIGN_OR_RETURN(const std::byte* from, binding_address(source, "copy source"));
  FERRY_ASSIGN_OR_RETURN(std::byte* to, binding_address(destination, "copy destination"));
  const bool host_to_host = static_cast<CudaBuffer*>(copy.src)->is_host() &&
                            static_cast<CudaBuffer*>(copy.dst)->is_host();
  if (host_to_host) {
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

Status CudaDevice::submit(QueueKind queue, const backend::Submission& submission) {
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
  // Tracing: report what completed, and time this one (after its waits, around its commands).
  StreamTimer& timer = timers_[queue_index];
  std::optional<StreamTimer::Marks> timed;
  if (timer.active() && submission.id != 0 && !submission.commands.empty()) {
    timer.collect_batch();
    timed = timer.take(!submission.waits.empty());
  }
  auto fail = [&give_back_events, &timer, &timed](Status status) {
    give_back_events();
    if (timed) timer.give_back(*timed);
    return status;
  };
  for (const auto& wait : submission.waits) {
    auto timeline = cuda_timeline(wait.timeline, index_);
    if (!timeline.ok()) return fail(timeline.status());
    if (Status status = (*timeline)->enqueue_wait(stream, wait.value); !status.ok()) {
      return fail(std::move(status));
    }
  }
  if (timed && timed->start != nullptr) {
    if (const cudaError_t error = cudaEventRecord(timed->start, stream); error != cudaSuccess) {
      return fail(cuda_status(error, "cudaEventRecord (trace: a submission's start)"));
    }
  }
  for (std::size_t i = 0; i < submission.commands.size(); ++i) {
    Status status = backend::visit_command(
        submission.commands[i],
        [&](const backend::CopyCommand& copy) { return record_copy(copy, stream); },
        [&](const backend::OpCommand& op) {
          // With the op's kernel; a listed op without one does not compile (op_kernels.hpp).
          return std::visit(
              [&](const auto& args) {
                return kernel_for<std::decay_t<decltype(args)>>(kernels_).record(
                    args, op.bindings, stream);
              },
              op.args);
        });
    if (!status.ok()) {
      status.with_context("command " + std::to_string(i + 1) + " of " +
                          std::to_string(submission.commands.size()));
      return fail(std::move(status));
    }
  }

  if (timed) {
    if (const cudaError_t error = cudaEventRecord(timed->end, stream); error != cudaSuccess) {
      return fail(cuda_status(error, "cudaEventRecord (trace: a submission's end)"));
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
  if (timed) timer.submitted(*timed, submission.id);
  return Status();
}

}  // namespace ferry::cuda
