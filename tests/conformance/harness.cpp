#include "harness.hpp"

#include <algorithm>
#include <condition_variable>
#include <thread>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>

namespace ferry_test {

// Messages a device's sink received; shared with the sink, which may outlive the test.
class MessageLog {
 public:
  void add(ferry::MessageSeverity severity, std::string_view text) {
    // Informational messages are not kept: a soak opening hundreds of devices would pile them up.
    if (severity == ferry::MessageSeverity::info) return;
    const std::lock_guard lock(mutex_);
    ++problems_;
    messages_.emplace_back(severity, std::string(text));
  }
  std::uint64_t problems() const {
    const std::lock_guard lock(mutex_);
    return problems_;
  }
  std::string warnings_and_errors() const {
    const std::lock_guard lock(mutex_);
    std::ostringstream text;
    for (const auto& [severity, message] : messages_) {
      if (severity == ferry::MessageSeverity::info) continue;
      text << (severity == ferry::MessageSeverity::error ? "[error] " : "[warning] ") << message
           << "\n";
    }
    return text.str();
  }

 private:
  mutable std::mutex mutex_;
  std::uint64_t problems_ = 0;
  std::vector<std::pair<ferry::MessageSeverity, std::string>> messages_;
};

namespace {

std::string lowercase_trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A comma-separated list from the environment; nullopt-like empty flag when the variable is unset.
struct NameList {
  bool set = false;
  std::set<std::string> names;
  bool contains(const std::string& name) const { return names.count(name) != 0; }
};

NameList env_list(const char* variable) {
  NameList list;
  const char* value = std::getenv(variable);
  if (value == nullptr) return list;
  list.set = true;
  std::string_view rest(value);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string name = lowercase_trimmed(rest.substr(0, comma));
    if (!name.empty()) list.names.insert(name);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return list;
}

// Probing a backend may be slow (Vulkan creates an instance), and every subcase re-enters the
// test body: probe once per process.
const std::vector<ferry::BackendInfo>& compiled_backends() {
  static const std::vector<ferry::BackendInfo> backends = ferry::list_backends();
  return backends;
}

ferry::DeviceOptions options_for(const std::shared_ptr<MessageLog>& log) {
  ferry::DeviceOptions options;
  options.validation = true;
  options.message_sink = [log](ferry::MessageSeverity severity, std::string_view text) {
    log->add(severity, text);
  };
  return options;
}

// After a backend's run: drain the devices, then fail on any validation message.
void finish(BackendUnderTest& run) {
  std::vector<ferry::Device*> devices{&run.device};
  for (ferry::Device& extra : run.extra_devices) devices.push_back(&extra);
  for (ferry::Device* device : devices) {
    if (!*device || !device->is_open()) continue;
    CHECK_OK(device->wait_idle(kLongWait));
  }
  std::uint64_t counted = 0;
  for (ferry::Device* device : devices) {
    if (*device) counted += device->validation_message_count();
  }
  const std::uint64_t received = run.log->problems();
  CHECK_MESSAGE(counted == 0, "validation messages:\n" << run.log->warnings_and_errors());
  CHECK_MESSAGE(received == 0, "warnings/errors sent to the message sink:\n"
                                   << run.log->warnings_and_errors());
}

// (op, backend) pairs skipped because the device cannot run the op, printed at exit.
class SkippedOps {
 public:
  void add(const std::string& pair, const std::string& reason) {
    const std::lock_guard lock(mutex_);
    auto& entry = skipped_[pair];
    entry.first += 1;
    entry.second = reason;
  }
  ~SkippedOps() {
    if (skipped_.empty()) return;
    std::cerr << "ferry conformance: tests skipped for ops a device cannot run:\n";
    for (const auto& [pair, entry] : skipped_) {
      std::cerr << "  " << pair << ": " << entry.first << " test(s); " << entry.second << "\n";
    }
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::pair<int, std::string>> skipped_;
};

SkippedOps& skipped_ops() {
  static SkippedOps skipped;
  return skipped;
}

void run_backend(const ferry::BackendInfo& info, bool required, std::size_t backend_index,
                 std::initializer_list<std::string_view> ops, const BackendTest& test) {
  const std::string name(ferry::to_string(info.backend));
  if (!info.available) {
    if (required) {
      FAIL_CHECK("backend " << name
                            << " is unavailable but FERRY_REQUIRE names it: " << info.reason);
    } else {
      MESSAGE("skipping backend " << name << ": " << info.reason);
    }
    return;
  }

  BackendUnderTest run;
  run.backend = info.backend;
  run.seed = base_seed() + 0x9E3779B97F4A7C15ull * (backend_index + 1);
  run.rng.seed(run.seed);
  run.log = std::make_shared<MessageLog>();
  run.options = options_for(run.log);
  INFO("backend ", name, ", FERRY_TEST_SEED=", base_seed());

  ferry::Result<ferry::Device> device = ferry::Device::open(name, 0, run.options);
  if (!device.ok()) {
    // The backend said it is available: failing to open it is a failure, required or not.
    FAIL_CHECK("backend " << name << " is available but Device::open failed: "
                          << device.status().to_string());
    return;
  }
  run.device = std::move(device).value();

  for (const std::string_view op : ops) {
    const ferry::Status supported = run.device.supports(op);
    if (supported.ok()) continue;
    if (required) {
      FAIL_CHECK("backend " << name << " cannot run op " << op
                            << " but FERRY_REQUIRE names it: " << supported.to_string());
    } else {
      MESSAGE("skipping on backend " << name << ": it cannot run op " << op << ": "
                                     << supported.message());
      skipped_ops().add(std::string(op) + " on " + name, supported.message());
    }
    finish(run);
    return;
  }

  try {
    test(run);
  } catch (...) {
    finish(run);
    throw;
  }
  finish(run);
}

}  // namespace

std::uint64_t base_seed() {
  static const std::uint64_t seed = [] {
    std::uint64_t value = 0;
    if (const char* text = std::getenv("FERRY_TEST_SEED"); text != nullptr && *text != '\0') {
      value = std::strtoull(text, nullptr, 0);
    } else {
      std::random_device device;
      value = (static_cast<std::uint64_t>(device()) << 32) ^ device();
    }
    std::cerr << "ferry conformance: seed " << value << " (FERRY_TEST_SEED=" << value
              << " repeats this run's inputs)\n";
    return value;
  }();
  return seed;
}

ferry::Result<ferry::Device> BackendUnderTest::open_another() {
  FERRY_ASSIGN_OR_RETURN(ferry::Device other,
                         ferry::Device::open(ferry::to_string(backend), 0, options));
  extra_devices.push_back(other);
  return other;
}

std::vector<ferry::Device> BackendUnderTest::several_devices() {
  std::vector<ferry::Device> devices = {device};
  std::size_t listed = 1;
  for (const ferry::BackendInfo& info : ferry::list_backends()) {
    if (info.backend == backend) listed = info.devices.size();
  }
  for (std::size_t i = 1; i < std::min<std::size_t>(listed, 4); ++i) {
    ferry::Device other = REQUIRE_VALUE(ferry::Device::open(ferry::to_string(backend), static_cast<int>(i), options));
    extra_devices.push_back(other);
    devices.push_back(other);
  }
  if (devices.size() == 1) devices.push_back(REQUIRE_VALUE(open_another()));
  return devices;
}

ferry::Result<ferry::Device> BackendUnderTest::open_cpu_reference() {
  FERRY_ASSIGN_OR_RETURN(ferry::Device reference, ferry::Device::open("cpu", 0, options));
  extra_devices.push_back(reference);
  return reference;
}

struct Watchdog::State {
  std::mutex mutex;
  std::condition_variable done_changed;
  bool done = false;
  std::thread thread;
};

Watchdog::Watchdog(std::string what, std::chrono::seconds limit)
    : state_(std::make_shared<State>()) {
  state_->thread = std::thread([state = state_, what = std::move(what), limit] {
    std::unique_lock lock(state->mutex);
    if (!state->done_changed.wait_for(lock, limit, [&] { return state->done; })) {
      std::cerr << "ferry conformance: watchdog: '" << what << "' still running after "
                << limit.count() << " s: it hangs\n";
      std::_Exit(3);
    }
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(state_->mutex);
    state_->done = true;
  }
  state_->done_changed.notify_all();
  state_->thread.join();
}

ScopedFaultPlan::ScopedFaultPlan(const ferry::FaultPlan& plan) {
  const ferry::Status set = ferry::set_fault_plan(plan);
  REQUIRE_MESSAGE(set.ok(), set.to_string());
}

void for_each_backend(const BackendTest& test) { for_each_backend({}, test); }

void for_each_backend(std::initializer_list<std::string_view> ops, const BackendTest& test) {
  const NameList selected = env_list("FERRY_BACKENDS");
  const NameList required = env_list("FERRY_REQUIRE");
  const auto& backends = compiled_backends();
  for (std::size_t i = 0; i < backends.size(); ++i) {
    const std::string name(ferry::to_string(backends[i].backend));
    const bool is_required = required.contains(name);
    // A required backend runs even when FERRY_BACKENDS leaves it out.
    if (selected.set && !selected.contains(name) && !is_required) continue;
    SUBCASE(name.c_str()) { run_backend(backends[i], is_required, i, ops, test); }
  }
  for (const std::string& name : required.names) {
    const bool compiled_in = std::any_of(backends.begin(), backends.end(), [&](const auto& b) {
      return ferry::to_string(b.backend) == name;
    });
    if (compiled_in) continue;
    SUBCASE(name.c_str()) {
      FAIL_CHECK("FERRY_REQUIRE names backend '" << name << "', which is not compiled in");
    }
  }
}

}  // namespace ferry_test
