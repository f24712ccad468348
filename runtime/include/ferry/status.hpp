// Errors as values: every fallible call returns a Status or a Result<T>.
// A Status carries a code, a message with the failing call and its arguments, and the source
// location where it was created, so a native error (VkResult, cudaError_t) keeps its call site.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ferry {

enum class ErrorCode : std::uint8_t {
  ok = 0,
  invalid_argument,     // a parameter is wrong whatever the state (zero size, bad enum)
  out_of_range,         // an offset or size is outside the object it addresses
  timeout,              // a wait ran out of time; the awaited work may still complete
  unavailable,          // a backend or device cannot be used here (no driver, no loader)
  out_of_memory,        // host or device allocation failed
  resource_exhausted,   // a bounded resource cannot ever satisfy the request (pool too small)
  released,             // the object was released or moved from
  device_closed,        // the device was closed; its objects can no longer be used
  device_lost,          // the backend reported the device lost
  failed_precondition,  // the call is valid in general but not in the object's current state
  timeline_failed,      // a submission that would have signalled this timeline failed
  backend_error,        // any other native error, with its native code in the message
  data_corrupt,         // stored or received bytes break their format (a checksum, a table)
  not_found,            // a file (or other named thing) that does not exist
  internal,             // a bug in ferry; the last code
};
inline constexpr int kErrorCodeCount = static_cast<int>(ErrorCode::internal) + 1;

std::string_view to_string(ErrorCode code) noexcept;

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(ErrorCode code, std::string message,
         std::source_location where = std::source_location::current());

  bool ok() const noexcept { return code_ == ErrorCode::ok; }
  ErrorCode code() const noexcept { return code_; }
  // On a temporary Status (`result.status().message()` of a temporary Result, say) these return
  // the string by value, so `const std::string& m = f().message();` keeps it alive.
  const std::string& message() const& noexcept { return message_; }
  std::string message() && { return std::move(message_); }
  // "file:line" where the error was created.
  const std::string& where() const& noexcept { return where_; }
  std::string where() && { return std::move(where_); }
  // "code: message (at file:line)", for logs and test failures.
  std::string to_string() const;

  // Prepends context ("upload chunk 3 of 8: ...") while keeping the original code and location.
  Status& with_context(std::string_view context) &;
  Status&& with_context(std::string_view context) && { return std::move(with_context(context)); }
  // On a const Status (`result.status()`), a copy with the context.
  Status with_context(std::string_view context) const& { return Status(*this).with_context(context); }

 private:
  ErrorCode code_ = ErrorCode::ok;
  std::string message_;
  std::string where_;
};

inline Status ok_status() { return Status(); }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) {
      v_ = Status(ErrorCode::internal, "Result constructed from an ok Status without a value");
    }
  }

  bool ok() const noexcept { return std::holds_alternative<T>(v_); }
  // The error; an ok Status when a value is held. A reference into this Result (a copy when the
  // Result is a temporary), so `const std::string& m = r.status().message();` stays valid as
  // long as `r` does.
  const Status& status() const& noexcept {
    if (const Status* error = std::get_if<Status>(&v_)) return *error;
    static const Status kOk;
    return kOk;
  }
  Status status() && { return ok() ? Status() : std::get<Status>(std::move(v_)); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ferry

#define FERRY_STATUS_CONCAT_INNER(a, b) a##b
#define FERRY_STATUS_CONCAT(a, b) FERRY_STATUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define FERRY_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    if (::ferry::Status ferry_status_ = (expr); !ferry_status_.ok()) return ferry_status_; \
  } while (0)

// `lhs = value of expr` or return its Status. lhs may be a declaration: FERRY_ASSIGN_OR_RETURN(auto x, f());
#define FERRY_ASSIGN_OR_RETURN(lhs, expr)                                             \
  auto FERRY_STATUS_CONCAT(ferry_result_, __LINE__) = (expr);                         \
  if (!FERRY_STATUS_CONCAT(ferry_result_, __LINE__).ok())                             \
    return std::move(FERRY_STATUS_CONCAT(ferry_result_, __LINE__)).status();          \
  lhs = std::move(FERRY_STATUS_CONCAT(ferry_result_, __LINE__)).value()
