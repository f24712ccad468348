#include "bench_ibp_gather.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "baselines/cuda_gather.hpp"
#include "ferry/ibp.hpp"
#include "ferry/ops/ibp_decode.hpp"
#include "ibp_families.hpp"

namespace ferry::cli {

namespace {

// Index sets per batch size: the batches are taken in turn, so that no batch's rows are still
// in the GPU's L2 cache from the batch before.
constexpr std::size_t kBatchesPerSize = 4;

// Threads that copy a batch's rows into pinned memory together, kept between batches (as
// PyTorch's intra-op pool is), so that a batch pays for no thread start.
class GatherWorkers {
 public:
  explicit GatherWorkers(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i) {
      try {
        threads_.emplace_back([this, i] { work(i); });
      } catch (const std::system_error&) {
        break;  // fewer threads: the gather is slower, not wrong
      }
    }
  }
  ~GatherWorkers() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }
  GatherWorkers(const GatherWorkers&) = delete;
  GatherWorkers& operator=(const GatherWorkers&) = delete;

  // out row i = table row rows[i], rows of `row_bytes`; on the caller's thread when none started.
  void gather(std::span<const std::byte> table, std::uint64_t row_bytes,
              std::span<const std::uint32_t> rows, std::byte* out) {
    if (threads_.empty()) {
      copy_rows(table.data(), row_bytes, rows, out, 0, rows.size());
      return;
    }
    std::unique_lock lock(mutex_);
    job_ = {table.data(), row_bytes, rows, out};
    pending_ = static_cast<unsigned>(threads_.size());
    ++generation_;
    start_.notify_all();
    done_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  struct Job {
    const std::byte* table = nullptr;
    std::uint64_t row_bytes = 0;
    std::span<const std::uint32_t> rows;
    std::byte* out = nullptr;
  };

  static void copy_rows(const std::byte* table, std::uint64_t row_bytes,
                        std::span<const std::uint32_t> rows, std::byte* out, std::size_t first,
                        std::size_t end) {
    for (std::size_t i = first; i < end; ++i) {
      std::memcpy(out + i * row_bytes, table + std::uint64_t{rows[i]} * row_bytes, row_bytes);
    }
  }

  void work(unsigned index) {
    std::uint64_t seen = 0;
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      const std::size_t n = job.rows.size(), parts = threads_.size();
      copy_rows(job.table, job.row_bytes, job.rows, job.out, n * index / parts,
                n * (index + 1) / parts);
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::vector<std::thread> threads_;
  Job job_;
  std::uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stop_ = false;
};

// The truth: rows[i] of `table`, row after row.
std::vector<std::byte> host_gather(std::span<const std::byte> table, std::uint64_t row_bytes,
                                   std::span<const std::uint32_t> rows) {
  std::vector<std::byte> out(rows.size() * row_bytes);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(out.data() + i * row_bytes, table.data() + std::uint64_t{rows[i]} * row_bytes,
                row_bytes);
  }
  return out;
}

struct TableShape {
  const IbpFamily* family;
  std::uint64_t row_bytes, rows;
};

Status measure_table(Bench& bench, const TableShape& shape, GatherWorkers& workers,
                     Section& section) {
  const Device& device = bench.device;
  const IbpFamily& family = *shape.family;
  const std::uint64_t row_bytes = shape.row_bytes, rows = shape.rows;
  const std::uint64_t raw = rows * row_bytes;
  const std::vector<std::uint64_t> batch_sizes = bench.options.sizes("--batch-rows");
  const std::uint64_t most = *std::max_element(batch_sizes.begin(), batch_sizes.end());
  const std::string name = family.name + " x " + std::to_string(row_bytes) + " B";
  // Host: the table, its stream (about as large at worst), the pinned stream and the staging.
  // Device: the indices, the output and (UVA) its own output.
  if (!bench.fits({name}, 2 * most * row_bytes + kBatchesPerSize * most * 4,
                  3 * raw + 2 * most * row_bytes)) {
    return ok_status();
  }
  FERRY_RETURN_IF_ERROR(bench.progress("ibp gather " + name + ": making and encoding the table"));
  const std::vector<std::byte> table =
      make_ibp_tensor(family, rows * (row_bytes / family.element_size));
  ibp::EncodeParams params;
  params.element_size = family.element_size;
  params.row_elements = row_bytes / family.element_size;
  params.elements = rows * params.row_elements;
  params.dtype = family.dtype;  // group_rows 0: the encoder's automatic choice
  FERRY_ASSIGN_OR_RETURN(std::vector<std::byte> stream, ibp::encode(table, params));
  FERRY_ASSIGN_OR_RETURN(const ibp::Layout layout, ibp::read_layout(stream));
  const double ratio = static_cast<double>(raw) / static_cast<double>(stream.size());
  const double stream_bytes_per_row =
      static_cast<double>(stream.size()) / static_cast<double>(rows);
  stream.resize(ibp::device_stream_bytes(stream.size()));
  FERRY_ASSIGN_OR_RETURN(Buffer pinned_stream, pinned_copy(device, stream));
  stream = {};

  // The batches: uniform random rows (duplicates allowed, as a sampler's are), per size.
  std::vector<std::vector<std::vector<std::uint32_t>>> sets;
  for (std::uint64_t size : batch_sizes) {
    auto& set = sets.emplace_back();
    for (std::size_t b = 0; b < kBatchesPerSize; ++b) {
      auto& batch = set.emplace_back(size);
      for (std::uint64_t i = 0; i < size; ++i) {
        const std::uint64_t seed = size * 7919 + b * 0x10001 + i * 31 + rows;
        batch[i] = static_cast<std::uint32_t>(mix64(seed) % rows);
      }
    }
  }
  const auto min_time = std::chrono::milliseconds(bench.number("--min-time-ms"));
  const RepeatSettings each{.warmup = 1, .min_reps = 3, .min_time = min_time};

  // (b) the UVA way, on CUDA devices.
  CudaUvaGather uva;
  if (device.backend() == Backend::cuda) {
    FERRY_RETURN_IF_ERROR(bench.progress("ibp gather " + name + ": the UVA baseline"));
    uva = measure_cuda_uva_gather(bench.device_index(), table, row_bytes, sets, each);
    for (std::size_t s = 0; uva.available && s < sets.size(); ++s) {
      FERRY_RETURN_IF_ERROR(compare_bytes(uva.first_outputs[s],
                                          host_gather(table, row_bytes, sets[s].front()),
                                          "the UVA gather baseline of " + name));
    }
  }

  FERRY_ASSIGN_OR_RETURN(Buffer indices, device.create_buffer(kBatchesPerSize * most * 4));
  FERRY_ASSIGN_OR_RETURN(Buffer output, device.create_buffer(most * row_bytes));
  FERRY_ASSIGN_OR_RETURN(Buffer status, device.create_buffer(4));
  FERRY_ASSIGN_OR_RETURN(Buffer staging, device.create_buffer(most * row_bytes,
                                                              MemoryKind::host_upload));
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> staging_host, staging.host_span());
  const Queue compute = device.queue(QueueKind::compute);
  const Queue upload = device.queue(QueueKind::upload);

