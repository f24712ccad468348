#include "index/index_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>

#include "core/checked.hpp"
#include "core/crc32c.hpp"
#include "core/describe.hpp"
#include "ferry/ops/binary_quantize.hpp"

namespace ferry::index {

// The payload holds floats and codes in the host's byte order, which the format fixes as
// little-endian.
static_assert(std::endian::native == std::endian::little,
              "BinaryIndex files are little-endian; a big-endian host needs byte swapping here");

namespace {

// Header layout (byte offsets).
constexpr std::size_t kVersionAt = 8, kHeaderBytesAt = 12, kDimsAt = 16, kMetricAt = 20,
                      kInputTypeAt = 21, kThresholdAt = 22, kKeepAt = 23, kRowsAt = 24,
                      kScaleAt = 32, kThresholdsStoredAt = 36, kCodeBytesAt = 40,
                      kVectorBytesAt = 44, kPayloadBytesAt = 48, kPayloadCrcAt = 56,
                      kHeaderCrcAt = 60;

template <typename T>
void put(std::span<std::byte> out, std::size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof value);
}
template <typename T>
T get(std::span<const std::byte> in, std::size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof value);
  return value;
}

// The file's content breaks the format (decode_header's callers add the file's name).
Status bad(const std::string& what) { return Status(ErrorCode::data_corrupt, what); }

std::string system_error(const char* call) {
  return std::string(call) + ": " + std::strerror(errno);
}

}  // namespace

std::optional<std::uint64_t> payload_size(const FileHeader& header) {
  const std::uint64_t row_bytes = std::uint64_t{header.code_bytes} + header.vector_bytes;
  const std::optional<std::uint64_t> rows = detail::checked_mul(header.rows, row_bytes);
  if (!rows) return std::nullopt;
  return detail::checked_add(*rows, std::uint64_t{header.thresholds_stored} * 4);
}

void encode_header(const FileHeader& header, std::span<std::byte, kHeaderBytes> out) {
  std::memset(out.data(), 0, out.size());
  std::memcpy(out.data(), kFileMagic, sizeof kFileMagic);
  put<std::uint32_t>(out, kVersionAt, kFileVersion);
  put<std::uint32_t>(out, kHeaderBytesAt, kHeaderBytes);
  put<std::uint32_t>(out, kDimsAt, header.dims);
  put<std::uint8_t>(out, kMetricAt, static_cast<std::uint8_t>(header.metric));
  put<std::uint8_t>(out, kInputTypeAt, static_cast<std::uint8_t>(header.input_type));
  put<std::uint8_t>(out, kThresholdAt, static_cast<std::uint8_t>(header.threshold));
  put<std::uint8_t>(out, kKeepAt, static_cast<std::uint8_t>(header.keep));
  put<std::uint64_t>(out, kRowsAt, header.rows);
  put<float>(out, kScaleAt, header.int8_scale);
  put<std::uint32_t>(out, kThresholdsStoredAt, header.thresholds_stored);
  put<std::uint32_t>(out, kCodeBytesAt, header.code_bytes);
  put<std::uint32_t>(out, kVectorBytesAt, header.vector_bytes);
  put<std::uint64_t>(out, kPayloadBytesAt, header.payload_bytes);
  put<std::uint32_t>(out, kPayloadCrcAt, header.payload_crc);
  put<std::uint32_t>(out, kHeaderCrcAt, detail::crc32c(std::span(out.data(), kHeaderCrcAt)));
}

