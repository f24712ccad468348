// Vector files: matrices of vectors (rows x dims) in the ann-benchmarks / TEXMEX formats and in
// NumPy's .npy, read and written by the ferry program and the samples (not part of libferry).
//
// .fvecs / .bvecs / .ivecs: one record per row, a little-endian int32 dimension d >= 1, then d
// elements: float32, uint8 or int32 (little-endian). Every row has the same d; the row count is
// what the file size gives.
// .npy: NumPy's format, versions 1.0, 2.0 and 3.0 read, 1.0 written (as numpy.save writes it): a
// 2-D C-order array of float32 '<f4', float16 '<f2', uint8 '|u1', int32 '<i4' or uint32 '<u4'.
// read_npy_array() (the `ferry ibp` tool's reader) also reads 1-D arrays and the dtypes int8
// '|i1', uint16 '<u2', int16 '<i2', bfloat16 '<V2' (how numpy saves ml_dtypes.bfloat16: two
// opaque bytes), int64 '<i8', uint64 '<u8', float64 '<f8' and bool '|b1'; write_vectors() writes
// them to .npy too.
//
// Files are opened as every file from outside is (runtime/src/core/input_file.hpp): never
// blocking, regular files only. Errors, the path first in the message: not_found for a path that
// does not exist; invalid_argument for a path that is not a regular file (a directory, a FIFO),
// an extension not listed, and a well-formed file holding what is not read (an npy dtype, order
// or shape that is not one of the above, a structured dtype, a dimension of 0); data_corrupt for
// a file whose content breaks its format (truncated, with the row and byte; a row whose
// dimension differs from the first; a dimension <= 0; a bad npy magic, version or header; bytes
// after the data); failed_precondition for a file the system cannot open, read or write, with
// its reason; out_of_memory when the data does not fit in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string_view>

#include "ferry/status.hpp"

namespace ferry::vector_files {

enum class VectorFormat : std::uint8_t { fvecs, bvecs, ivecs, npy };
// What one element of a row is; float16 is IEEE binary16, kept as its 16 bits.
// The first five are the vector formats' elements; the rest only .npy arrays (read_npy_array).
enum class VectorElement : std::uint8_t {
  float32, float16, uint8, int32, uint32,
  int8, uint16, int16, bfloat16, int64, uint64, float64, boolean,
};

std::string_view to_string(VectorFormat format) noexcept;
std::string_view to_string(VectorElement element) noexcept;
std::uint32_t element_bytes(VectorElement element) noexcept;  // 4, 2, 1, 4, 4, 1, 2, 2, 2, 8, 8, 8, 1

// The format a file name's extension names (.fvecs, .bvecs, .ivecs, .npy, in any case), or
// invalid_argument naming the path.
Result<VectorFormat> format_of(const std::filesystem::path& path);

// Rows x dims elements of one type, row-major, rows tightly packed (row r starts at byte
// r * row_bytes()), in memory the caller keeps alive: what write_vectors() writes.
struct VectorView {
  VectorElement element = VectorElement::float32;
  std::uint64_t rows = 0;
  std::uint64_t dims = 0;
  std::span<const std::byte> bytes;  // rows * dims * element_bytes(element) bytes
  std::uint8_t ndim = 2;             // .npy: 1 writes shape (dims,) (rows must be 1)
};

// A matrix read from a file: the same layout as VectorView, holding its memory. The data of an
// .npy file is the file itself, mapped read-only (no copy; the file must not be truncated while
// the matrix is alive); the rows of .fvecs/.bvecs/.ivecs files are read into one allocation of
// rows * dims elements (the dimensions between them dropped), streamed through a small buffer.
// Copies share the same read-only memory.
class VectorMatrix {
 public:
  VectorMatrix() = default;

  VectorFormat format() const noexcept { return format_; }
  VectorElement element() const noexcept { return element_; }
  std::uint64_t rows() const noexcept { return rows_; }
  std::uint64_t dims() const noexcept { return dims_; }
  // 2, or 1 for a 1-D .npy array (read_npy_array), read as 1 row of dims elements.
  std::uint8_t ndim() const noexcept { return ndim_; }
  std::uint64_t row_bytes() const noexcept { return dims_ * element_bytes(element_); }
  // rows * row_bytes bytes; aligned to the element size.
  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  std::span<const std::byte> row(std::uint64_t index) const noexcept {
    return bytes_.subspan(index * row_bytes(), row_bytes());
  }
  VectorView view() const noexcept { return {element_, rows_, dims_, bytes_, ndim_}; }

 private:
  friend Result<VectorMatrix> read_vectors(const std::filesystem::path& path, VectorFormat format);
  friend Result<VectorMatrix> read_npy_array(const std::filesystem::path& path);

  VectorFormat format_ = VectorFormat::fvecs;
  VectorElement element_ = VectorElement::float32;
  std::uint64_t rows_ = 0;
  std::uint64_t dims_ = 0;
  std::uint8_t ndim_ = 2;
  std::span<const std::byte> bytes_;
  std::shared_ptr<const void> storage_;  // the mapping or the allocation bytes_ points into
};

// Reads the file in the format its extension names, or in `format`. An .npy file may have
// 0 rows; a .fvecs/.bvecs/.ivecs file holds at least one (an empty file has no dimension).
Result<VectorMatrix> read_vectors(const std::filesystem::path& path);
Result<VectorMatrix> read_vectors(const std::filesystem::path& path, VectorFormat format);

// Reads an .npy file of any dtype above, 1-D (as 1 row, ndim() 1) or 2-D, whatever its
// extension.
Result<VectorMatrix> read_npy_array(const std::filesystem::path& path);

// A whole file's bytes as they are (raw tensors, IBP streams): read into memory (a copy, so that
// the file changing meanwhile cannot fault a reader, as a mapping could), the allocation being
// the file's real size, whatever it claims to hold. The bytes live as long as `storage`.
struct FileBytes {
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> storage;
};
Result<FileBytes> read_file_bytes(const std::filesystem::path& path);

// Writes `vectors` in the format the extension names, or in `format`, replacing the file. The
// element must be what the format holds: float32 for .fvecs, uint8 for .bvecs, int32 for .ivecs
// (uint32 data, such as hamming_topk's indices, is written as int32 by viewing it as int32:
// kHammingNoIndex becomes -1), any element for .npy. dims >= 1 (and below 2^31 for the
// .*vecs formats, whose dimension is an int32); rows >= 1 for the .*vecs formats. A write that
// fails part-way removes the partial file.
Status write_vectors(const std::filesystem::path& path, const VectorView& vectors);
Status write_vectors(const std::filesystem::path& path, VectorFormat format,
                     const VectorView& vectors);

}  // namespace ferry::vector_files