  for (std::size_t s = 0; s < sets.size(); ++s) {
    const std::uint64_t size = batch_sizes[s];
    const std::uint64_t useful = size * row_bytes;
    FERRY_RETURN_IF_ERROR(bench.progress("ibp gather " + name + ": batches of " +
                                         std::to_string(size) + " rows"));
    {  // this size's index sets, side by side
      std::vector<std::byte> packed(kBatchesPerSize * size * 4);
      for (std::size_t b = 0; b < kBatchesPerSize; ++b) {
        std::memcpy(packed.data() + b * size * 4, sets[s][b].data(), size * 4);
      }
      FERRY_ASSIGN_OR_RETURN(Buffer pinned_indices, pinned_copy(device, packed));
      FERRY_RETURN_IF_ERROR(copy_and_wait(upload, pinned_indices, indices, packed.size()));
    }
    const std::vector<std::byte> truth = host_gather(table, row_bytes, sets[s].front());
    const auto check = [&](const std::string& what) -> Status {
      FERRY_ASSIGN_OR_RETURN(const std::vector<std::byte> back, read_back(device, output, useful));
      FERRY_RETURN_IF_ERROR(compare_bytes(back, truth, what + " of " + name));
      CommandList clear;
      FERRY_RETURN_IF_ERROR(fill(clear, output, 0, useful, 0xDEADBEEF));
      FERRY_ASSIGN_OR_RETURN(TimelinePoint cleared, compute.submit(std::move(clear)));
      return cleared.wait(kWaitTimeout);
    };

    // (c) ferry: the compressed rows read in place from pinned memory and unpacked.
    IbpDecodeParams gather;
    gather.layout = layout;
    gather.rows = IbpDecodeRows::gather;
    gather.row_count = size;
    IbpDecodeBuffers buffers;
    buffers.stream = pinned_stream;
    buffers.indices = indices;
    buffers.output = output;
    buffers.status = status;
    std::uint64_t turn = 0;
    const auto decode = [&](std::size_t b) -> Status {
      buffers.indices_offset = b * size * 4;
      CommandList list;
      FERRY_RETURN_IF_ERROR(ibp_decode(list, buffers, gather));
      FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute.submit(std::move(list)));
      return done.wait(kWaitTimeout);
    };
    FERRY_ASSIGN_OR_RETURN(const Timing compressed,
                           time_each(each, [&] { return decode(turn++ % kBatchesPerSize); }));
    FERRY_RETURN_IF_ERROR(decode(0));
    {
      FERRY_ASSIGN_OR_RETURN(const std::vector<std::byte> word, read_back(device, status, 4));
      std::uint32_t value = 0;
      std::memcpy(&value, word.data(), 4);
      if (value != 0) {
        return Status(ErrorCode::internal, "the compressed gather of " + name +
                                               " reported status " + std::to_string(value));
      }
    }
    FERRY_RETURN_IF_ERROR(check("the compressed gather"));

