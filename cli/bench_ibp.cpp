// `ferry bench ibp`: the IBP codec on tensors with the statistics of real ML data -- ratios
// against the published per-tensor scheme, host and device encode, device decode against a
// device-to-device copy, and compressed uploads (staged and zero-copy) against the plain pinned
// upload of the same tensor, every output checked, in one run.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "baselines/ibp_published.hpp"
#include "bench_common.hpp"
#include "bench_ibp_gather.hpp"
#include "ibp_families.hpp"
#include "ferry/ibp.hpp"
#include "ferry/ibp_transfer.hpp"
#include "ferry/ops/ibp_decode.hpp"
#include "ferry/ops/ibp_encode.hpp"

namespace ferry::cli {

namespace {

constexpr OptionSpec kOptions[] = {
    {.name = "--families", .kind = OptionKind::choices, .metavar = "LIST",
     .help = "tensor families (see above)",
     .fallback = "indices64,tokens32,bf16-weights,fp16-activations,relu32,bow-features,"
                 "embeddings32",
     .choices = "indices64,tokens32,bf16-weights,fp16-activations,relu32,bow-features,"
                "embeddings32"},
    {.name = "--bytes", .kind = OptionKind::size, .metavar = "SIZE",
     .help = "raw bytes per tensor (rounded down to whole rows)", .fallback = "256M",
     .quick = "4M", .min = 65536},
    {.name = "--group-rows", .kind = OptionKind::text, .metavar = "LIST",
     .help = "comma-separated group sizes whose ratios are listed ('all': every row in one "
             "group); the device runs use the size the host encoder's automatic choice picked",
     .fallback = "all,8192,1024,128"},
    {.name = "--min-time-ms", .kind = OptionKind::count, .metavar = "N",
     .help = "time measured per figure, after a warm-up", .fallback = "300", .quick = "20",
     .max = 3'600'000},
    {.name = "--piece-bytes", .kind = OptionKind::size, .metavar = "SIZE",
     .help = "compressed bytes per decode in the staged upload (CompressedTransferOptions)",
     .fallback = "8M", .min = 4096},
    {.name = "--gather", .kind = OptionKind::flag,
     .help = "instead of the codec's tables: mini-batches of random rows from a table in host "
             "memory, compressed (ibp_decode gather, zero-copy) against the host way and, on "
             "CUDA, the UVA way"},
    {.name = "--table-bytes", .kind = OptionKind::size, .metavar = "SIZE",
     .help = "--gather: raw bytes of each table (whole rows), 64K to 1T", .fallback = "3G",
     .quick = "64M", .min = 65536, .max = 1ull << 40},
    {.name = "--row-bytes", .kind = OptionKind::sizes, .metavar = "LIST",
     .help = "--gather: row sizes of the tables (multiples of 16, 16 to 1M)",
     .fallback = "512,4K"},
    {.name = "--batch-rows", .kind = OptionKind::sizes, .metavar = "LIST",
     .help = "--gather: rows per mini-batch (1 to 16M)", .fallback = "1024,16384,65536",
     .quick = "256,4096"},
};

// --group-rows: 0 for 'all'. run() checked the list.
std::vector<std::uint64_t> group_sizes(const Options& options) {
  std::vector<std::uint64_t> sizes;
  for (const std::string& item : options.list("--group-rows")) {
    sizes.push_back(item == "all" ? 0 : std::stoull(item));
  }
  return sizes;
}

ibp::EncodeParams encode_params(const IbpFamily& family, std::uint64_t elements,
                                std::uint32_t group_rows) {
  ibp::EncodeParams params;
  params.element_size = family.element_size;
  params.row_elements = family.row_elements;
  params.elements = elements;
  params.group_rows = group_rows;
  params.dtype = family.dtype;
  return params;
}

struct FamilyResult {
  std::string name;
  std::uint64_t raw = 0;
  std::uint32_t group_rows = 0;  // the automatic choice
  double ratio = kNaN, published_ratio = kNaN;
  double host_encode = kNaN, host_encode_1 = kNaN;  // every host thread, one thread
  double device_encode = kNaN, device_decode = kNaN, copy = kNaN;
  double plain_upload = kNaN, staged = kNaN, zero_copy = kNaN;
};

Status measure_family(Bench& bench, const IbpFamily& family, Section& ratios, Section& speeds) {
  const Device& device = bench.device;
  const auto min_time = std::chrono::milliseconds(bench.number("--min-time-ms"));
  const std::uint64_t row_bytes = family.row_elements * family.element_size;
  const std::uint64_t rows = std::max<std::uint64_t>(1, bench.number("--bytes") / row_bytes);
  const std::uint64_t elements = rows * family.row_elements;
  const std::uint64_t raw = elements * family.element_size;
  // Device: the tensor, its stream, the decoded copy and a copy target; host: the tensor, streams.
  if (!bench.fits({family.name}, 5 * raw, 5 * raw)) return ok_status();
  FERRY_RETURN_IF_ERROR(bench.progress("ibp " + family.name + ": making the tensor"));
  const std::vector<std::byte> tensor = make_ibp_tensor(family, elements);

  // Ratios: the published scheme, ferry's format at each group size and the automatic choice.
  FERRY_RETURN_IF_ERROR(bench.progress("ibp " + family.name + ": ratios"));
  const PublishedIbp published = published_ibp_size(tensor, family.element_size, family.row_elements);
  FamilyResult result{.name = family.name, .raw = raw};
  result.published_ratio = static_cast<double>(raw) / static_cast<double>(published.bytes);
  std::vector<Value> row = {family.name, raw, result.published_ratio, published.threshold};
  for (std::uint64_t g : group_sizes(bench.options)) {
    const auto group_rows = static_cast<std::uint32_t>(
        g == 0 || g > rows ? std::min<std::uint64_t>(rows, UINT32_MAX) : g);
    Result<std::vector<std::byte>> stream = ibp::encode(tensor, encode_params(family, elements, group_rows));
    row.push_back(stream.ok() ? static_cast<double>(raw) / static_cast<double>(stream->size())
                              : kNaN);
  }
  // The automatic choice, timed on every host thread.
  std::vector<std::byte> stream;
  const ibp::EncodeParams automatic = encode_params(family, elements, 0);
  FERRY_ASSIGN_OR_RETURN(const Timing host_encode,
                         time_each({.warmup = 1, .min_reps = 3, .min_time = min_time}, [&]() -> Status {
                           FERRY_ASSIGN_OR_RETURN(stream, ibp::encode(tensor, automatic));
                           return ok_status();
                         }));
  // One thread at the group size chosen: the encoder's per-core speed (the target is per core,
  // scaling with threads; the automatic choice plans every candidate group size, several times
  // the work of one).
  FERRY_ASSIGN_OR_RETURN(const ibp::Layout chosen, ibp::read_layout(stream));
  ibp::EncodeParams one_thread = encode_params(family, elements, chosen.group_rows);
  one_thread.threads = 1;
  std::vector<std::byte> single;
  FERRY_ASSIGN_OR_RETURN(const Timing host_encode_1,
                         time_each({.warmup = 1, .min_reps = 3, .min_time = min_time}, [&]() -> Status {
                           FERRY_ASSIGN_OR_RETURN(single, ibp::encode(tensor, one_thread));
                           return ok_status();
                         }));
  FERRY_RETURN_IF_ERROR(compare_bytes(single, stream, "1-thread host encode of " + family.name));
  FERRY_ASSIGN_OR_RETURN(const ibp::Layout layout, ibp::read_layout(stream));
  {
    std::vector<std::byte> decoded(raw);
    FERRY_RETURN_IF_ERROR(ibp::decode(stream, decoded));
    FERRY_RETURN_IF_ERROR(compare_bytes(decoded, tensor, "host decode of " + family.name));
  }
  result.group_rows = layout.group_rows;
  result.ratio = static_cast<double>(raw) / static_cast<double>(stream.size());
  result.host_encode = gbps(raw, host_encode.median_seconds);
  result.host_encode_1 = gbps(raw, host_encode_1.median_seconds);
  row.push_back(result.ratio);
  row.push_back(std::uint64_t{layout.group_rows});
  row.push_back(result.ratio / result.published_ratio);
  ratios.add_row(std::move(row));

  // Device encode, checked byte for byte against the host's stream.
  FERRY_RETURN_IF_ERROR(bench.progress("ibp " + family.name + ": device encode"));
  const ibp::EncodeParams fixed = encode_params(family, elements, layout.group_rows);
  FERRY_ASSIGN_OR_RETURN(const std::uint64_t largest, ibp::max_stream_bytes(fixed));
  const std::uint64_t device_stream = ibp::device_stream_bytes(std::max(largest, stream.size()));
  FERRY_ASSIGN_OR_RETURN(Buffer pinned_tensor, pinned_copy(device, tensor));
  FERRY_ASSIGN_OR_RETURN(Buffer source, device.create_buffer(raw));
  FERRY_ASSIGN_OR_RETURN(Buffer encoded, device.create_buffer(device_stream));
  FERRY_ASSIGN_OR_RETURN(Buffer decoded, device.create_buffer(raw));
  FERRY_ASSIGN_OR_RETURN(Buffer copy_target, device.create_buffer(raw));
  const Queue compute = device.queue(QueueKind::compute);
  const Queue upload_queue = device.queue(QueueKind::upload);
  FERRY_RETURN_IF_ERROR(copy_and_wait(upload_queue, pinned_tensor, source, raw));
  const ListSettings once{.commands = 1, .min_time = min_time};
  FERRY_ASSIGN_OR_RETURN(const ListTiming encode_timing,
                         time_lists(compute, [&]() -> Result<CommandList> {
                           CommandList list;
                           FERRY_RETURN_IF_ERROR(ibp_encode(list, {source, 0, encoded, 0}, fixed));
                           return list;
                         }, once));
  {
    FERRY_ASSIGN_OR_RETURN(const std::vector<std::byte> device_bytes,
                           read_back(device, encoded, stream.size()));
    FERRY_RETURN_IF_ERROR(compare_bytes(device_bytes, stream, "device encode of " + family.name));
  }
  result.device_encode = gbps(raw, encode_timing.lists.median_seconds);

  // Device decode from device memory (the stream the device encoded: the host's bytes), against
  // a device-to-device copy of the decoded bytes.
  FERRY_RETURN_IF_ERROR(bench.progress("ibp " + family.name + ": device decode"));
  IbpDecodeParams whole;
  whole.layout = layout;
  IbpDecodeBuffers decode_buffers;
  decode_buffers.stream = encoded;
  decode_buffers.output = decoded;
  decode_buffers.status = encoded;
  decode_buffers.status_offset = ibp::device_stream_bytes(stream.size()) - 8;
  FERRY_ASSIGN_OR_RETURN(const ListTiming decode_timing,
                         time_lists(compute, [&]() -> Result<CommandList> {
                           CommandList list;
                           FERRY_RETURN_IF_ERROR(ibp_decode(list, decode_buffers, whole));
                           return list;
                         }, once));
  FERRY_ASSIGN_OR_RETURN(const ListTiming copy_timing,
                         time_lists(compute, [&]() -> Result<CommandList> {
                           CommandList list;
                           FERRY_RETURN_IF_ERROR(list.copy(source, 0, copy_target, 0, raw));
                           return list;
                         }, once));
  auto check_decoded = [&](const std::string& what) -> Status {
    FERRY_ASSIGN_OR_RETURN(const std::vector<std::byte> back, read_back(device, decoded, raw));
    FERRY_RETURN_IF_ERROR(compare_bytes(back, tensor, what + " of " + family.name));
    CommandList clear;
    FERRY_RETURN_IF_ERROR(fill(clear, decoded, 0, raw, 0xDEADBEEF));
    FERRY_ASSIGN_OR_RETURN(TimelinePoint cleared, compute.submit(std::move(clear)));
    return cleared.wait(kWaitTimeout);
  };
  FERRY_RETURN_IF_ERROR(check_decoded("device decode"));
  result.device_decode = gbps(raw, decode_timing.lists.median_seconds);
  result.copy = gbps(raw, copy_timing.lists.median_seconds);

  // Uploads: the plain pinned copy of the raw tensor; the stream from pinned memory, staged
  // (DMA in pieces, each decoded as it lands) and zero-copy (the decoder reads it over the bus).
  FERRY_RETURN_IF_ERROR(bench.progress("ibp " + family.name + ": uploads"));
  std::vector<std::byte> padded = stream;
  padded.resize(ibp::device_stream_bytes(stream.size()));
  FERRY_ASSIGN_OR_RETURN(Buffer pinned_stream, pinned_copy(device, padded));
  const RepeatSettings each{.warmup = 1, .min_reps = 3, .min_time = min_time};
  FERRY_ASSIGN_OR_RETURN(const Timing plain, time_each(each, [&]() -> Status {
                           return copy_and_wait(upload_queue, pinned_tensor, source, raw);
                         }));
  ibp::CompressedTransferOptions transfer;
  transfer.validated = true;  // encoded in this process
  transfer.piece_bytes = bench.number("--piece-bytes");
  FERRY_ASSIGN_OR_RETURN(const Timing staged, time_each(each, [&]() -> Status {
                           FERRY_ASSIGN_OR_RETURN(
                               TimelinePoint done,
                               ibp::upload_decoded(upload_queue, compute, pinned_stream, encoded,
                                                   decoded, 0, {}, transfer));
                           return done.wait(kWaitTimeout);
                         }));
  FERRY_RETURN_IF_ERROR(check_decoded("staged compressed upload"));
  FERRY_ASSIGN_OR_RETURN(const Timing zero_copy, time_each(each, [&]() -> Status {
                           FERRY_ASSIGN_OR_RETURN(
                               TimelinePoint done,
                               ibp::decode_from_host(compute, pinned_stream, decoded, 0, {},
                                                     transfer));
                           return done.wait(kWaitTimeout);
                         }));
  FERRY_RETURN_IF_ERROR(check_decoded("zero-copy decode"));
  result.plain_upload = gbps(raw, plain.median_seconds);
  result.staged = gbps(raw, staged.median_seconds);
  result.zero_copy = gbps(raw, zero_copy.median_seconds);

  speeds.add_row({family.name, raw, result.ratio, std::uint64_t{result.group_rows},
                  result.host_encode, result.host_encode_1, result.device_encode,
                  result.device_decode, result.device_decode / result.copy, result.plain_upload, result.staged,
                  result.staged / (result.ratio * result.plain_upload), result.zero_copy,
                  result.zero_copy / (result.ratio * result.plain_upload)});
  bench.report.summary.emplace_back(
      "ibp " + family.name,
      "ratio " + ratio_text(result.ratio) + " (published " + ratio_text(result.published_ratio) +
          "), decode " + format_value(result.device_decode, Unit::gbps) + " GB/s, staged " +
          ratio_text(result.staged / (result.ratio * result.plain_upload)) +
          " of ratio x plain upload");
  return ok_status();
}

Status measure(Bench& bench) {
  if (bench.options.flag("--gather")) return measure_ibp_gathers(bench);
  bench.report.add_method(
      "Each family's tensor is made once (--bytes of it). Ratios: raw bytes / stream bytes, for "
      "ferry's format at each --group-rows and the host encoder's automatic choice, and for the "
      "published per-tensor scheme (best threshold of 0.70-1.00) on the same tensor. Speeds: "
      "median of repetitions (GB/s = raw tensor bytes, 1e9, per second); every output checked "
      "byte for byte (device stream against the host's, decoded tensors against the original).",
      {});
  Section& ratios = bench.report.add_section("Ratios (raw / compressed)", "ratios");
  ratios.columns = {{"family", "family", Unit::text}, {"raw", "raw_bytes", Unit::bytes},
                    {"published", "published_ratio", Unit::ratio},
                    {"threshold", "published_threshold", Unit::number}};
  for (std::uint64_t g : group_sizes(bench.options)) {
    const std::string name = g == 0 ? "one group" : "G=" + std::to_string(g);
    ratios.columns.push_back({name, "ratio_g" + std::to_string(g), Unit::ratio});
  }
  ratios.columns.push_back({"auto", "ratio_auto", Unit::ratio});
  ratios.columns.push_back({"auto G", "auto_group_rows", Unit::count});
  ratios.columns.push_back({"auto/published", "auto_over_published", Unit::ratio});
  Section& speeds = bench.report.add_section("Speeds (raw GB/s)", "speeds");
  speeds.columns = {{"family", "family", Unit::text},
                    {"raw", "raw_bytes", Unit::bytes},
                    {"ratio", "ratio", Unit::ratio},
                    {"G", "group_rows", Unit::count},
                    {"host enc", "host_encode_gbps", Unit::gbps},
                    {"host enc 1 thread", "host_encode_1thread_gbps", Unit::gbps},
                    {"dev enc", "device_encode_gbps", Unit::gbps},
                    {"dev dec", "device_decode_gbps", Unit::gbps},
                    {"dec/copy", "decode_over_copy", Unit::ratio},
                    {"plain up", "plain_upload_gbps", Unit::gbps},
                    {"staged", "staged_gbps", Unit::gbps},
                    {"staged/(ratio*plain)", "staged_over_bound", Unit::ratio},
                    {"zero-copy", "zero_copy_gbps", Unit::gbps},
                    {"zc/(ratio*plain)", "zero_copy_over_bound", Unit::ratio}};
  speeds.notes = {
      "host enc: ferry::ibp::encode on every host thread, the automatic group choice included; "
      "host enc 1 thread: on one thread at the G that choice took (the encoder's per-core speed; "
      "its stream checked against the other's). "
      "dev enc / dev dec: one ibp_encode / ibp_decode command per list (device memory), "
      "dec/copy: against CommandList::copy of the raw bytes between device buffers. plain up: "
      "CommandList::copy of the raw tensor from pinned memory to the device, submitted and waited "
      "for. staged: ibp::upload_decoded of the stream from pinned memory (DMA in --piece-bytes "
      "pieces, each decoded as it lands); zero-copy: ibp::decode_from_host (the decoder reads "
      "the pinned stream over the bus). The target of both: >= 0.9 x ratio x plain up."};
  bench.skipped = {"Skipped families", "skipped", {}, {{"family", "family"}, {"reason", "reason"}}};
  bool measured = false;
  for (const IbpFamily* family : ibp_families_named(bench.options.list("--families"))) {
    const std::size_t before = speeds.rows.size();
    Status status = measure_family(bench, *family, ratios, speeds);
    if (!status.ok()) return status.with_context("ibp " + family->name);
    measured = measured || speeds.rows.size() > before;
  }
  return bench.end_skipped(!measured);
}

int run(const Options& options, const std::string& command_line) {
  for (const std::string& item : options.list("--group-rows")) {
    const bool number = !item.empty() && item.size() < 11 &&
                        item.find_first_not_of("0123456789") == std::string::npos &&
                        std::stoull(item) >= 1 && std::stoull(item) <= UINT32_MAX;
    if (item != "all" && !number) {
      return usage_error("bench ibp: --group-rows " + item + ": 'all' or 1 to 4294967295");
    }
  }
  for (std::uint64_t bytes : options.sizes("--row-bytes")) {
    if (bytes < 16 || bytes > (1u << 20) || bytes % 16 != 0) {
      return usage_error("bench ibp: --row-bytes " + std::to_string(bytes) +
                         ": a multiple of 16 from 16 to 1M");
    }
  }
  for (std::uint64_t rows : options.sizes("--batch-rows")) {
    if (rows < 1 || rows > (1u << 24)) {
      return usage_error("bench ibp: --batch-rows " + std::to_string(rows) + ": 1 to 16M");
    }
  }
  return run_bench(options, command_line, "ferry bench ibp",
                   {QueueKind::compute, QueueKind::upload, QueueKind::download}, false, measure);
}

}  // namespace

const Command kBenchIbp = {
    .name = "bench ibp",
    .summary = "The IBP codec on tensors shaped like real ML data: ratios against the published "
               "per-tensor scheme, host and device encode, device decode against a device copy, "
               "and compressed uploads (staged, zero-copy) against the plain pinned upload.",
    .about =
        "Families (--families): int64 edge indices < 2^24, int32 token ids (Zipf over a 50k\n"
        "vocabulary), bf16 weights N(0, 0.02), fp16 GELU activations, float32 ReLU activations,\n"
        "bag-of-words node features (sparse, row-normalized) and a float32 embedding table.\n"
        "Every figure is checked: decoded tensors against the original, the device's stream\n"
        "against the host encoder's bytes (exit 1 on a mismatch). --gather measures instead\n"
        "mini-batches of random rows of tables of those families in host memory: ferry's\n"
        "compressed gather read in place, against the host way (gather into pinned memory,\n"
        "one copy) and, on CUDA, the UVA way (a kernel reading the raw rows in place).\n",
    .options = kOptions,
    .run = run,
};

}  // namespace ferry::cli
