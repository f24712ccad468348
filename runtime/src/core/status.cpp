#include "ferry/status.hpp"

#include <cstdio>
#include <string>

#include "ferry/types.hpp"

namespace ferry {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::out_of_range: return "out_of_range";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::resource_exhausted: return "resource_exhausted";
    case ErrorCode::released: return "released";
    case ErrorCode::device_closed: return "device_closed";
    case ErrorCode::device_lost: return "device_lost";
    case ErrorCode::failed_precondition: return "failed_precondition";
    case ErrorCode::timeline_failed: return "timeline_failed";
    case ErrorCode::backend_error: return "backend_error";
    case ErrorCode::data_corrupt: return "data_corrupt";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::internal: return "internal";
  }
  return "unknown";
}

std::string_view to_string(Backend backend) noexcept {
  switch (backend) {
    case Backend::cpu: return "cpu";
    case Backend::vulkan: return "vulkan";
    case Backend::cuda: return "cuda";
  }
  return "unknown";
}

std::string_view to_string(QueueKind kind) noexcept {
  switch (kind) {
    case QueueKind::compute: return "compute";
    case QueueKind::upload: return "upload";
    case QueueKind::download: return "download";
  }
  return "unknown";
}

std::string_view to_string(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::device: return "device";
    case MemoryKind::host_upload: return "host_upload";
    case MemoryKind::host_readback: return "host_readback";
  }
  return "unknown";
}

Status::Status(ErrorCode code, std::string message, std::source_location where)
    : code_(code), message_(std::move(message)) {
  if (code_ != ErrorCode::ok) {
    std::string file = where.file_name();
    // Keep paths short and stable: from the last top-level project folder on.
    for (const char* root : {"runtime/", "cuda_backend/", "cli/", "tests/", "samples/"}) {
      if (auto pos = file.rfind(root); pos != std::string::npos) {
        file = file.substr(pos);
        break;
      }
    }
    where_ = file + ":" + std::to_string(where.line());
  }
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string out(ferry::to_string(code_));
  out += ": ";
  out += message_;
  if (!where_.empty()) {
    out += " (at ";
    out += where_;
    out += ")";
  }
  return out;
}

Status& Status::with_context(std::string_view context) & {
  if (!ok()) {
    std::string prefixed(context);
    prefixed += ": ";
    prefixed += message_;
    message_ = std::move(prefixed);
  }
  return *this;
}

}  // namespace ferry
