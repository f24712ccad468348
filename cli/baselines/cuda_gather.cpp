#include "baselines/cuda_gather.hpp"

#if defined(FERRY_CLI_HAVE_CUDA)

#include <algorithm>

#include "baselines/cuda_gather_kernel.hpp"
#include "baselines/cuda_status.hpp"

namespace ferry::cli {

namespace {

// The table's registration, undone whatever happens.
struct Registration {
  void* host = nullptr;
  ~Registration() {
    if (host != nullptr) cudaHostUnregister(host);
  }
};

}  // namespace

CudaUvaGather measure_cuda_uva_gather(
    int device, std::span<const std::byte> table, std::uint64_t row_bytes,
    std::span<const std::vector<std::vector<std::uint32_t>>> batch_sets,
    const RepeatSettings& settings) {
  CudaUvaGather out;
  Registration registration;
  CudaDeviceMemory d_indices, d_out;
  const Status status = [&]() -> Status {
    if (row_bytes == 0 || row_bytes % 16 != 0 ||
        reinterpret_cast<std::uintptr_t>(table.data()) % 16 != 0) {
      return Status(ErrorCode::invalid_argument,
                    "the UVA gather takes rows of a multiple of 16 bytes, 16-byte aligned");
    }
    FERRY_RETURN_IF_ERROR(cuda_use_device(device));
    auto* host = const_cast<std::byte*>(table.data());  // read only: cudaHostRegisterReadOnly
    FERRY_RETURN_IF_ERROR(cuda_status(
        "cudaHostRegister",
        cudaHostRegister(host, table.size(), cudaHostRegisterMapped | cudaHostRegisterReadOnly)));
    registration.host = host;
    void* mapped = nullptr;
    FERRY_RETURN_IF_ERROR(
        cuda_status("cudaHostGetDevicePointer", cudaHostGetDevicePointer(&mapped, host, 0)));
    std::uint64_t most = 0;
    for (const auto& set : batch_sets) {
      for (const auto& batch : set) most = std::max<std::uint64_t>(most, batch.size());
    }
    FERRY_RETURN_IF_ERROR(cuda_status("cudaMalloc", cudaMalloc(&d_indices.pointer, most * 4)));
    FERRY_RETURN_IF_ERROR(cuda_status("cudaMalloc", cudaMalloc(&d_out.pointer, most * row_bytes)));
    auto* indices = static_cast<std::uint32_t*>(d_indices.pointer);
    for (const auto& set : batch_sets) {
      // Each batch's indices go up before its gather (a 4-byte id per row: a few percent of the
      // rows' bytes), as a sampler's output would be on the device already: not timed.
      const auto upload_indices = [&](const std::vector<std::uint32_t>& batch) -> Status {
        return cuda_status("cudaMemcpy", cudaMemcpy(indices, batch.data(), batch.size() * 4,
                                                    cudaMemcpyHostToDevice));
      };
      const auto gather = [&](const std::vector<std::uint32_t>& batch) -> Status {
        FERRY_RETURN_IF_ERROR(cuda_status(
            "the gather kernel's launch",
            launch_gather_kernel(mapped, indices, static_cast<std::uint32_t>(batch.size()),
                                 row_bytes / 16, d_out.pointer)));
        return cuda_status("cudaDeviceSynchronize", cudaDeviceSynchronize());
      };
      std::uint64_t turn = 0;
      FERRY_ASSIGN_OR_RETURN(
          const Timing timing, repeat(settings, [&](std::uint64_t) -> Result<double> {
            const std::vector<std::uint32_t>& batch = set[turn++ % set.size()];
            FERRY_RETURN_IF_ERROR(upload_indices(batch));
            return wall_time([&] { return gather(batch); });
          }));
      // The first batch once more, for the check.
      const std::vector<std::uint32_t>& batch = set.front();
      FERRY_RETURN_IF_ERROR(upload_indices(batch));
      FERRY_RETURN_IF_ERROR(gather(batch));
      std::vector<std::byte> first(batch.size() * row_bytes);
      FERRY_RETURN_IF_ERROR(cuda_status(
          "cudaMemcpy",
          cudaMemcpy(first.data(), d_out.pointer, first.size(), cudaMemcpyDeviceToHost)));
      out.timings.push_back(timing);
      out.first_outputs.push_back(std::move(first));
    }
    return ok_status();
  }();
  out.available = status.ok();
  if (!status.ok()) out.reason = status.message();
  return out;
}

}  // namespace ferry::cli

#endif
