// Files from outside (index files; through tools/, the ferry program's IBP streams, raw tensors
// and vector files): one rule for every reader, so that no file can hang, abort or exhaust the
// process (docs/RELIABILITY.md, "Files and bytes from outside").
//
// - open() never blocks: the path is opened with O_NONBLOCK (opening a FIFO for reading would
//   otherwise wait for a writer forever), then anything but a regular file is refused.
// - Sizes come from the open file (fstat), never from a header: a reader checks what a header
//   claims against size() before it allocates or reads.
// - Allocations a file's content asks for go through check_host_allocation() first.
//
// One error code per fault, whichever reader meets it: a path that does not exist is
// not_found; a path that is not a regular file (a directory, a FIFO, a device, a socket) is
// invalid_argument naming what it is; the system refusing (permissions, an I/O error) is
// failed_precondition with its reason; content that breaks the file's format is data_corrupt
// (the readers' job, with corrupt()); a size past the host's memory is out_of_memory.
// Every message starts with the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail {

// A regular file opened for reading, closed on destruction. Move-only.
class InputFile {
 public:
  static Result<InputFile> open(const std::filesystem::path& path);

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  const std::filesystem::path& path() const noexcept { return path_; }
  std::uint64_t size() const noexcept { return size_; }  // when opened
  int fd() const noexcept { return fd_; }

  // Reads exactly out.size() bytes at `offset`. The file ending first (it shrank after open) is
  // data_corrupt; a read the system refuses is failed_precondition.
  Status read_at(std::uint64_t offset, std::span<std::byte> out) const;
  // The whole file, in one allocation checked by check_host_allocation().
  Result<std::vector<std::byte>> read_all() const;
  // The whole file mapped read-only (no copy); an empty span for an empty file. The mapping
  // lives as long as the returned owner.
  struct Mapping {
    std::span<const std::byte> bytes;
    std::shared_ptr<const void> owner;
  };
  Result<Mapping> map() const;

 private:
  InputFile() = default;
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// "PATH: what", with `code`: the form of every error about a file.
Status file_status(const std::filesystem::path& path, ErrorCode code, const std::string& what,
                   std::source_location where = std::source_location::current());
// A file's content breaks its format: data_corrupt, naming the path.
inline Status corrupt(const std::filesystem::path& path, const std::string& what,
                      std::source_location where = std::source_location::current()) {
  return file_status(path, ErrorCode::data_corrupt, what, where);
}

// Ok when `bytes` could be held in this host's memory: at most its physical memory, or the
// bytes FERRY_HOST_MEMORY_LIMIT names (for tests: a claim past it is refused without a machine
// that small); out_of_memory naming `what` and both sizes otherwise, invalid_argument for a
// malformed FERRY_HOST_MEMORY_LIMIT. For allocations whose size comes from outside (a file's
// header, a stream's claim), checked before anything is allocated.
Status check_host_allocation(std::uint64_t bytes, const std::string& what);
// The host's physical memory in bytes (0 when unknown: then nothing is refused).
std::uint64_t host_memory_bytes() noexcept;

}  // namespace ferry::detail