    // (a) the PyTorch way: the rows gathered on the host into pinned memory, then one copy.
    turn = 0;
    const auto host_way = [&](std::size_t b) -> Status {
      workers.gather(table, row_bytes, sets[s][b], staging_host.data());
      return copy_and_wait(upload, staging, output, useful);
    };
    FERRY_ASSIGN_OR_RETURN(const Timing host,
                           time_each(each, [&] { return host_way(turn++ % kBatchesPerSize); }));
    FERRY_RETURN_IF_ERROR(host_way(0));
    FERRY_RETURN_IF_ERROR(check("the host gather and copy"));

    const double uva_seconds = uva.available ? uva.timings[s].median_seconds : kNaN;
    section.add_row({family.name, row_bytes, raw, ratio, std::uint64_t{layout.group_rows}, size,
                     host.median_seconds * 1e6, uva_seconds * 1e6,
                     compressed.median_seconds * 1e6, gbps(useful, host.median_seconds),
                     gbps(useful, uva_seconds), gbps(useful, compressed.median_seconds),
                     uva_seconds / compressed.median_seconds,
                     host.median_seconds / compressed.median_seconds, stream_bytes_per_row});
    bench.report.summary.emplace_back(
        "ibp gather " + name + ", " + std::to_string(size) + " rows",
        "ratio " + ratio_text(ratio) + ", compressed " +
            format_value(gbps(useful, compressed.median_seconds), Unit::gbps) + " GB/s, " +
            ratio_text(host.median_seconds / compressed.median_seconds) + " the host way" +
            (uva.available ? ", " + ratio_text(uva_seconds / compressed.median_seconds) +
                                 " the UVA way"
                           : std::string()));
  }
  if (device.backend() == Backend::cuda && !uva.available) {
    bench.report.summary.emplace_back("ibp gather " + name, "no UVA baseline: " + uva.reason);
  }
  return ok_status();
}

}  // namespace

