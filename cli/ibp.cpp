// `ferry ibp encode|decode|inspect`: tensors in files (.npy of any dtype, 1-D or 2-D, or raw bytes
// with --dtype and --shape) to IBP streams (docs/IBP_FORMAT.md) and back, and what a stream holds.
// --backend says where the work runs: the host codec (ferry/ibp.hpp), or a device's ibp_encode /
// ibp_decode ops (run_encode / run_decode).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "ferry/ferry.hpp"
#include "options.hpp"
#include "vector_files.hpp"

namespace ferry::cli {

namespace {

namespace fs = std::filesystem;
using vector_files::VectorElement;

constexpr std::string_view kDtypes = "u8,i8,u16,i16,f16,bf16,u32,i32,f32,u64,i64,f64,bool";

constexpr OptionSpec kOutOption = {.name = "--out", .kind = OptionKind::text, .metavar = "PATH",
                                   .help = "the output file (also -o) (required)"};
constexpr OptionSpec kThreadsOption = {.name = "--threads", .kind = OptionKind::count,
                                       .metavar = "N", .help = "host threads (0: all)",
                                       .fallback = "0", .max = 1024};
constexpr OptionSpec kIbpBackendOption = {
    .name = "--backend", .kind = OptionKind::choice, .metavar = "NAME",
    .help = "where the codec runs: auto or cpu (the host codec), vulkan or cuda (the device's "
            "ibp_encode / ibp_decode ops, the data crossing the bus)",
    .fallback = "auto", .choices = "auto,cpu,vulkan,cuda"};

constexpr OptionSpec kEncodeOptions[] = {
    kOutOption,
    {.name = "--group-rows", .kind = OptionKind::count, .metavar = "N",
     .help = "rows per group (0: the smallest stream among all rows, 65536, 8192, 1024 and 128)",
     .fallback = "0", .max = 0xffffffffu},
    {.name = "--row-elements", .kind = OptionKind::count, .metavar = "N",
     .help = "a 1-D array's elements per row (default: min(elements, 4096))", .min = 1},
    {.name = "--dtype", .kind = OptionKind::choice, .metavar = "NAME",
     .help = "raw input (not .npy): its element type", .choices = kDtypes},
    {.name = "--shape", .kind = OptionKind::dims, .metavar = "DIMS",
     .help = "raw input: its shape, N (1-D) or ROWSxCOLS (2-D)"},
    kThreadsOption,
    kIbpBackendOption,
    kDeviceOption,
};
constexpr OptionSpec kDecodeOptions[] = {kOutOption, kThreadsOption, kIbpBackendOption,
                                         kDeviceOption};
constexpr OptionSpec kInspectOptions[] = {
    {.name = "--groups", .kind = OptionKind::count, .metavar = "N",
     .help = "groups listed, at most", .fallback = "20"},
};

struct DtypeName {
  std::string_view name;
  ibp::DType dtype;
  VectorElement element;
  std::uint8_t size;
};
constexpr DtypeName kDtypeNames[] = {
    {"u8", ibp::DType::u8, VectorElement::uint8, 1},
    {"i8", ibp::DType::i8, VectorElement::int8, 1},
    {"u16", ibp::DType::u16, VectorElement::uint16, 2},
    {"i16", ibp::DType::i16, VectorElement::int16, 2},
    {"f16", ibp::DType::f16, VectorElement::float16, 2},
    {"bf16", ibp::DType::bf16, VectorElement::bfloat16, 2},
    {"u32", ibp::DType::u32, VectorElement::uint32, 4},
    {"i32", ibp::DType::i32, VectorElement::int32, 4},
    {"f32", ibp::DType::f32, VectorElement::float32, 4},
    {"u64", ibp::DType::u64, VectorElement::uint64, 8},
    {"i64", ibp::DType::i64, VectorElement::int64, 8},
    {"f64", ibp::DType::f64, VectorElement::float64, 8},
    {"bool", ibp::DType::boolean, VectorElement::boolean, 1},
};

const DtypeName* by_element(VectorElement element) {
  for (const DtypeName& d : kDtypeNames) {
    if (d.element == element) return &d;
  }
  return nullptr;
}
const DtypeName* by_dtype(ibp::DType dtype) {
  for (const DtypeName& d : kDtypeNames) {
    if (d.dtype == dtype) return &d;
  }
  return nullptr;
}

Status file_error(const fs::path& path, ErrorCode code, const std::string& what) {
  return Status(code, path.string() + ": " + what);
}

Status write_file(const fs::path& path, std::span<const std::byte> bytes) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    return file_error(path, ErrorCode::invalid_argument, "is a directory, not a file to write");
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (out) out.close();
  if (!out) {
    // A partial regular file is removed; never anything else the path names (a device, a pipe).
    if (fs::is_regular_file(path, error)) fs::remove(path, error);
    return file_error(path, ErrorCode::failed_precondition, "cannot be written");
  }
  return ok_status();
}

bool is_npy(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".npy";
}

// Where the codec runs: auto and cpu run the host codec (the data is on the host, and the CPU
// backend's ops are that code); vulkan and cuda open that device and run the ibp_encode /
// ibp_decode ops there, the data crossing the bus (compressed on the way out or in).
bool on_device(const Options& options) {
  const std::string backend = options.text("--backend");
  return backend == "vulkan" || backend == "cuda";
}

Result<Device> open_device(const Options& options) {
  const std::string backend = options.text("--backend");
  const auto index = static_cast<int>(options.number("--device"));
  Result<Device> device = Device::open(backend, index, device_options());
  if (!device.ok()) {
    return device.status().with_context("opening " + backend + " device " + std::to_string(index));
  }
  return device;
}

// The stream of `data` encoded by the device's ibp_encode. group_rows 0: every candidate of the
// host encoder's automatic choice encoded on the device, the smallest kept (equal sizes: the
// larger group), which is the host's choice and bytes.
Result<std::vector<std::byte>> device_encode(const Options& options,
                                             std::span<const std::byte> data,
                                             const ibp::EncodeParams& params) {
  FERRY_ASSIGN_OR_RETURN(Device device, open_device(options));
  FERRY_ASSIGN_OR_RETURN(StagingPool upload_pool, device.create_staging_pool({}));
  FERRY_ASSIGN_OR_RETURN(StagingPool readback_pool,
                         device.create_staging_pool({.kind = MemoryKind::host_readback}));
  FERRY_ASSIGN_OR_RETURN(Buffer tensor, device.create_buffer(data.size()));
  FERRY_ASSIGN_OR_RETURN(TimelinePoint uploaded, upload(device.queue(QueueKind::upload),
                                                        upload_pool, data, tensor, 0));
  const std::uint64_t rows = (params.elements + params.row_elements - 1) / params.row_elements;
  std::vector<std::uint32_t> candidates;
  if (params.group_rows != 0) {
    candidates.push_back(params.group_rows);
  } else {
    candidates.push_back(static_cast<std::uint32_t>(std::min<std::uint64_t>(rows, UINT32_MAX)));
    for (std::uint32_t g : {65536u, 8192u, 1024u, 128u}) {
      if (g < rows) candidates.push_back(g);
    }
  }
  std::vector<std::byte> best;
  for (std::uint32_t group_rows : candidates) {
    ibp::EncodeParams fixed = params;
    fixed.group_rows = group_rows;
    FERRY_ASSIGN_OR_RETURN(const std::uint64_t largest, ibp::max_stream_bytes(fixed));
    FERRY_ASSIGN_OR_RETURN(Buffer stream_buffer,
                           device.create_buffer(ibp::device_stream_bytes(largest)));
    SubmitSync after_upload;
    after_upload.wait.push_back(uploaded);
    FERRY_ASSIGN_OR_RETURN(std::vector<std::byte> stream,
                           ibp::download_encoded(device.queue(QueueKind::compute),
                                                 device.queue(QueueKind::download), readback_pool,
                                                 tensor, 0, fixed, stream_buffer, after_upload));
    if (best.empty() || stream.size() < best.size()) best = std::move(stream);
  }
  return best;
}

// The tensor of a validated `stream`, decoded by the device's ibp_decode after a compressed
// upload.
Status device_decode(const Options& options, std::span<const std::byte> stream,
                     std::span<std::byte> out) {
  FERRY_ASSIGN_OR_RETURN(Device device, open_device(options));
  FERRY_ASSIGN_OR_RETURN(StagingPool upload_pool, device.create_staging_pool({}));
  FERRY_ASSIGN_OR_RETURN(StagingPool readback_pool,
                         device.create_staging_pool({.kind = MemoryKind::host_readback}));
  FERRY_ASSIGN_OR_RETURN(Buffer stream_buffer,
                         device.create_buffer(ibp::device_stream_bytes(stream.size())));
  FERRY_ASSIGN_OR_RETURN(Buffer tensor, device.create_buffer(std::max<std::size_t>(out.size(), 1)));
  ibp::CompressedTransferOptions transfer;
  transfer.validated = true;  // run_decode validated it
  FERRY_ASSIGN_OR_RETURN(TimelinePoint decoded,
                         ibp::upload_decoded(device.queue(QueueKind::upload),
                                             device.queue(QueueKind::compute), upload_pool, stream,
                                             stream_buffer, tensor, 0, {}, transfer));
  SubmitSync after_decode;
  after_decode.wait.push_back(decoded);
  return download(device.queue(QueueKind::download), readback_pool, tensor, 0, out, after_decode);
}

Result<std::vector<std::byte>> run_encode(const Options& options, std::span<const std::byte> data,
                                          const ibp::EncodeParams& params) {
  if (on_device(options)) return device_encode(options, data, params);
  return ibp::encode(data, params);
}

// `stream` was validated (validate_for_decode) before `out` was allocated.
Status run_decode(const Options& options, std::span<const std::byte> stream,
                  std::span<std::byte> out) {
  const auto threads = static_cast<unsigned>(options.number("--threads"));
  if (!on_device(options)) return ibp::decode(stream, out, true, threads);
  return device_decode(options, stream, out);
}

int encode_main(const Options& options, const std::string&) {
  const fs::path input = options.operands()[0];
  if (!options.given("--out")) return usage_error("ibp encode: needs --out PATH (or -o PATH)");
  const fs::path output = options.text("--out");
  ibp::EncodeParams params;
  vector_files::FileBytes raw;
  vector_files::VectorMatrix matrix;
  std::span<const std::byte> data;
  std::uint64_t rows = 0, cols = 0;
  if (is_npy(input)) {
    if (options.given("--dtype") || options.given("--shape")) {
      return usage_error("ibp encode: --dtype and --shape are for raw input; an .npy file has its own");
    }
    auto read = vector_files::read_npy_array(input);
    if (!read.ok()) return library_error(read.status());
    matrix = std::move(*read);
    const DtypeName* d = by_element(matrix.element());
    params.element_size = d->size;
    params.dtype = d->dtype;
    params.ndim = matrix.ndim();
    rows = matrix.rows();
    cols = matrix.dims();
    data = matrix.bytes();
  } else {
    if (!options.given("--dtype") || !options.given("--shape")) {
      return usage_error("ibp encode: raw input needs --dtype and --shape (or give an .npy file)");
    }
    const DtypeName* d = nullptr;
    for (const DtypeName& n : kDtypeNames) {
      if (n.name == options.text("--dtype")) d = &n;
    }
    const auto shape = options.dims("--shape");
    if (shape.size() > 2) return usage_error("ibp encode: --shape is N or ROWSxCOLS");
    params.element_size = d->size;
    params.dtype = d->dtype;
    params.ndim = static_cast<std::uint8_t>(shape.size());
    rows = shape.size() == 2 ? shape[0] : 1;
    cols = shape.back();
    std::uint64_t shape_bytes = 0;
    if (__builtin_mul_overflow(rows, cols, &shape_bytes) ||
        __builtin_mul_overflow(shape_bytes, std::uint64_t{d->size}, &shape_bytes)) {
      return usage_error("ibp encode: --shape " + options.text("--shape") + " of " +
                         std::string(d->name) + " is more than 2^64 bytes");
    }
    auto read = vector_files::read_file_bytes(input);
    if (!read.ok()) return library_error(read.status());
    raw = std::move(*read);
    if (raw.bytes.size() != shape_bytes) {
      return library_error(file_error(input, ErrorCode::invalid_argument,
                                      std::to_string(raw.bytes.size()) + " bytes, not the " +
                                          std::to_string(shape_bytes) + " of --shape " +
                                          options.text("--shape") + " of " + std::string(d->name)));
    }
    data = raw.bytes;
  }
  const std::uint64_t elements = rows * cols;
  if (elements == 0) return library_error(file_error(input, ErrorCode::invalid_argument, "no elements"));
  if (params.ndim == 1) {
    params.row_elements = options.given("--row-elements") ? options.number("--row-elements")
                                                          : std::min<std::uint64_t>(elements, 4096);
  } else {
    if (options.given("--row-elements")) return usage_error("ibp encode: --row-elements is for 1-D arrays");
    params.row_elements = cols;
  }
  params.elements = elements;
  params.group_rows = static_cast<std::uint32_t>(options.number("--group-rows"));
  params.threads = static_cast<unsigned>(options.number("--threads"));
  auto stream = run_encode(options, data, params);
  if (!stream.ok()) return library_error(stream.status(), "ibp encode " + input.string());
  if (Status s = write_file(output, *stream); !s.ok()) return library_error(s);
  std::printf("%s: %llu bytes -> %s: %llu bytes (ratio %.3f)\n", input.string().c_str(),
              static_cast<unsigned long long>(data.size()), output.string().c_str(),
              static_cast<unsigned long long>(stream->size()),
              double(data.size()) / double(stream->size()));
  return kExitOk;
}

int decode_main(const Options& options, const std::string&) {
  const fs::path input = options.operands()[0];
  if (!options.given("--out")) return usage_error("ibp decode: needs --out PATH (or -o PATH)");
  const fs::path output = options.text("--out");
  auto file = vector_files::read_file_bytes(input);
  if (!file.ok()) return library_error(file.status());
  const std::span<const std::byte> stream = file->bytes;
  // The whole stream is checked before the tensor it describes is allocated (a 64-byte file can
  // claim any size), and the tensor against this machine's memory.
  const auto layout =
      ibp::validate_for_decode(stream, static_cast<unsigned>(options.number("--threads")));
  if (!layout.ok()) return library_error(layout.status(), input.string());
  // Uninitialized: the decoder writes every byte.
  const std::unique_ptr<std::byte[]> memory(
      new (std::nothrow) std::byte[std::max<std::uint64_t>(layout->raw_bytes(), 1)]);
  if (!memory) {
    return library_error(file_error(input, ErrorCode::out_of_memory,
                                    "cannot allocate the " + std::to_string(layout->raw_bytes()) +
                                        " bytes of its tensor"));
  }
  const std::span<std::byte> tensor(memory.get(), layout->raw_bytes());
  if (Status s = run_decode(options, stream, tensor); !s.ok()) {
    return library_error(s, input.string());
  }
  Status written;
  if (is_npy(output)) {
    const DtypeName* d = by_dtype(layout->dtype);
    if (d == nullptr || d->size != layout->element_size) {
      // Unspecified: the unsigned integers of its element size.
      const ibp::DType plain[] = {ibp::DType::u8, ibp::DType::u16, ibp::DType::u32, ibp::DType::u64};
      d = by_dtype(plain[std::countr_zero(unsigned{layout->element_size})]);
    }
    vector_files::VectorView view;
    view.element = d->element;
    view.bytes = tensor;
    const bool matrix = layout->ndim == 2 && layout->elements == layout->rows * layout->row_elements;
    view.ndim = matrix ? 2 : 1;
    view.rows = matrix ? layout->rows : 1;
    view.dims = matrix ? layout->row_elements : layout->elements;
    written = vector_files::write_vectors(output, vector_files::VectorFormat::npy, view);
  } else {
    written = write_file(output, tensor);
  }
  if (!written.ok()) return library_error(written);
  return kExitOk;
}

int inspect_main(const Options& options, const std::string&) {
  const fs::path input = options.operands()[0];
  auto file = vector_files::read_file_bytes(input);
  if (!file.ok()) return library_error(file.status());
  auto stats = ibp::inspect(file->bytes);
  if (!stats.ok()) return library_error(stats.status(), input.string());
  const ibp::Layout& l = stats->layout;
  const DtypeName* d = by_dtype(l.dtype);
  std::printf("%s: IBP format %u, %llu bytes\n", input.string().c_str(), unsigned{ibp::kFormatVersion},
              static_cast<unsigned long long>(l.stream_bytes));
  std::printf("  tensor: %llu elements of %u bytes (%s, %u-D), %llu rows of %llu\n",
              static_cast<unsigned long long>(l.elements), unsigned{l.element_size},
              d != nullptr ? std::string(d->name).c_str() : "unspecified", unsigned{l.ndim},
              static_cast<unsigned long long>(l.rows), static_cast<unsigned long long>(l.row_elements));
  std::printf("  ratio: %.4f (raw %llu bytes; rows %llu, masks %llu, tables and checksums %llu)\n",
              stats->ratio(), static_cast<unsigned long long>(l.raw_bytes()),
              static_cast<unsigned long long>(l.data_bytes),
              static_cast<unsigned long long>(l.row_table_offset - l.masks_offset),
              static_cast<unsigned long long>(l.stream_bytes - l.data_bytes - (l.row_table_offset - l.masks_offset)));
  std::uint64_t modes[3] = {0, 0, 0};
  for (const auto& g : stats->groups) {
    for (int m = 0; m < 3; ++m) modes[m] += g.rows_by_mode[m];
  }
  std::printf("  groups: %llu of %u rows; rows by mode: %llu bitmap, %llu all matched, %llu raw\n",
              static_cast<unsigned long long>(l.group_count), l.group_rows,
              static_cast<unsigned long long>(modes[0]), static_cast<unsigned long long>(modes[1]),
              static_cast<unsigned long long>(modes[2]));
  const std::uint64_t shown = std::min<std::uint64_t>(stats->groups.size(), options.number("--groups"));
  if (shown > 0) std::printf("  group  first_row  rows  ratio  invariant_bits/column  bitmap/matched/raw\n");
  const unsigned bits = 8u * l.element_size;
  for (std::uint64_t g = 0; g < shown; ++g) {
    const auto& s = stats->groups[g];
    std::printf("  %5llu  %9llu  %4llu  %5.3f  %6.2f of %-2u  %llu/%llu/%llu\n",
                static_cast<unsigned long long>(g), static_cast<unsigned long long>(s.first_row),
                static_cast<unsigned long long>(s.rows),
                s.data_bytes == 0 ? 0.0 : double(s.raw_bytes) / double(s.data_bytes),
                double(s.invariant_bits) / double(l.row_elements), bits,
                static_cast<unsigned long long>(s.rows_by_mode[0]),
                static_cast<unsigned long long>(s.rows_by_mode[1]),
                static_cast<unsigned long long>(s.rows_by_mode[2]));
  }
  if (shown < stats->groups.size()) {
    std::printf("  ... %llu more groups (--groups N)\n",
                static_cast<unsigned long long>(stats->groups.size() - shown));
  }
  return kExitOk;
}

}  // namespace