Result<FileHeader> decode_header(std::span<const std::byte> bytes, std::uint64_t file_bytes) {
  if (file_bytes < sizeof kFileMagic || std::memcmp(bytes.data(), kFileMagic, sizeof kFileMagic) != 0) {
    return bad(file_bytes < sizeof kFileMagic
                   ? "not a BinaryIndex file: " + std::to_string(file_bytes) + " bytes, too short for the magic"
                   : "not a BinaryIndex file: it does not start with the magic \"FERRYBIX\"");
  }
  if (file_bytes < kHeaderBytes) {
    return bad("truncated: " + std::to_string(file_bytes) + " bytes, shorter than the " +
               std::to_string(kHeaderBytes) + "-byte header");
  }
  const std::uint32_t version = get<std::uint32_t>(bytes, kVersionAt);
  if (version != kFileVersion) {
    return bad("format version " + std::to_string(version) + ", but this build reads version " +
               std::to_string(kFileVersion));
  }
  const std::uint32_t stored_crc = get<std::uint32_t>(bytes, kHeaderCrcAt);
  const std::uint32_t crc = detail::crc32c(bytes.first(kHeaderCrcAt));
  if (stored_crc != crc) {
    return bad("corrupted header: its CRC-32C is " + std::to_string(crc) + ", the file says " +
               std::to_string(stored_crc));
  }
  // A header whose CRC matches was written by a writer of this version; still, check every field
  // before using it (a file crafted by hand, a bug).
  FileHeader h;
  h.dims = get<std::uint32_t>(bytes, kDimsAt);
  const auto metric = get<std::uint8_t>(bytes, kMetricAt);
  const auto input_type = get<std::uint8_t>(bytes, kInputTypeAt);
  const auto threshold = get<std::uint8_t>(bytes, kThresholdAt);
  const auto keep = get<std::uint8_t>(bytes, kKeepAt);
  h.rows = get<std::uint64_t>(bytes, kRowsAt);
  h.int8_scale = get<float>(bytes, kScaleAt);
  h.thresholds_stored = get<std::uint32_t>(bytes, kThresholdsStoredAt);
  h.code_bytes = get<std::uint32_t>(bytes, kCodeBytesAt);
  h.vector_bytes = get<std::uint32_t>(bytes, kVectorBytesAt);
  h.payload_bytes = get<std::uint64_t>(bytes, kPayloadBytesAt);
  h.payload_crc = get<std::uint32_t>(bytes, kPayloadCrcAt);
  if (get<std::uint32_t>(bytes, kHeaderBytesAt) != kHeaderBytes) {
    return bad("header size " + std::to_string(get<std::uint32_t>(bytes, kHeaderBytesAt)) +
               ", expected " + std::to_string(kHeaderBytes));
  }
  if (h.dims == 0 || h.dims > kBinaryIndexMaxDims) {
    return bad("dims " + std::to_string(h.dims) + " outside 1.." + std::to_string(kBinaryIndexMaxDims));
  }
  if (metric > 2 || input_type > 2 || threshold > 2 || keep > 2) {
    return bad("an unknown metric, input type, threshold kind or kept-vector kind (" +
               std::to_string(metric) + ", " + std::to_string(input_type) + ", " +
               std::to_string(threshold) + ", " + std::to_string(keep) + ")");
  }
  h.metric = static_cast<IndexMetric>(metric);
  h.input_type = static_cast<ElementType>(input_type);
  h.threshold = static_cast<IndexThreshold>(threshold);
  h.keep = static_cast<KeptVectors>(keep);
  const std::uint32_t vector_bytes =
      h.keep == KeptVectors::none ? 0 : h.dims * (h.keep == KeptVectors::float32 ? 4 : 1);
  if (h.code_bytes != binary_code_bytes(h.dims) || h.vector_bytes != vector_bytes) {
    return bad("row sizes " + std::to_string(h.code_bytes) + " and " +
               std::to_string(h.vector_bytes) + " bytes do not match dims " +
               std::to_string(h.dims));
  }
  if (h.thresholds_stored != 0 && h.thresholds_stored != h.dims) {
    return bad(std::to_string(h.thresholds_stored) + " thresholds for " + std::to_string(h.dims) +
               " dims");
  }
  const std::optional<std::uint64_t> payload = payload_size(h);
  if (!payload || *payload != h.payload_bytes) {
    return bad("payload size " + std::to_string(h.payload_bytes) +
               " bytes does not match the rows and row sizes");
  }
  const std::optional<std::uint64_t> expected = detail::checked_add(kHeaderBytes, h.payload_bytes);
  if (!expected || file_bytes < *expected) {
    return bad("truncated: " + std::to_string(file_bytes) + " bytes, but the header describes " +
               (expected ? std::to_string(*expected) : std::string("more than 2^64")));
  }
  if (file_bytes > *expected) {
    return bad(std::to_string(file_bytes - *expected) + " unexpected bytes after the " +
               std::to_string(*expected) + " the header describes");
  }
  return h;
}

