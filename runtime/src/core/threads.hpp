// Starting ferry's own threads (pipeline producers and workers, the CPU backend's queues) so that
// a thread the system cannot give becomes an error value, never an exception or an abort.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail {

// A running thread executing `body`, or ErrorCode::resource_exhausted naming `what` when the
// thread cannot be started (std::thread throws std::system_error; the fault plan's thread site
// fails it on purpose).
Result<std::thread> start_thread(std::string_view what, std::function<void()> body);
// The same for a thread that works for one device: it runs on `cpus` (DeviceCore::host_cpus, the
// device's NUMA node; empty: anywhere).
Result<std::thread> start_thread(std::string_view what, std::function<void()> body,
                                 std::vector<int> cpus);

// The message of the exception being handled, for user code (a source, a consumer) that threw
// on one of ferry's threads: the exception becomes an error value with this text.
std::string current_exception_text();

}  // namespace ferry::detail