Status measure_ibp_gathers(Bench& bench) {
  bench.report.add_method(
      "Per family and --row-bytes, a table of --table-bytes (whole rows) is made in host memory "
      "and encoded by the host encoder (its automatic group size); its stream is copied into "
      "pinned memory the device reads in place. Per --batch-rows, " +
          std::to_string(kBatchesPerSize) +
          " batches of uniform random row ids (duplicates allowed) are taken in turn; every way "
          "writes the batch's rows into one device buffer, and each way's output is checked "
          "byte for byte against the host's gather of the same ids. Times: median per batch, "
          "from start to the rows on the device, waited for.",
      {});
  Section& section =
      bench.report.add_section("Gathers of random rows from a host-resident table", "gathers");
  section.columns = {{"family", "family", Unit::text},
                     {"row", "row_bytes", Unit::bytes},
                     {"table", "table_bytes", Unit::bytes},
                     {"ratio", "ratio", Unit::ratio},
                     {"G", "group_rows", Unit::count},
                     {"batch rows", "batch_rows", Unit::count},
                     {"host way us", "host_us", Unit::number},
                     {"UVA us", "uva_us", Unit::number},
                     {"ferry us", "ferry_us", Unit::number},
                     {"host GB/s", "host_gbps", Unit::gbps},
                     {"UVA GB/s", "uva_gbps", Unit::gbps},
                     {"ferry GB/s", "ferry_gbps", Unit::gbps},
                     {"ferry/UVA", "ferry_over_uva", Unit::ratio},
                     {"ferry/host", "ferry_over_host", Unit::ratio},
                     {"stream B/row", "stream_bytes_per_row", Unit::number}};
  section.notes = {
      "host way (the PyTorch way, x[ids] then a copy, with one copy fewer: the rows gathered "
      "straight into pinned memory): the rows copied on the host's threads into a pinned buffer, "
      "then CommandList::copy of it to the device, waited for. UVA (CUDA devices: what DGL's "
      "and PyG's GPU samplers do): the raw table registered with cudaHostRegister, a kernel "
      "reading each row in place over the bus, a warp per row. ferry: ibp_decode gather of the "
      "compressed stream in pinned memory (read in place: zero-copy), one command per batch, "
      "submitted and waited for. GB/s: the batch's useful row bytes (batch rows x row), 1e9, "
      "per second. stream B/row: the stream's bytes over its rows (the mean a row costs on the "
      "bus, its group's masks and row table entry included). ferry/UVA and ferry/host: how "
      "many times faster than that way. Target (issue 32): ferry >= 0.8 x min(ratio x UVA, "
      "decode rate), and above UVA on every family whose ratio is >= 1.2."};
  bench.skipped = {"Skipped tables", "skipped", {}, {{"table", "table"}, {"reason", "reason"}}};
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  GatherWorkers workers(threads);
  bool measured = false;
  for (const IbpFamily* family : ibp_families_named(bench.options.list("--families"))) {
    for (std::uint64_t row_bytes : bench.options.sizes("--row-bytes")) {
      const std::uint64_t rows = bench.number("--table-bytes") / row_bytes;
      if (rows == 0 || rows > UINT32_MAX) {
        bench.skipped.add_row({family->name + " x " + std::to_string(row_bytes) + " B",
                               "the table holds " + std::to_string(rows) +
                                   " rows (gathers take 1 to 2^32 - 1)"});
        continue;
      }
      const std::size_t before = section.rows.size();
      Status status = measure_table(bench, {family, row_bytes, rows}, workers, section);
      if (!status.ok()) return status.with_context("ibp gather " + family->name);
      measured = measured || section.rows.size() > before;
    }
  }
  return bench.end_skipped(!measured);
}

}  // namespace ferry::cli
