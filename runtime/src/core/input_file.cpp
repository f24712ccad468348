#include "core/input_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>
#include <utility>

namespace ferry::detail {

namespace {

namespace fs = std::filesystem;

std::string reason(int error) { return std::generic_category().message(error); }

// What a path that is not a regular file is, for the message.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Status file_status(const fs::path& path, ErrorCode code, const std::string& what,
                   std::source_location where) {
  return Status(code, path.string() + ": " + what, where);
}

Result<InputFile> InputFile::open(const fs::path& path) {
  InputFile file;
  file.path_ = path;
  if (path.empty()) return Status(ErrorCode::invalid_argument, "an empty file name");
  // O_NONBLOCK: open() of a FIFO would wait for a writer. Regular files ignore the flag.
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (file.fd_ < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return file_status(path, ErrorCode::not_found, "no such file");
    }
    return file_status(path, ErrorCode::failed_precondition, "cannot open: " + reason(error));
  }
  struct stat info {};
  if (::fstat(file.fd_, &info) != 0) {
    return file_status(path, ErrorCode::failed_precondition, "cannot stat: " + reason(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    return file_status(path, ErrorCode::invalid_argument,
                       std::string("is ") + kind_of(info.st_mode) + ", not a regular file");
  }
  file.size_ = static_cast<std::uint64_t>(info.st_size);
  return file;
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status InputFile::read_at(std::uint64_t offset, std::span<std::byte> out) const {
  while (!out.empty()) {
    const ssize_t got = ::pread(fd_, out.data(), out.size(), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return file_status(path_, ErrorCode::failed_precondition,
                         "cannot read at byte " + std::to_string(offset) + ": " + reason(errno));
    }
    if (got == 0) {
      return corrupt(path_, "ended at byte " + std::to_string(offset) +
                                " while being read (truncated since it was opened?)");
    }
    offset += static_cast<std::uint64_t>(got);
    out = out.subspan(static_cast<std::size_t>(got));
  }
  return Status();
}

Result<std::vector<std::byte>> InputFile::read_all() const {
  FERRY_RETURN_IF_ERROR(check_host_allocation(size_, path_.string() + ": the file"));
  std::vector<std::byte> bytes;
  try {
    bytes.resize(size_);
  } catch (const std::bad_alloc&) {
    return file_status(path_, ErrorCode::out_of_memory,
                       "cannot allocate " + std::to_string(size_) + " bytes to read it");
  }
  FERRY_RETURN_IF_ERROR(read_at(0, bytes));
  return bytes;
}

Result<InputFile::Mapping> InputFile::map() const {
  if (size_ == 0) return Mapping{};
  if (size_ > SIZE_MAX) return file_status(path_, ErrorCode::out_of_memory, "too large to map");
  const auto length = static_cast<std::size_t>(size_);
  void* address = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (address == MAP_FAILED) {
    return file_status(path_, ErrorCode::failed_precondition, "cannot map: " + reason(errno));
  }
  std::shared_ptr<const void> owner(address, [length](const void* p) {
    ::munmap(const_cast<void*>(p), length);
  });
  return Mapping{{static_cast<const std::byte*>(address), length}, std::move(owner)};
}

std::uint64_t host_memory_bytes() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

Status check_host_allocation(std::uint64_t bytes, const std::string& what) {
  std::uint64_t limit = host_memory_bytes();
  const char* source = "this machine has";
  if (const char* setting = std::getenv("FERRY_HOST_MEMORY_LIMIT");
      setting != nullptr && setting[0] != '\0') {
    std::uint64_t value = 0;
    const char* end = setting + std::strlen(setting);
    const auto [stop, error] = std::from_chars(setting, end, value);
    if (error != std::errc() || stop != end) {
      return Status(ErrorCode::invalid_argument,
                    std::string("FERRY_HOST_MEMORY_LIMIT: '") + setting +
                        "' is not a number of bytes");
    }
    if (limit == 0 || value < limit) {
      limit = value;
      source = "FERRY_HOST_MEMORY_LIMIT allows";
    }
  }
  if (limit != 0 && bytes > limit) {
    return Status(ErrorCode::out_of_memory, what + " needs " + std::to_string(bytes) +
                                                " bytes of host memory, more than " + source +
                                                " (" + std::to_string(limit) + " bytes)");
  }
  return Status();
}

}  // namespace ferry::detail
