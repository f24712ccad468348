#include "core/threads.hpp"

#include <string>
#include <system_error>

#include "core/faults.hpp"

namespace ferry::detail {

Result<std::thread> start_thread(std::string_view what, std::function<void()> body) {
  FERRY_RETURN_IF_ERROR(injected_fault(FaultSite::thread, "starting " + std::string(what)));
  try {
    return std::thread(std::move(body));
  } catch (const std::system_error& error) {
    return Status(ErrorCode::resource_exhausted,
                  "cannot start " + std::string(what) + ": " + error.what());
  }
}

}  // namespace ferry::detail
