#include "core/threads.hpp"

#include <exception>
#include <string>
#include <system_error>

#include "core/faults.hpp"
#include "core/numa.hpp"
#include "core/trace.hpp"

namespace ferry::detail {

Result<std::thread> start_thread(std::string_view what, std::function<void()> body) {
  return start_thread(what, std::move(body), {});
}

Result<std::thread> start_thread(std::string_view what, std::function<void()> body,
                                 std::vector<int> cpus) {
  FERRY_RETURN_IF_ERROR(injected_fault(FaultSite::thread, "starting " + std::string(what)));
  try {
    // Named for traces (its track is named after what it does).
    return std::thread([name = std::string(what), body = std::move(body), cpus = std::move(cpus)] {
      name_this_thread(name);
      place_this_thread(cpus);
      body();
    });
  } catch (const std::system_error& error) {
    return Status(ErrorCode::resource_exhausted,
                  "cannot start " + std::string(what) + ": " + error.what());
  }
}

std::string current_exception_text() {
  try {
    throw;
  } catch (const std::exception& error) {
    return error.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace ferry::detail