const Command kIbpEncodeCommand = {
    .name = "ibp encode",
    .summary = "a tensor (.npy of any dtype, 1-D or 2-D; raw with --dtype and --shape) to an IBP "
               "stream (lossless Invariant Bit Packing, docs/IBP_FORMAT.md)",
    .about = "Encodes a tensor file into an IBP stream: ferry ibp encode in.npy -o out.ibp",
    .options = kEncodeOptions,
    .bench = false,
    .operand = "INPUT",
    .run = encode_main,
};
const Command kIbpDecodeCommand = {
    .name = "ibp decode",
    .summary = "an IBP stream back to its tensor: .npy (same dtype, shape and bytes) or raw bytes "
               "(-o ending in .bin or any other extension)",
    .about = "Decodes an IBP stream, validated first: ferry ibp decode in.ibp -o out.npy",
    .options = kDecodeOptions,
    .bench = false,
    .operand = "STREAM",
    .run = decode_main,
};
const Command kIbpInspectCommand = {
    .name = "ibp inspect",
    .summary = "an IBP stream's validation, ratio, modes and per-group statistics",
    .about = "Validates an IBP stream and prints what it holds: ferry ibp inspect in.ibp",
    .options = kInspectOptions,
    .bench = false,
    .operand = "STREAM",
    .run = inspect_main,
};

}  // namespace ferry::cli
