// BinaryIndex's file format (docs/SEARCH.md): a 64-byte header, then the payload (thresholds,
// codes, kept vectors), little-endian, with a CRC-32C of the header and one of the payload. Files
// are written atomically: a temporary file in the same folder, flushed to disk, then renamed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "core/input_file.hpp"
#include "ferry/binary_index.hpp"
#include "ferry/status.hpp"

namespace ferry::index {

inline constexpr char kFileMagic[8] = {'F', 'E', 'R', 'R', 'Y', 'B', 'I', 'X'};
inline constexpr std::uint32_t kFileVersion = 1;
inline constexpr std::uint32_t kHeaderBytes = 64;

struct FileHeader {
  std::uint32_t dims = 0;
  IndexMetric metric = IndexMetric::inner_product;
  ElementType input_type = ElementType::float32;
  IndexThreshold threshold = IndexThreshold::zero;
  KeptVectors keep = KeptVectors::none;
  std::uint64_t rows = 0;
  float int8_scale = 0.0f;
  std::uint32_t thresholds_stored = 0;  // 0 or dims
  std::uint32_t code_bytes = 0;         // per row
  std::uint32_t vector_bytes = 0;       // per row, 0 without kept vectors
  std::uint64_t payload_bytes = 0;
  std::uint32_t payload_crc = 0;
};

// The header's 64 bytes, its CRC included.
void encode_header(const FileHeader& header, std::span<std::byte, kHeaderBytes> out);
// Checks and decodes a header read from a file of `file_bytes` bytes (`bytes` holds its first
// min(file_bytes, 64) bytes). Errors (data_corrupt, as for any file whose content breaks its
// format: core/input_file.hpp) say what is wrong: not an index file, another format version, a
// corrupted header, a truncated or overlong file.
Result<FileHeader> decode_header(std::span<const std::byte> bytes, std::uint64_t file_bytes);
// The payload size the header's fields give, or nothing when it overflows.
std::optional<std::uint64_t> payload_size(const FileHeader& header);

// Writes a file atomically: write() appends to a temporary file next to `path`; finish() writes
// the header at the start, flushes, renames it to `path` and flushes the folder. Destroyed
// unfinished, it removes the temporary file. Errors name the file and the system's reason.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path path) : path_(std::move(path)) {}
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  Status open();  // creates the temporary file, with room for the header
  Status write(std::span<const std::byte> bytes);  // appends to the payload, updating its CRC
  std::uint32_t payload_crc() const { return crc_; }
  Status finish(std::span<const std::byte, kHeaderBytes> header);

 private:
  Status write_all(std::span<const std::byte> bytes, std::uint64_t offset);
  std::filesystem::path path_;
  std::filesystem::path temp_;
  int fd_ = -1;
  std::uint64_t offset_ = 0;
  std::uint32_t crc_ = 0;
};

// Reads a file from its start (opened as every file from outside is: core/input_file.hpp);
// read() updates the CRC of what it read after the header.
class FileReader {
 public:
  explicit FileReader(std::filesystem::path path) : path_(std::move(path)) {}

  Status open();
  std::uint64_t size() const { return file_ ? file_->size() : 0; }
  // Fills `out`; a file ending first is data_corrupt (it was truncated while being read).
  Status read(std::span<std::byte> out, bool payload);
  std::uint32_t payload_crc() const { return crc_; }

 private:
  std::filesystem::path path_;
  std::optional<detail::InputFile> file_;
  std::uint64_t offset_ = 0;
  std::uint32_t crc_ = 0;
};

}  // namespace ferry::index
