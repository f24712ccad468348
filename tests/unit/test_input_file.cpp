// core/input_file.hpp: the one rule every reader of outside files follows. Paths of every kind
// (missing, a folder, a FIFO nobody writes to, a device, a regular file), reads past a file that
// shrank after it was opened, and the host-memory check allocations from outside go through.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "common/printers.hpp"
#include "common/temp_dir.hpp"
#include "core/input_file.hpp"

namespace {

namespace fs = std::filesystem;
using ferry::ErrorCode;
using ferry::detail::InputFile;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty()) {
      ::unsetenv(name_);
    } else {
      ::setenv(name_, old_.c_str(), 1);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
};

TEST_CASE("input files: each kind of path gets its own code, naming the path, never blocking") {
  ferry::test::TempDir dir("ferry-input-file");
  const auto refused = [](const fs::path& path, ErrorCode code, const std::string& what) {
    CAPTURE(path);
    // A FIFO opened for a blocking read would wait here for a writer that never comes.
    auto opened = std::async(std::launch::async, [&] { return InputFile::open(path); });
    REQUIRE(opened.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    const auto file = opened.get();
    REQUIRE_FALSE(file.ok());
    CHECK(file.status().code() == code);
    CHECK(file.status().message().rfind(path.string() + ": ", 0) == 0);
    CHECK_MESSAGE(file.status().message().find(what) != std::string::npos, file.status().message());
  };
  refused(dir / "missing.bin", ErrorCode::not_found, "no such file");
  refused(dir / "missing" / "deeper.bin", ErrorCode::not_found, "no such file");
  write_text(dir / "plain", "x");
  refused(dir / "plain" / "child.bin", ErrorCode::not_found, "no such file");  // ENOTDIR
  fs::create_directories(dir / "folder");
  refused(dir / "folder", ErrorCode::invalid_argument, "is a directory, not a regular file");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  refused(dir / "fifo", ErrorCode::invalid_argument, "is a FIFO (named pipe), not a regular file");
  refused("/dev/null", ErrorCode::invalid_argument, "is a character device");
  fs::create_symlink(dir / "folder", dir / "link");
  refused(dir / "link", ErrorCode::invalid_argument, "is a directory");
  if (::geteuid() != 0) {  // root reads anything
    write_text(dir / "secret", "s");
    fs::permissions(dir / "secret", fs::perms::none);
    refused(dir / "secret", ErrorCode::failed_precondition, "cannot open: Permission denied");
  }
  const auto empty_name = InputFile::open("");
  CHECK(empty_name.status().code() == ErrorCode::invalid_argument);
}

TEST_CASE("input files: sizes from the open file, exact reads, a file that shrinks") {
  ferry::test::TempDir dir("ferry-input-file");
  std::string text(70001, '\0');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 7 + 3);
  write_text(dir / "data", text);
  auto file = InputFile::open(dir / "data");
  REQUIRE(file.ok());
  CHECK(file->size() == text.size());
  std::vector<std::byte> middle(1000);
  REQUIRE(file->read_at(50000, middle).ok());
  CHECK(std::memcmp(middle.data(), text.data() + 50000, middle.size()) == 0);
  const auto all = file->read_all();
  REQUIRE(all.ok());
  CHECK(all->size() == text.size());
  CHECK(std::memcmp(all->data(), text.data(), text.size()) == 0);
  const auto mapped = file->map();
  REQUIRE(mapped.ok());
  CHECK(mapped->bytes.size() == text.size());
  CHECK(std::memcmp(mapped->bytes.data(), text.data(), text.size()) == 0);
  // Shrunk after it was opened (by another program): reads past the new end are data_corrupt.
  fs::resize_file(dir / "data", 100);
  std::vector<std::byte> past(10);
  const ferry::Status cut = file->read_at(95, past);
  CHECK(cut.code() == ErrorCode::data_corrupt);
  CHECK(cut.message().find("ended at byte 100") != std::string::npos);
  // An empty file maps to nothing, reads to nothing.
  write_text(dir / "empty", "");
  auto empty = InputFile::open(dir / "empty");
  REQUIRE(empty.ok());
  CHECK(empty->size() == 0);
  CHECK(empty->read_all()->empty());
  CHECK(empty->map()->bytes.empty());
}

TEST_CASE("input files: allocations from outside are checked against the host's memory") {
  const std::uint64_t memory = ferry::detail::host_memory_bytes();
  REQUIRE(memory > (64u << 20));  // any machine that runs these tests
  CHECK(ferry::detail::check_host_allocation(1 << 20, "a small thing").ok());
  const ferry::Status huge = ferry::detail::check_host_allocation(memory + 1, "the tensor");
  CHECK(huge.code() == ErrorCode::out_of_memory);
  CHECK(huge.message().find("the tensor needs " + std::to_string(memory + 1)) != std::string::npos);
  {
    const ScopedEnv limit("FERRY_HOST_MEMORY_LIMIT", "1000");
    CHECK(ferry::detail::check_host_allocation(1000, "x").ok());
    const ferry::Status over = ferry::detail::check_host_allocation(1001, "x");
    CHECK(over.code() == ErrorCode::out_of_memory);
    CHECK(over.message().find("FERRY_HOST_MEMORY_LIMIT allows (1000 bytes)") != std::string::npos);
  }
  {
    const ScopedEnv limit("FERRY_HOST_MEMORY_LIMIT", "12k");
    CHECK(ferry::detail::check_host_allocation(1, "x").code() == ErrorCode::invalid_argument);
  }
  {
    // A limit above the machine's memory changes nothing.
    const std::string above = std::to_string(memory * 2);
    const ScopedEnv limit("FERRY_HOST_MEMORY_LIMIT", above.c_str());
    CHECK(ferry::detail::check_host_allocation(memory + 1, "x").code() == ErrorCode::out_of_memory);
  }
}

}  // namespace
