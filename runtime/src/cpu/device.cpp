// CPU reference backend: defines the results every other backend must reproduce.
//
// Memory is ordinary host memory; each of the three queues is a worker thread that runs its
// submissions in order, waiting for their timeline values first. That keeps the same asynchrony
// as a GPU (submit returns at once, leases stay busy until the worker is done), so the pool and
// timeline logic in core is exercised for real on machines without a GPU.
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.hpp"
#include "core/host_workers.hpp"
#include "ops/hamming_topk.hpp"

namespace ferry::cpu {
namespace {

using backend::BackendBuffer;
using backend::BackendDevice;
using backend::BackendTimeline;
using backend::Binding;
using backend::Command;
using backend::CopyCommand;
using backend::Driver;
using backend::OpCommand;
using backend::ProbeResult;
using backend::Submission;
using backend::TimelineValue;

constexpr std::size_t kCpuAlignment = 256;  // as GPU allocations: leases stay 256-byte aligned

class CpuBuffer final : public BackendBuffer {
 public:
  CpuBuffer(std::byte* data, MemoryKind kind, bool owned) : data_(data), kind_(kind), owned_(owned) {}
  ~CpuBuffer() override {
    if (owned_) std::free(data_);
  }
  CpuBuffer(const CpuBuffer&) = delete;
  CpuBuffer& operator=(const CpuBuffer&) = delete;

  std::byte* host_data() noexcept override { return kind_ == MemoryKind::device ? nullptr : data_; }
  std::byte* data() noexcept { return data_; }
  // Every kind is host memory here, device memory included.
  NativeMemory native_memory() noexcept override {
    NativeMemory memory;
    memory.data = data_;
    return memory;
  }

 private:
  std::byte* data_;
  MemoryKind kind_;
  bool owned_;  // false for registered user memory
};

class CpuTimeline final : public BackendTimeline {
 public:
  explicit CpuTimeline(std::uint64_t initial) : value_(initial) {}

  Result<std::uint64_t> value() override {
    std::lock_guard lock(mutex_);
    return value_;
  }
  Status host_signal(std::uint64_t value) override {
    set(value);
    return Status();
  }
  Status host_wait(std::uint64_t value, Timeout timeout) override {
    const detail::Deadline deadline(timeout);
    std::unique_lock lock(mutex_);
    if (!deadline.wait(reached_, lock, [&] { return value_ >= value; })) {
      return Status(ErrorCode::timeout, "cpu timeline: value " + std::to_string(value) +
                                            " not reached (at " + std::to_string(value_) + ")");
    }
    return Status();
  }
  void set(std::uint64_t value) {
    // Notify under the lock: a waiter that sees the value may destroy this timeline at once.
    std::lock_guard lock(mutex_);
    if (value > value_) value_ = value;
    reached_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable reached_;
  std::uint64_t value_;
};

// Runs an op's CPU reference (ops/<op>.cpp). A listed op without one does not compile.
struct RunOnCpu {
  template <typename Args>
  auto operator()(const Args& args, std::span<const std::span<std::byte>> bindings) const
      -> decltype(ops::run_on_cpu(args, bindings)) {
    return ops::run_on_cpu(args, bindings);
  }
};
static_assert(ops::handles_every_op<RunOnCpu, std::span<const std::span<std::byte>>>,
              "an op in ops/op_list.hpp has no CPU reference (ops::run_on_cpu)");

std::byte* memory_of(backend::BackendBuffer* buffer) { return static_cast<CpuBuffer*>(buffer)->data(); }

void run_command(const Command& command) {
  backend::visit_command(
      command,
      [](const CopyCommand& copy) {
        std::memcpy(memory_of(copy.dst) + copy.dst_offset, memory_of(copy.src) + copy.src_offset,
                    copy.size);
      },
      [](const OpCommand& op) {
        std::vector<std::span<std::byte>> bindings;
        bindings.reserve(op.bindings.size());
        for (const Binding& binding : op.bindings) {
          bindings.emplace_back(memory_of(binding.buffer) + binding.offset, binding.size);
        }
        std::visit([&](const auto& args) { RunOnCpu{}(args, bindings); }, op.args);
      });
}

// A submission waiting its turn on a queue's thread.
struct QueuedSubmission {
  std::vector<Command> commands;
  std::vector<TimelineValue> waits;
  std::vector<TimelineValue> signals;
  std::uint64_t id = 0;
};

class CpuQueue {
 public:
  CpuQueue() = default;
  ~CpuQueue() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
  }
  CpuQueue(const CpuQueue&) = delete;
  CpuQueue& operator=(const CpuQueue&) = delete;

  // Starts the queue's worker thread.
  Status start(QueueKind kind) {
    kind_ = kind;
    FERRY_ASSIGN_OR_RETURN(worker_,
                           detail::start_thread("the cpu backend's " +
                                                    std::string(to_string(kind)) + " queue",
                                                [this] { run(); }));
    return Status();
  }

  // Reports the execution of every submission with an id from now on (before its signals, so
  // before core can see it complete).
  void time_with(backend::ExecutionTimes* times) { times_.store(times); }

  void push(QueuedSubmission submission) {
    {
      std::lock_guard lock(mutex_);
      queued_.push_back(std::move(submission));
    }
    wake_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      QueuedSubmission submission;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
        if (queued_.empty()) return;  // stopping, and everything submitted has run
        submission = std::move(queued_.front());
        queued_.pop_front();
      }
      execute(submission);
    }
  }

