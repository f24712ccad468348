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
};

struct Family {
  std::string name;
  std::string description;
  ibp::DType dtype;
  std::uint8_t element_size;
  std::uint64_t row_elements;
};

const Family kFamilies[] = {
    {"indices64", "int64 edge indices, uniform < 2^24 (1-D, rows of 4096)", ibp::DType::i64, 8,
     4096},
    {"tokens32", "int32 token ids, Zipf(1.1) over a 50,257 vocabulary (1-D, rows of 4096)",
     ibp::DType::i32, 4, 4096},
    {"bf16-weights", "bf16 weights N(0, 0.02), 4096 per row", ibp::DType::bf16, 2, 4096},
    {"fp16-activations", "fp16 activations, GELU of N(0, 1), 4096 per row", ibp::DType::f16, 2,
     4096},
    {"relu32", "float32 ReLU of N(0, 1) (about half zeros), 4096 per row", ibp::DType::f32, 4,
     4096},
    {"bow-features", "float32 bag-of-words node features, 1433 per row, 1.3% non-zero, "
                     "row-normalized", ibp::DType::f32, 4, 1433},
    {"embeddings32", "float32 embedding table N(0, 0.1), 128 per row", ibp::DType::f32, 4, 128},
};

// Uniform in [0, 1) from a counter.
double uniform(std::uint64_t counter) {
  return static_cast<double>(mix64(counter) >> 11) * 0x1.0p-53;
}

double normal(std::uint64_t counter) {
  const double u1 = std::max(uniform(2 * counter), 1e-300), u2 = uniform(2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::uint16_t to_bfloat16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  return static_cast<std::uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

std::uint16_t to_float16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  const std::uint32_t sign = (bits >> 16) & 0x8000;
  const float magnitude = std::fabs(value);
  if (!(magnitude < 65520.0f)) return static_cast<std::uint16_t>(sign | 0x7C00);
  if (magnitude < 0x1.0p-14f) {  // subnormal: a multiple of 2^-24, rounded to nearest even
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(
                                                 std::nearbyint(magnitude * 0x1.0p24f)));
  }
  const std::uint32_t m = bits & 0x7FFFFFFF;
  return static_cast<std::uint16_t>(sign | ((m - 0x38000000 + 0xFFF + ((m >> 13) & 1)) >> 13));
}

// The family's tensor: `elements` elements, threads filling slices (each element from its index).
std::vector<std::byte> make_tensor(const Family& family, std::uint64_t elements) {
  std::vector<std::byte> data(elements * family.element_size);
  // Zipf(1.1) over 50,257 ids: the inverse CDF on a 2^16-entry table of quantiles.
  std::vector<std::uint32_t> zipf;
  if (family.name == "tokens32") {
    constexpr std::uint32_t kVocab = 50257;
    std::vector<double> cdf(kVocab);
    double sum = 0;
    for (std::uint32_t i = 0; i < kVocab; ++i) cdf[i] = (sum += std::pow(i + 1.0, -1.1));
    zipf.resize(1 << 16);
    for (std::uint32_t q = 0; q < zipf.size(); ++q) {
      const double target = (q + 0.5) / zipf.size() * sum;
      zipf[q] = static_cast<std::uint32_t>(std::lower_bound(cdf.begin(), cdf.end(), target) -
                                           cdf.begin());
    }
  }
  auto fill = [&](std::uint64_t first, std::uint64_t end) {
    for (std::uint64_t i = first; i < end; ++i) {
      std::byte* out = data.data() + i * family.element_size;
      const std::uint64_t seed = i * 0x9E3779B97F4A7C15ull + family.element_size;
      if (family.name == "indices64") {
        const std::uint64_t v = mix64(seed) >> 40;  // < 2^24
        std::memcpy(out, &v, 8);
      } else if (family.name == "tokens32") {
        // Rarely past the table's resolution: a uniform id in the tail.
        const std::uint64_t r = mix64(seed);
        const std::uint32_t v =
            (r & 0xFF) == 0 ? static_cast<std::uint32_t>((r >> 8) % 50257) : zipf[(r >> 16) & 0xFFFF];
        std::memcpy(out, &v, 4);
      } else if (family.name == "bf16-weights") {
        const std::uint16_t v = to_bfloat16(static_cast<float>(0.02 * normal(seed)));
        std::memcpy(out, &v, 2);
      } else if (family.name == "fp16-activations") {
        const double x = normal(seed);
        const double gelu = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
        const std::uint16_t v = to_float16(static_cast<float>(gelu));
        std::memcpy(out, &v, 2);
      } else if (family.name == "relu32") {
        const float v = static_cast<float>(std::max(0.0, normal(seed)));
        std::memcpy(out, &v, 4);
      } else if (family.name == "bow-features") {
        // A word present with probability 1.3%, counts 1-3, divided by the row's expected total
        // (about 18.6 words): the values a row-normalized count vector takes.
        const std::uint64_t r = mix64(seed);
        float v = 0.0f;
        if (r % 1000 < 13) v = static_cast<float>(1 + (r >> 32) % 3) / 18.6f;
        std::memcpy(out, &v, 4);
      } else {  // embeddings32
        const float v = static_cast<float>(0.1 * normal(seed));
        std::memcpy(out, &v, 4);
      }
    }
  };
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  const std::uint64_t per = (elements + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    const std::uint64_t first = std::min(elements, t * per), end = std::min(elements, first + per);
    if (first < end) workers.emplace_back(fill, first, end);
  }
  for (std::thread& worker : workers) worker.join();
  return data;
}

