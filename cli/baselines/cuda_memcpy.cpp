#include "baselines/cuda_memcpy.hpp"

#if defined(FERRY_CLI_HAVE_CUDA)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "baselines/cuda_status.hpp"

namespace ferry::cli {

namespace {

Status sync(cudaStream_t stream) {
  return cuda_status("cudaStreamSynchronize", cudaStreamSynchronize(stream));
}

// The CUDA memory (pinned buffers filled) and streams of one baseline, freed whatever happens.
struct CudaResources {
  std::vector<void*> device, pinned;
  std::vector<cudaStream_t> streams;
  ~CudaResources() {
    for (cudaStream_t stream : streams) {
      if (stream != nullptr) cudaStreamDestroy(stream);
    }
    for (void* memory : pinned) cudaFreeHost(memory);
    for (void* memory : device) cudaFree(memory);
  }
  Status create(int index, std::size_t bytes, int devices, int pinned_buffers, int stream_count) {
    FERRY_RETURN_IF_ERROR(cuda_use_device(index));
    for (int i = 0; i < devices; ++i)
      FERRY_RETURN_IF_ERROR(cuda_status("cudaMalloc", cudaMalloc(&device.emplace_back(), bytes)));
    for (int i = 0; i < pinned_buffers; ++i) {
      FERRY_RETURN_IF_ERROR(cuda_status(
          "cudaHostAlloc", cudaHostAlloc(&pinned.emplace_back(), bytes, cudaHostAllocDefault)));
      std::memset(pinned.back(), 0x33 + i, bytes);
    }
    for (int i = 0; i < stream_count; ++i) {
      FERRY_RETURN_IF_ERROR(
          cuda_status("cudaStreamCreateWithFlags",
                      cudaStreamCreateWithFlags(&streams.emplace_back(), cudaStreamNonBlocking)));
    }
    return ok_status();
  }
};

// `out` with available set from `status`, or why not.
template <typename Baseline>
Baseline with_status(Baseline out, const Status& status) {
  out.available = status.ok();
  if (!status.ok()) out.reason = status.message();
  return out;
}

}  // namespace

CudaMemcpyBaseline measure_cuda_memcpy(int device, std::uint64_t bytes,
                                       const RepeatSettings& settings) {
  CudaMemcpyBaseline out;
  const auto n = static_cast<std::size_t>(bytes);
  std::vector<unsigned char> pageable(n, 0x5a);  // touched: no first-touch faults in the timing
  CudaResources cuda;
  const Status status = [&]() -> Status {
    FERRY_RETURN_IF_ERROR(cuda.create(device, n, 2, 2, 2));
    void *dev_a = cuda.device[0], *dev_b = cuda.device[1];
    cudaStream_t up = cuda.streams[0], down = cuda.streams[1];
    // Pinned copies, each on its own stream, waited for or not (both directions at once).
    auto h2d = [&](bool wait) -> Status {
      FERRY_RETURN_IF_ERROR(
          cuda_status("cudaMemcpyAsync",
                      cudaMemcpyAsync(dev_a, cuda.pinned[0], n, cudaMemcpyHostToDevice, up)));
      return wait ? sync(up) : ok_status();
    };
    auto d2h = [&](bool wait) -> Status {
      FERRY_RETURN_IF_ERROR(cuda_status(
          "cudaMemcpyAsync",
          cudaMemcpyAsync(cuda.pinned[1], dev_b, n, cudaMemcpyDeviceToHost, down)));
      return wait ? sync(down) : ok_status();
    };
    auto pageable_copy = [&](void* dst, const void* src, cudaMemcpyKind kind) {
      return cuda_status("cudaMemcpy", cudaMemcpy(dst, src, n, kind));
    };
    const std::pair<double*, std::function<Status()>> copies[] = {
        {&out.pinned[0], [&] { return h2d(true); }},
        {&out.pinned[1], [&] { return d2h(true); }},
        {&out.pageable[0],
         [&] { return pageable_copy(dev_a, pageable.data(), cudaMemcpyHostToDevice); }},
        {&out.pageable[1],
         [&] { return pageable_copy(pageable.data(), dev_b, cudaMemcpyDeviceToHost); }},
        {&out.both_pinned, [&]() -> Status {  // H2D and D2H at once
           FERRY_RETURN_IF_ERROR(h2d(false));
           FERRY_RETURN_IF_ERROR(d2h(false));
           FERRY_RETURN_IF_ERROR(sync(up));
           return sync(down);
         }}};
    for (const auto& [gbps, copy] : copies) {
      FERRY_ASSIGN_OR_RETURN(const Timing timing, time_each(settings, copy));
      *gbps = static_cast<double>(bytes) / timing.median_seconds / 1e9;
    }
    out.both_pinned *= 2;  // both directions' bytes
    return ok_status();
  }();
  return with_status(std::move(out), status);
}

CudaSubmitCost measure_cuda_submit_cost(int device, std::uint64_t bytes, std::uint64_t burst,
                                        std::uint64_t calls) {
  CudaSubmitCost out;
  const auto n = static_cast<std::size_t>(bytes);
  CudaResources cuda;
  std::vector<cudaEvent_t> events;
  const Status status = [&]() -> Status {
    FERRY_RETURN_IF_ERROR(cuda.create(device, n, 1, 1, 1));
    cudaStream_t stream = cuda.streams[0];
    for (std::uint64_t i = 0; i < burst; ++i) {
      FERRY_RETURN_IF_ERROR(cuda_status(
          "cudaEventCreateWithFlags",
          cudaEventCreateWithFlags(&events.emplace_back(), cudaEventDisableTiming)));
    }
    auto per_call = [&](bool with_event, cudaMemcpyKind kind, double& median_us) -> Status {
      const Repetition call = [&](std::uint64_t i) -> Result<double> {
        if (i % burst == 0) FERRY_RETURN_IF_ERROR(sync(stream));
        return wall_time([&]() -> Status {
          FERRY_RETURN_IF_ERROR(cuda_status(
              "cudaMemcpyAsync",
              cudaMemcpyAsync(cuda.device[0], cuda.pinned[0], n, kind, stream)));
          if (!with_event) return ok_status();
          return cuda_status("cudaEventRecord", cudaEventRecord(events[i % burst], stream));
        });
      };
      FERRY_ASSIGN_OR_RETURN(Timing timing,
                             repeat(exactly(burst, calls), call, [&] { return sync(stream); }));
      median_us = timing.median_seconds * 1e6;
      return sync(stream);
    };
    FERRY_RETURN_IF_ERROR(per_call(false, cudaMemcpyHostToDevice, out.memcpy_us));
    FERRY_RETURN_IF_ERROR(per_call(false, cudaMemcpyDefault, out.memcpy_default_us));
    return per_call(true, cudaMemcpyHostToDevice, out.memcpy_event_us);
  }();
  for (cudaEvent_t event : events) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  return with_status(std::move(out), status);
}

CudaCopyBaseline measure_cuda_memcpy_d2d(int device, std::uint64_t bytes, std::uint32_t commands,
                                         const RepeatSettings& settings) {
  CudaCopyBaseline out;
  const auto n = static_cast<std::size_t>(bytes);
  CudaResources cuda;
  const Status status = [&]() -> Status {
    FERRY_RETURN_IF_ERROR(cuda.create(device, n, 2, 0, 1));
    cudaStream_t stream = cuda.streams[0];
    FERRY_RETURN_IF_ERROR(
        cuda_status("cudaMemsetAsync", cudaMemsetAsync(cuda.device[0], 0x5a, n, stream)));
    FERRY_RETURN_IF_ERROR(sync(stream));
    auto copies = [&]() -> Status {
      for (std::uint32_t k = 0; k < commands; ++k) {
        FERRY_RETURN_IF_ERROR(
            cuda_status("cudaMemcpyAsync", cudaMemcpyAsync(cuda.device[1], cuda.device[0], n,
                                                           cudaMemcpyDeviceToDevice, stream)));
      }
      return sync(stream);
    };
    FERRY_ASSIGN_OR_RETURN(const Timing timing, time_each(settings, copies));
    out.gbps = 2.0 * static_cast<double>(bytes) * commands / timing.median_seconds / 1e9;
    return ok_status();
  }();
  return with_status(std::move(out), status);
}

CudaNaiveEgress measure_cuda_naive_egress(int device, std::uint64_t bytes, double compute_ms,
                                          std::uint32_t warmup, std::uint32_t steps,
                                          const CudaNaiveHostWork& host_work) {
  CudaNaiveEgress out;
  const auto n = static_cast<std::size_t>(bytes);
  std::vector<std::byte> pageable(n, std::byte{0x5a});  // touched: no first-touch faults timed
  CudaResources cuda;
  // `count` memsets of the output, the last one writing `last`, the others its complement.
  auto memsets = [&](std::uint32_t count, unsigned char last) -> Status {
    for (std::uint32_t k = 0; k < count; ++k) {
      FERRY_RETURN_IF_ERROR(cuda_status(
          "cudaMemsetAsync", cudaMemsetAsync(cuda.device[0], k + 1 == count ? last : last ^ 0xFF, n,
                                             cuda.streams[0])));
    }
    return ok_status();
  };
  const Status status = [&]() -> Status {
    FERRY_RETURN_IF_ERROR(cuda.create(device, n, 1, 0, 1));
    // Calibration: the median of three lists of memsets after a warm-up list.
    constexpr std::uint32_t kPerList = 4;
    FERRY_ASSIGN_OR_RETURN(Timing list, time_each(exactly(1, 3), [&]() -> Status {
                             FERRY_RETURN_IF_ERROR(memsets(kPerList, 0));
                             return sync(cuda.streams[0]);
                           }));
    out.memsets = static_cast<std::uint32_t>(std::clamp(
        std::lround(compute_ms / 1e3 / (list.median_seconds / kPerList)), 1L, 1'000'000L));
    // The naive loop; a distinct byte per step.
    FERRY_ASSIGN_OR_RETURN(
        Timing timing, repeat_steps(exactly(warmup, steps), [&](std::uint64_t step) -> Status {
          const auto value = static_cast<unsigned char>(step * 0x9Eu + 0x37u);
          FERRY_RETURN_IF_ERROR(memsets(out.memsets, value));
          FERRY_RETURN_IF_ERROR(sync(cuda.streams[0]));
          FERRY_RETURN_IF_ERROR(
              cuda_status("cudaMemcpy",
                          cudaMemcpy(pageable.data(), cuda.device[0], n, cudaMemcpyDeviceToHost)));
          out.host_error = host_work(step, pageable, std::uint32_t{value} * 0x01010101u);
          return out.host_error.ok() ? ok_status()
                                     : Status(ErrorCode::internal, "host work failed");
        }));
    out.steps = timing.reps;
    out.seconds = timing.window_seconds;
    return ok_status();
  }();
  return with_status(std::move(out), status);
}

Result<CudaPinnedHostMemory> CudaPinnedHostMemory::allocate(std::uint64_t bytes) {
  CudaPinnedHostMemory memory;
  void* data = nullptr;
  FERRY_RETURN_IF_ERROR(cuda_status(
      "cudaHostAlloc", cudaHostAlloc(&data, static_cast<std::size_t>(bytes), cudaHostAllocPortable)));
  memory.data_ = static_cast<std::byte*>(data);
  memory.size_ = bytes;
  return memory;
}

CudaPinnedHostMemory::~CudaPinnedHostMemory() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

}  // namespace ferry::cli

#else  // without the CUDA backend: no baseline

namespace ferry::cli {

constexpr const char* kNoCuda = "this ferry was built without the CUDA backend";

CudaMemcpyBaseline measure_cuda_memcpy(int, std::uint64_t, const RepeatSettings&) {
  return {.reason = kNoCuda};
}

CudaCopyBaseline measure_cuda_memcpy_d2d(int, std::uint64_t, std::uint32_t, const RepeatSettings&) {
  return {.reason = kNoCuda};
}

CudaSubmitCost measure_cuda_submit_cost(int, std::uint64_t, std::uint64_t, std::uint64_t) {
  return {.reason = kNoCuda};
}

CudaNaiveEgress measure_cuda_naive_egress(int, std::uint64_t, double, std::uint32_t, std::uint32_t,
                                          const CudaNaiveHostWork&) {
  return {.reason = kNoCuda};
}

Result<CudaPinnedHostMemory> CudaPinnedHostMemory::allocate(std::uint64_t) {
  return Status(ErrorCode::unavailable, kNoCuda);
}

CudaPinnedHostMemory::~CudaPinnedHostMemory() = default;

}  // namespace ferry::cli

#endif
