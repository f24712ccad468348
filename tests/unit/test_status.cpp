// Status and Result: codes, messages, context, source locations and the propagation macros.
#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <string>

#include "common/printers.hpp"
#include "ferry/status.hpp"

namespace {

using ferry::ErrorCode;
using ferry::Result;
using ferry::Status;

constexpr ErrorCode kAllCodes[] = {
    ErrorCode::ok,
    ErrorCode::invalid_argument,
    ErrorCode::out_of_range,
    ErrorCode::timeout,
    ErrorCode::unavailable,
    ErrorCode::out_of_memory,
    ErrorCode::resource_exhausted,
    ErrorCode::released,
    ErrorCode::device_closed,
    ErrorCode::device_lost,
    ErrorCode::failed_precondition,
    ErrorCode::timeline_failed,
    ErrorCode::backend_error,
    ErrorCode::data_corrupt,
    ErrorCode::not_found,
    ErrorCode::internal,
};

Status fails_with(ErrorCode code) { return Status(code, "inner failure"); }

Status propagates(ErrorCode code, bool* reached_end) {
  FERRY_RETURN_IF_ERROR(fails_with(code));
  *reached_end = true;
  return Status();
}

Result<int> maybe_int(bool good) {
  if (!good) return Status(ErrorCode::out_of_range, "no int");
  return 41;
}

Result<int> plus_one(bool good) {
  FERRY_ASSIGN_OR_RETURN(const int value, maybe_int(good));
  return value + 1;
}

Result<std::unique_ptr<int>> make_unique_int() { return std::make_unique<int>(7); }

Status assigns_move_only(int* out) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<int> pointer, make_unique_int());
  *out = *pointer;
  return Status();
}

}  // namespace

TEST_CASE("a default Status is ok") {
  const Status status;
  CHECK(status.ok());
  CHECK(status.code() == ErrorCode::ok);
  CHECK(status.message().empty());
  CHECK(ferry::ok_status().ok());
}

TEST_CASE("a Status keeps its code, message and creation site") {
  const int line = __LINE__ + 1;
  const Status status(ErrorCode::out_of_range, "offset 12 + size 8 exceeds 16");
  CHECK_FALSE(status.ok());
  CHECK(status.code() == ErrorCode::out_of_range);
  CHECK(status.message() == "offset 12 + size 8 exceeds 16");
  INFO("where() = ", status.where());
  CHECK(status.where().find("test_status.cpp") != std::string::npos);
  CHECK(status.where().find(":" + std::to_string(line)) != std::string::npos);

  const std::string text = status.to_string();
  INFO("to_string() = ", text);
  CHECK(text.find("out_of_range") != std::string::npos);
  CHECK(text.find("offset 12 + size 8 exceeds 16") != std::string::npos);
  CHECK(text.find(status.where()) != std::string::npos);
}

TEST_CASE("with_context prepends and keeps the code and location") {
  Status status(ErrorCode::timeout, "acquire waited 10 ms");
  const std::string where = status.where();
  status.with_context("upload chunk 3 of 8");
  CHECK(status.code() == ErrorCode::timeout);
  CHECK(status.where() == where);
  INFO("message() = ", status.message());
  const auto context_at = status.message().find("upload chunk 3 of 8");
  const auto original_at = status.message().find("acquire waited 10 ms");
  REQUIRE(context_at != std::string::npos);
  REQUIRE(original_at != std::string::npos);
  CHECK(context_at < original_at);

  // Chains: the newest context comes first.
  status.with_context("transfer 2");
  CHECK(status.message().find("transfer 2") < status.message().find("upload chunk 3 of 8"));
}

TEST_CASE("every error code has a distinct, non-empty name") {
  std::set<std::string> names;
  for (const ErrorCode code : kAllCodes) {
    const std::string name(ferry::to_string(code));
    CHECK_FALSE(name.empty());
    names.insert(name);
  }
  CHECK(names.size() == std::size(kAllCodes));
  CHECK(std::size(kAllCodes) == std::size_t(ferry::kErrorCodeCount));
  CHECK(names.count("unknown") == 0);
  CHECK(ferry::to_string(ErrorCode::timeout) == "timeout");
  CHECK(ferry::to_string(ErrorCode::timeline_failed) == "timeline_failed");
}

TEST_CASE("Result holds a value or an error") {
  Result<int> good = 5;
  REQUIRE(good.ok());
  CHECK(good.value() == 5);
  CHECK(*good == 5);
  CHECK(good.status().ok());

  Result<int> bad = Status(ErrorCode::released, "buffer was released");
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::released);
  CHECK(bad.status().message() == "buffer was released");

  Result<std::string> text = std::string("ferry");
  CHECK(text->size() == 5);
  const std::string moved = std::move(text).value();
  CHECK(moved == "ferry");
}

TEST_CASE("a Result built from an ok Status is an internal error, not a fake value") {
  const Result<int> result = Status();
  CHECK_FALSE(result.ok());
  CHECK(result.status().code() == ErrorCode::internal);
}

TEST_CASE("FERRY_RETURN_IF_ERROR returns the first error unchanged") {
  bool reached_end = false;
  const Status status = propagates(ErrorCode::backend_error, &reached_end);
  CHECK_FALSE(reached_end);
  CHECK(status.code() == ErrorCode::backend_error);
  CHECK(status.message() == "inner failure");
  // The location is where the error was created, not where it was passed on.
  CHECK(status.where().find("test_status.cpp") != std::string::npos);
}

TEST_CASE("FERRY_ASSIGN_OR_RETURN assigns values and returns errors") {
  const Result<int> good = plus_one(true);
  REQUIRE(good.ok());
  CHECK(good.value() == 42);

  const Result<int> bad = plus_one(false);
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::out_of_range);

  int out = 0;
  CHECK(assigns_move_only(&out).ok());
  CHECK(out == 7);
}

namespace {

Result<int> failing_result() {
  return Status(ErrorCode::out_of_range, "a message longer than any small-string buffer holds");
}

}  // namespace

TEST_CASE("messages taken from a Result's status stay valid (no dangling references)") {
  // From a Result variable: status() is a reference into it, and so is message().
  const Result<int> result = failing_result();
  const std::string& message = result.status().message();
  const std::string& where = result.status().where();
  CHECK(message == "a message longer than any small-string buffer holds");
  CHECK(where.find("test_status.cpp") != std::string::npos);
  CHECK(&result.status() == &result.status());  // no copy per call
  // From a temporary: the string is returned by value, and a const reference keeps it alive.
  const std::string& from_temporary = failing_result().status().message();
  CHECK(from_temporary == "a message longer than any small-string buffer holds");
  const std::string& status_message =
      Status(ErrorCode::timeout, "another message longer than the small-string buffer").message();
  CHECK(status_message == "another message longer than the small-string buffer");
}

TEST_CASE("with_context on a const Status (a Result's) gives a copy with the context") {
  const Result<int> result = failing_result();
  const Status with = result.status().with_context("reading batch 4");
  CHECK(with.code() == ErrorCode::out_of_range);
  CHECK(with.message().find("reading batch 4: a message") == 0);
  CHECK(result.status().message().find("reading batch 4") == std::string::npos);
}