// ---- writing ----------------------------------------------------------------------------

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

Status AtomicFileWriter::open() {
  // The codes readers give for the same faults (core/input_file.hpp): a path that is a folder
  // is invalid_argument (found here, before a temporary file is made beside it), a missing
  // folder not_found, any other refusal of the system failed_precondition.
  std::error_code ignored;
  if (std::filesystem::is_directory(path_, ignored)) {
    return Status(ErrorCode::invalid_argument,
                  path_.string() + ": is a directory, not a file to write");
  }
  // A name no other writer uses: this process's id and a counter, created exclusively.
  static std::atomic<std::uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_ = path_;
    temp_ += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ >= 0) break;
    if (errno != EEXIST) {
      const ErrorCode code = errno == ENOENT || errno == ENOTDIR ? ErrorCode::not_found
                                                                 : ErrorCode::failed_precondition;
      return Status(code, "cannot create " + temp_.string() + ": " + system_error("open"));
    }
  }
  if (fd_ < 0) {
    return Status(ErrorCode::failed_precondition, "no free temporary name next to the file");
  }
  const std::byte zeros[kHeaderBytes] = {};
  offset_ = 0;
  FERRY_RETURN_IF_ERROR(write_all(zeros, 0));
  offset_ = kHeaderBytes;
  crc_ = 0;
  return Status();
}

Status AtomicFileWriter::write_all(std::span<const std::byte> bytes, std::uint64_t offset) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status(ErrorCode::failed_precondition,
                    "writing " + temp_.string() + " at byte " + std::to_string(offset) + ": " +
                        (n < 0 ? system_error("pwrite") : std::string("pwrite wrote nothing")));
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return Status();
}

Status AtomicFileWriter::write(std::span<const std::byte> bytes) {
  FERRY_RETURN_IF_ERROR(write_all(bytes, offset_));
  crc_ = detail::crc32c(bytes, crc_);
  offset_ += bytes.size();
  return Status();
}

Status AtomicFileWriter::finish(std::span<const std::byte, kHeaderBytes> header) {
  FERRY_RETURN_IF_ERROR(write_all(header, 0));
  if (::fsync(fd_) != 0) {
    return Status(ErrorCode::failed_precondition,
                  "flushing " + temp_.string() + ": " + system_error("fsync"));
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(temp_.c_str());
    return Status(ErrorCode::failed_precondition,
                  "closing " + temp_.string() + ": " + system_error("close"));
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const std::string reason = system_error("rename");
    ::unlink(temp_.c_str());
    return Status(ErrorCode::failed_precondition,
                  "renaming " + temp_.string() + " to " + path_.string() + ": " + reason);
  }
  // The rename itself reaches the disk once the folder is flushed.
  const std::filesystem::path folder = path_.has_parent_path() ? path_.parent_path() : ".";
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return Status();
}

// ---- reading ----------------------------------------------------------------------------

Status FileReader::open() {
  FERRY_ASSIGN_OR_RETURN(file_, detail::InputFile::open(path_));
  offset_ = 0;
  crc_ = 0;
  return Status();
}

Status FileReader::read(std::span<std::byte> out, bool payload) {
  FERRY_RETURN_IF_ERROR(file_->read_at(offset_, out));
  offset_ += out.size();
  if (payload) crc_ = detail::crc32c(out, crc_);
  return Status();
}

}  // namespace ferry::index