  void execute(const QueuedSubmission& submission) {
    for (const auto& wait : submission.waits) {
      (void)wait.timeline->host_wait(wait.value, kInfinite);
    }
    backend::ExecutionTimes* const times = submission.id != 0 ? times_.load() : nullptr;
    if (times == nullptr) {
      for (const Command& command : submission.commands) run_command(command);
    } else {
      // The device is this thread: its execution times are host times already.
      const std::int64_t start_ns = detail::trace_now_ns();
      std::int64_t command_start_ns = start_ns;
      for (std::size_t i = 0; i < submission.commands.size(); ++i) {
        run_command(submission.commands[i]);
        const std::int64_t command_end_ns = detail::trace_now_ns();
        times->command_ran(kind_, submission.id, i, backend::command_name(submission.commands[i]),
                           command_start_ns, command_end_ns);
        command_start_ns = command_end_ns;
      }
      times->submission_ran(kind_, submission.id, start_ns, command_start_ns);
    }
    for (const auto& signal : submission.signals) {
      static_cast<CpuTimeline*>(signal.timeline)->set(signal.value);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<QueuedSubmission> queued_;
  bool stopping_ = false;
  QueueKind kind_ = QueueKind::compute;
  std::atomic<backend::ExecutionTimes*> times_{nullptr};
  std::thread worker_;
};

DeviceInfo cpu_device_info() {
  DeviceInfo info;
  info.backend = Backend::cpu;
  info.index = 0;
  info.name = "CPU reference";
  info.is_cpu = true;
  info.cpu_threads = detail::host_worker_count() + 1;  // the helpers and the queue's own thread
  info.driver = "ferry cpu backend (" + std::to_string(info.cpu_threads) + " threads)";
  info.search_path = ops::hamming_cpu_path_description(ops::hamming_cpu_default_path());
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    info.device_memory_bytes = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
    info.host_visible_memory_bytes = info.device_memory_bytes;
  }
  for (int q = 0; q < kQueueKindCount; ++q) {
    info.queues.push_back({static_cast<QueueKind>(q), 0, static_cast<std::uint32_t>(q), false});
  }
  return info;
}

class CpuDevice final : public BackendDevice {
 public:
  CpuDevice() : info_(cpu_device_info()) {}

  const DeviceInfo& info() const override { return info_; }

  // Starts the queues' threads.
  Status start() {
    for (int q = 0; q < kQueueKindCount; ++q) {
      FERRY_RETURN_IF_ERROR(queues_[q].start(static_cast<QueueKind>(q)));
    }
    return Status();
  }

  Result<std::unique_ptr<BackendBuffer>> create_buffer(std::uint64_t size, MemoryKind kind) override {
    // aligned_alloc needs a multiple of the alignment; a size within 255 bytes of 2^64 has none.
    const std::optional<std::uint64_t> rounded = detail::checked_round_up(size, kCpuAlignment);
    void* data = rounded && *rounded <= SIZE_MAX
                     ? std::aligned_alloc(kCpuAlignment, static_cast<std::size_t>(*rounded))
                     : nullptr;
    if (data == nullptr) {
      return Status(ErrorCode::out_of_memory,
                    "cpu: allocating " + detail::describe_bytes(size) + " failed");
    }
    return std::unique_ptr<BackendBuffer>(new CpuBuffer(static_cast<std::byte*>(data), kind, true));
  }

  Result<std::unique_ptr<BackendBuffer>> register_host_memory(std::byte* data, std::uint64_t,
                                                              MemoryKind kind) override {
    return std::unique_ptr<BackendBuffer>(new CpuBuffer(data, kind, false));
  }

  // Device memory is host memory here: any host memory serves as any kind.
  Result<std::unique_ptr<BackendBuffer>> wrap_memory(std::byte* data, std::uint64_t,
                                                     MemoryKind kind) override {
    return std::unique_ptr<BackendBuffer>(new CpuBuffer(data, kind, false));
  }

  Result<std::unique_ptr<BackendTimeline>> create_timeline(std::uint64_t initial) override {
    return std::unique_ptr<BackendTimeline>(new CpuTimeline(initial));
  }

  Status submit(QueueKind queue, const Submission& submission) override {
    QueuedSubmission queued;
    queued.commands.assign(submission.commands.begin(), submission.commands.end());
    queued.waits.assign(submission.waits.begin(), submission.waits.end());
    queued.signals.assign(submission.signals.begin(), submission.signals.end());
    queued.id = submission.id;
    queues_[static_cast<int>(queue)].push(std::move(queued));
    return Status();
  }

  Status enable_execution_timing(backend::ExecutionTimes* times) override {
    for (auto& queue : queues_) queue.time_with(times);
    return Status();
  }

 private:
  DeviceInfo info_;
  CpuQueue queues_[kQueueKindCount];
};

class CpuDriver final : public Driver {
 public:
  Backend backend() const override { return Backend::cpu; }
  ProbeResult probe() override { return {true, "", {cpu_device_info()}, Status()}; }
  Result<std::unique_ptr<BackendDevice>> open(int index, const DeviceOptions&) override {
    if (index != 0) return Status(ErrorCode::out_of_range, "cpu: only device 0 exists");
    auto device = std::make_unique<CpuDevice>();
    FERRY_RETURN_IF_ERROR(device->start());  // on error its destructor stops what started
    return std::unique_ptr<BackendDevice>(std::move(device));
  }
};

}  // namespace

}  // namespace ferry::cpu

namespace ferry::backend {

std::unique_ptr<Driver> create_cpu_driver() { return std::make_unique<cpu::CpuDriver>(); }

}  // namespace ferry::backend