// --group-rows: 0 for 'all'. run() checked the list.
std::vector<std::uint64_t> group_sizes(const Options& options) {
  std::vector<std::uint64_t> sizes;
  for (const std::string& item : options.list("--group-rows")) {
    sizes.push_back(item == "all" ? 0 : std::stoull(item));
  }
  return sizes;
}

ibp::EncodeParams encode_params(const Family& family, std::uint64_t elements,
                                std::uint32_t group_rows) {
  ibp::EncodeParams params;
  params.element_size = family.element_size;
  params.row_elements = family.row_elements;
  params.elements = elements;
  params.group_rows = group_rows;
  params.dtype = family.dtype;
  return params;
}

double gbps(std::uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

// Reads `bytes` of `buffer` back to the host.
Result<std::vector<std::byte>> read_back(const Device& device, const BufferRef& buffer,
                                         std::uint64_t bytes) {
  FERRY_ASSIGN_OR_RETURN(Buffer readback, device.create_buffer(bytes, MemoryKind::host_readback));
  FERRY_RETURN_IF_ERROR(copy_and_wait(device.queue(QueueKind::download), buffer, readback, bytes));
  FERRY_ASSIGN_OR_RETURN(std::span<std::byte> host, readback.host_span());
  return std::vector<std::byte>(host.begin(), host.end());
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

Status measure_family(Bench& bench, const Family& family, Section& ratios, Section& speeds) {
  const Device& device = bench.device;
  const auto min_time = std::chrono::milliseconds(bench.number("--min-time-ms"));
  const std::uint64_t row_bytes = family.row_elements * family.element_size;
  const std::uint64_t rows = std::max<std::uint64_t>(1, bench.number("--bytes") / row_bytes);
  const std::uint64_t elements = rows * family.row_elements;
  const std::uint64_t raw = elements * family.element_size;
  // Device: the tensor, its stream, the decoded copy and a copy target; host: the tensor, streams.
  if (!bench.fits({family.name}, 5 * raw, 5 * raw)) return ok_status();
  FERRY_RETURN_IF_ERROR(bench.progress("ibp " + family.name + ": making the tensor"));
  const std::vector<std::byte> tensor = make_tensor(family, elements);

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
  for (const std::string& name : split_list(bench.options.text("--families"))) {
    for (const Family& family : kFamilies) {
      if (family.name != name) continue;
      const std::size_t before = speeds.rows.size();
      Status status = measure_family(bench, family, ratios, speeds);
      if (!status.ok()) return status.with_context("ibp " + family.name);
      measured = measured || speeds.rows.size() > before;
    }
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
        "against the host encoder's bytes (exit 1 on a mismatch).\n",
    .options = kOptions,
    .run = run,
};

}  // namespace ferry::cli
