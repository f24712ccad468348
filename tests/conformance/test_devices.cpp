// Device listing, opening, device info, close() and mixing objects of two devices.
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <string>

#include "device_io.hpp"
#include "harness.hpp"
#include "pipeline_data.hpp"
#include "test_data.hpp"
#include "ferry/egress.hpp"
#include "ferry/ingress.hpp"
#include "ferry/ops/normalize.hpp"

using ferry::Backend;
using ferry::Buffer;
using ferry::CommandList;
using ferry::Device;
using ferry::ErrorCode;
using ferry::MemoryKind;
using ferry::QueueKind;
using ferry_test::BackendUnderTest;

TEST_CASE("list_backends has the CPU reference, available, with one device") {
  const std::vector<ferry::BackendInfo> backends = ferry::list_backends();
  const auto cpu = std::find_if(backends.begin(), backends.end(),
                                [](const auto& b) { return b.backend == Backend::cpu; });
  REQUIRE(cpu != backends.end());
  CHECK(cpu->available);
  CHECK(cpu->reason.empty());
  REQUIRE(cpu->devices.size() == 1);
  CHECK(cpu->devices[0].backend == Backend::cpu);
  CHECK(cpu->devices[0].index == 0);
  CHECK(cpu->devices[0].is_cpu);
  CHECK_FALSE(cpu->devices[0].name.empty());

  for (const ferry::BackendInfo& backend : backends) {
    INFO("backend ", ferry::to_string(backend.backend));
    // Each backend is listed once; unavailable ones say why.
    CHECK(std::count_if(backends.begin(), backends.end(),
                        [&](const auto& b) { return b.backend == backend.backend; }) == 1);
    if (backend.available) {
      CHECK_FALSE(backend.devices.empty());
    } else {
      CHECK_FALSE(backend.reason.empty());
      MESSAGE(ferry::to_string(backend.backend), " unavailable: ", backend.reason);
    }
    for (std::size_t i = 0; i < backend.devices.size(); ++i) {
      CHECK(backend.devices[i].backend == backend.backend);
      CHECK(backend.devices[i].index == static_cast<int>(i));
    }
  }
}

TEST_CASE("open: auto picks an available backend; bad names and indices are errors") {
  const ferry::Result<Device> any = Device::open("auto");
  REQUIRE_OK(any);
  CHECK(any->is_open());
  const auto backends = ferry::list_backends();
  const auto chosen = std::find_if(backends.begin(), backends.end(),
                                   [&](const auto& b) { return b.backend == any->backend(); });
  REQUIRE(chosen != backends.end());
  CHECK(chosen->available);
  // "auto" prefers a GPU: cuda, then vulkan, whose device 0 is not a CPU implementation; else
  // the CPU reference backend (never lavapipe).
  for (const Backend better : {Backend::cuda, Backend::vulkan}) {
    if (better == any->backend()) break;
    const auto it = std::find_if(backends.begin(), backends.end(),
                                 [&](const auto& b) { return b.backend == better; });
    if (it != backends.end() && it->available) {
      CHECK_MESSAGE(it->devices.front().is_cpu,
                    "auto chose " << ferry::to_string(any->backend()) << " over a GPU of "
                                  << ferry::to_string(better));
    }
  }
  if (any->backend() != Backend::cpu) CHECK_FALSE(any->info().is_cpu);

  CHECK_ERROR(Device::open("nope"), ErrorCode::invalid_argument);
  CHECK_ERROR(Device::open(""), ErrorCode::invalid_argument);
  CHECK_ERROR(Device::open("cpu", 7), ErrorCode::out_of_range);
  CHECK_ERROR(Device::open("cpu", -1), ErrorCode::out_of_range);
  for (const ferry::BackendInfo& backend : backends) {
    if (!backend.available) {
      CHECK_ERROR(Device::open(ferry::to_string(backend.backend)), ErrorCode::unavailable);
      continue;
    }
    CHECK_ERROR(
        Device::open(ferry::to_string(backend.backend), static_cast<int>(backend.devices.size())),
        ErrorCode::out_of_range);
  }
}

TEST_CASE("device info: three queues assigned, memory reported") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const ferry::DeviceInfo& info = t.device.info();
    CHECK(info.backend == t.backend);
    CHECK(t.device.backend() == t.backend);
    CHECK(info.index == 0);
    CHECK_FALSE(info.name.empty());
    CHECK(t.device.is_open());
    CHECK(info.device_memory_bytes > 0);
    CHECK(info.host_visible_memory_bytes > 0);
    CHECK_FALSE(info.driver.empty());
    MESSAGE(info.name, " (", info.driver, "), ", info.device_memory_bytes >> 20,
            " MiB device memory");
    REQUIRE(info.queues.size() == static_cast<std::size_t>(ferry::kQueueKindCount));
    for (int k = 0; k < ferry::kQueueKindCount; ++k) {
      const auto kind = static_cast<QueueKind>(k);
      CHECK(info.queues[static_cast<std::size_t>(k)].kind == kind);
      CHECK(t.device.queue(kind).kind() == kind);
      CHECK(static_cast<bool>(t.device.queue(kind)));
      if (!info.queue_families.empty()) {
        const auto family = info.queues[static_cast<std::size_t>(k)].family;
        const auto match = std::find_if(info.queue_families.begin(), info.queue_families.end(),
                                        [&](const auto& f) { return f.index == family; });
        REQUIRE(match != info.queue_families.end());
        CHECK(info.queues[static_cast<std::size_t>(k)].index < match->queue_count);
        if (kind == QueueKind::compute) CHECK(match->compute);
      }
    }
    // Info matches the listing.
    const auto backends = ferry::list_backends();
    for (const auto& backend : backends) {
      if (backend.backend != t.backend) continue;
      REQUIRE_FALSE(backend.devices.empty());
      CHECK(backend.devices[0].name == info.name);
    }
  });
}

namespace {

// An environment variable's value ("" when unset).
std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("device info: the search path says how hamming_topk counts bits there") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    const std::string path = t.device.info().search_path;
    MESSAGE(to_string(t.backend), ": ", path);
    REQUIRE_FALSE(path.empty());
    switch (t.backend) {
      case Backend::cpu:
        // One of the three paths, one this CPU has, and the portable one where the environment
        // caps it there.
        CHECK((path.starts_with("portable:") || path.starts_with("avx2:") ||
               path.starts_with("avx512:")));
#if defined(__x86_64__)
        if (path.starts_with("avx512:")) CHECK(__builtin_cpu_supports("avx512vpopcntdq"));
        if (path.starts_with("avx2:")) CHECK(__builtin_cpu_supports("avx2"));
#endif
        if (environment("FERRY_CPU_ISA") == "portable") CHECK(path.starts_with("portable:"));
        break;
      case Backend::vulkan:
        if (t.device.info().is_cpu) {
          CHECK(has(path, "subgroup popcounts (no cooperative matrices"));  // lavapipe has none
        } else if (environment("FERRY_VULKAN_HAMMING_SCAN") == "portable") {
          CHECK(has(path, "FERRY_VULKAN_HAMMING_SCAN=portable"));
        }
        CHECK((has(path, "cooperative matrices") && has(path, "popcounts")));
        break;
      case Backend::cuda:
        // The tensor-core path needs sm_80 and code built for it (a build of sm_75 PTX alone
        // has none): which one a GPU gets is the build's, so only the hidden case is certain.
        CHECK((path.starts_with("binary tensor cores") || path.starts_with("popcounts (")));
        if (has(environment("FERRY_CUDA_HIDE_FEATURES"), "b1mma")) {
          CHECK(path.starts_with("popcounts ("));
        }
        break;
    }
    // The listing says the same (CUDA decides it at open, by the kernels built).
    if (t.backend == Backend::cuda) return;
    for (const auto& backend : ferry::list_backends()) {
      if (backend.backend == t.backend && !backend.devices.empty()) {
        CHECK(backend.devices[0].search_path == path);
      }
    }
  });
}

namespace {

// A PCI device's NUMA node as sysfs says, read here on its own (-1: unknown).
int sysfs_numa_node(const std::string& bus_id) {
  std::ifstream in("/sys/bus/pci/devices/" + bus_id + "/numa_node");
  int node = -1;
  if (!(in >> node) || node < 0) return -1;
  return node;
}

// "dddd:bb:dd.f" in lower-case hex (domain, bus, device, function 0-7), as sysfs names devices.
bool is_pci_address(const std::string& text) {
  static constexpr char kShape[] = "xxxx:xx:xx.f";
  if (text.size() != sizeof kShape - 1) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (kShape[i]) {
      case 'x':
        if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
        break;
      case 'f':
        if (c < '0' || c > '7') return false;
        break;
      default:
        if (c != kShape[i]) return false;
    }
  }
  return true;
}

// The CPUs the calling thread may run on.
std::set<int> thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::set<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.insert(cpu);
  }
  return cpus;
}

}  // namespace

TEST_CASE("device info: where each device sits on the host (PCI address, NUMA node, peers)") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    for (const ferry::BackendInfo& backend : ferry::list_backends()) {
      if (backend.backend != t.backend) continue;
      const int count = static_cast<int>(backend.devices.size());
      for (const ferry::DeviceInfo& info : backend.devices) {
        INFO(info.name << " (" << info.index << "): PCI '" << info.pci_bus_id << "', node "
                       << info.numa_node);
        if (t.backend == Backend::cuda) CHECK_FALSE(info.pci_bus_id.empty());  // CUDA always knows
        if (info.is_cpu) CHECK(info.pci_bus_id.empty());
        if (!info.pci_bus_id.empty()) {
          CHECK(is_pci_address(info.pci_bus_id));
          CHECK(info.numa_node == sysfs_numa_node(info.pci_bus_id));
        } else {
          CHECK(info.numa_node == -1);
        }
        CHECK(std::is_sorted(info.peer_devices.begin(), info.peer_devices.end()));
        for (int peer : info.peer_devices) {
          CHECK(peer >= 0);
          CHECK(peer < count);
          CHECK(peer != info.index);
        }
        if (t.backend != Backend::cuda) CHECK(info.peer_devices.empty());
        if (t.backend == Backend::vulkan) {
          CHECK(info.device_group_size >= 1);
        } else {
          CHECK(info.device_group_size == 0);
        }
        MESSAGE(ferry::to_string(t.backend), ":", info.index, " ", info.name, ": PCI ",
                info.pci_bus_id.empty() ? "-" : info.pci_bus_id, ", NUMA node ", info.numa_node,
                ", ", info.peer_devices.size(), " peer(s), device group of ", info.device_group_size);
      }
      if (!backend.devices.empty()) {
        CHECK(t.device.info().pci_bus_id == backend.devices[0].pci_bus_id);
        CHECK(t.device.info().numa_node == backend.devices[0].numa_node);
        CHECK(t.device.info().peer_devices == backend.devices[0].peer_devices);
      }
    }
    // Two GPU backends on one machine see the same GPUs at the same addresses.
    if (t.backend != Backend::vulkan) return;
    std::set<std::string> cuda_gpus, vulkan_gpus;
    for (const ferry::BackendInfo& backend : ferry::list_backends()) {
      for (const ferry::DeviceInfo& info : backend.devices) {
        if (info.pci_bus_id.empty()) continue;
        if (backend.backend == Backend::cuda) cuda_gpus.insert(info.pci_bus_id);
        if (backend.backend == Backend::vulkan) vulkan_gpus.insert(info.pci_bus_id);
      }
    }
    if (!cuda_gpus.empty() && !vulkan_gpus.empty()) CHECK(cuda_gpus == vulkan_gpus);
  });
}

TEST_CASE("host placement: a device's pipeline threads run on its host CPUs; callers keep theirs") {
  ferry_test::for_each_backend({"normalize"}, [](BackendUnderTest& t) {
    const std::set<int> mine = thread_cpus();
    REQUIRE_FALSE(mine.empty());
    // Where each of the device's own threads ran: the egress consumer's and the ingress source's.
    auto run_pipelines = [&](const Device& device) {
      std::mutex mutex;
      std::set<std::set<int>> seen;
      auto note = [&] {
        std::lock_guard lock(mutex);
        seen.insert(thread_cpus());
      };
      ferry::EgressOptions egress;
      egress.workers = 2;
      egress.pool = REQUIRE_VALUE(device.create_staging_pool(
          ferry_test::small_pool(MemoryKind::host_readback, 64 << 10, 2)));
      ferry::EgressPipeline out = REQUIRE_VALUE(ferry::EgressPipeline::create(
          device, egress, [&](const ferry::EgressChunk&) {
            note();
            return ferry::Status();
          }));
      const Buffer output = REQUIRE_VALUE(device.create_buffer(3000));
      for (int step = 0; step < 3; ++step) CHECK_OK(out.push(output, 0, 3000, {}));
      CHECK_OK(out.close());

      ferry::IngressOptions ingress;
      ferry::NormalizeParams params = ferry_test::awkward_params(t.rng);
      const ferry::NormalizeShape shape = REQUIRE_VALUE(ferry::resolve_normalize(params));
      ingress.transform = REQUIRE_VALUE(ferry::normalize_transform(params));
      const std::vector<std::byte> batch(shape.input_bytes, std::byte{7});
      ferry::IngressPipeline in = REQUIRE_VALUE(ferry::IngressPipeline::create(
          device, ingress, [&](std::uint64_t index) -> ferry::Result<std::optional<ferry::HostBatch>> {
            note();
            if (index >= 2) return std::optional<ferry::HostBatch>();
            return std::optional<ferry::HostBatch>(ferry::HostBatch::pageable(batch));
          }));
      while (true) {
        std::optional<ferry::IngressBatch> next = REQUIRE_VALUE(in.next(ferry_test::kLongWait));
        if (!next) break;
      }
      CHECK(thread_cpus() == mine);  // pools and buffers were made without moving this thread
      return seen;
    };

    // Without placement (one NUMA node, or the device's node unknown) they run where the process may.
    if (t.device.info().numa_node < 0) {
      CHECK(run_pipelines(t.device) == std::set<std::set<int>>{mine});
    }
    // On the CPUs asked for: one the process may use, and one it may not (left out).
    const int chosen = *mine.rbegin();
    ferry::DeviceOptions options = t.options;
    options.host_cpus = {chosen, (1 << 20) - 1};
    Device placed = REQUIRE_VALUE(Device::open(ferry::to_string(t.backend), 0, options));
    t.extra_devices.push_back(placed);
    CHECK(run_pipelines(placed) == std::set<std::set<int>>{{chosen}});
    // Only CPUs it may not use: placement is dropped, nothing fails.
    options.host_cpus = {(1 << 20) - 1};
    Device nowhere = REQUIRE_VALUE(Device::open(ferry::to_string(t.backend), 0, options));
    t.extra_devices.push_back(nowhere);
    CHECK(run_pipelines(nowhere) == std::set<std::set<int>>{mine});
    options.host_cpus = {0, -1};
    CHECK_ERROR(Device::open(ferry::to_string(t.backend), 0, options), ErrorCode::invalid_argument);
  });
}

TEST_CASE("a closed device refuses every use with device_closed; submitted work completes") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    Device device = REQUIRE_VALUE(t.open_another());
    const std::uint64_t size = 4099;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);

    Buffer upload = REQUIRE_VALUE(device.create_buffer(size, MemoryKind::host_upload));
    std::memcpy(REQUIRE_VALUE(upload.host_span()).data(), data.data(), size);
    Buffer target = REQUIRE_VALUE(device.create_buffer(size));
    ferry::Timeline timeline = REQUIRE_VALUE(device.create_timeline());
    ferry::StagingPool pool = REQUIRE_VALUE(device.create_staging_pool(ferry_test::small_pool()));

    // Work in flight at close() completes: close drains the queues first.
    CommandList commands;
    REQUIRE_OK(commands.copy(upload, 0, target, 0, size));
    const ferry::TimelinePoint done =
        REQUIRE_VALUE(device.queue(QueueKind::upload)
                          .submit(std::move(commands), {.wait = {}, .signal = {{timeline, 1}}}));

    const Device other_handle = device;  // copies share the device
    REQUIRE_OK(device.close(ferry_test::kLongWait));
    CHECK(done.timeline.value() >= done.value);
    CHECK(timeline.value() == 1);
    CHECK_FALSE(device.is_open());
    CHECK_FALSE(other_handle.is_open());

    CHECK_ERROR(device.create_buffer(16), ErrorCode::device_closed);
    CHECK_ERROR(other_handle.create_buffer(16), ErrorCode::device_closed);
    CHECK_ERROR(device.create_timeline(), ErrorCode::device_closed);
    CHECK_ERROR(device.create_staging_pool(ferry_test::small_pool()), ErrorCode::device_closed);
    CHECK_ERROR(device.wait_idle(), ErrorCode::device_closed);
    CHECK_ERROR(upload.host_span(), ErrorCode::device_closed);
    CHECK_ERROR(pool.acquire(16), ErrorCode::device_closed);
    CHECK_ERROR(pool.try_acquire(16), ErrorCode::device_closed);
    CHECK_ERROR(timeline.signal(5), ErrorCode::device_closed);
    CHECK_ERROR(timeline.wait(1, std::chrono::milliseconds(10)), ErrorCode::device_closed);
    CHECK_ERROR(device.queue(QueueKind::compute).wait_idle(), ErrorCode::device_closed);

    // Recording with its buffers or submitting to its queues: refused at one point or the other.
    CommandList late;
    const ferry::Status recorded = late.copy(upload, 0, target, 0, size);
    if (!recorded.ok()) {
      CHECK(recorded.code() == ErrorCode::device_closed);
    } else {
      CHECK_ERROR(device.queue(QueueKind::upload).submit(std::move(late)),
                  ErrorCode::device_closed);
    }
    CHECK_ERROR(device.queue(QueueKind::upload).submit(CommandList{}), ErrorCode::device_closed);
    CHECK(device.validation_message_count() == 0);

    // The other device of the same backend is unaffected.
    CHECK(t.device.is_open());
    CHECK_OK(t.device.create_buffer(16));
  });
}

TEST_CASE("objects of two devices cannot be mixed") {
  ferry_test::for_each_backend([](BackendUnderTest& t) {
    Device other = REQUIRE_VALUE(t.open_another());
    const std::uint64_t size = 1000;
    const std::vector<std::byte> data = ferry_test::random_bytes(t.rng, size);
    Buffer mine = REQUIRE_VALUE(ferry_test::device_buffer_with(t.device, data));
    Buffer theirs = REQUIRE_VALUE(other.create_buffer(size));
    ferry::Timeline their_timeline = REQUIRE_VALUE(other.create_timeline());
    ferry::StagingPool their_pool =
        REQUIRE_VALUE(other.create_staging_pool(ferry_test::small_pool()));

    CommandList commands;
    CHECK_ERROR(commands.copy(mine, 0, theirs, 0, size), ErrorCode::invalid_argument);
    CHECK_ERROR(commands.copy(theirs, 0, mine, 0, size), ErrorCode::invalid_argument);
    CHECK(commands.empty());

    // A list recorded for one device goes only to that device's queues.
    CommandList for_other;
    REQUIRE_OK(for_other.copy(theirs, 0, theirs, 500, 100));
    CHECK_ERROR(t.device.queue(QueueKind::compute).submit(std::move(for_other)),
                ErrorCode::invalid_argument);

    // A lease of the other device's pool.
    ferry::Lease their_lease = REQUIRE_VALUE(their_pool.acquire(size));
    CommandList with_lease;
    CHECK_ERROR(with_lease.copy(their_lease, 0, mine, 0, size), ErrorCode::invalid_argument);

    // A timeline of the other device in the sync of a submission.
    ferry::Timeline my_timeline = REQUIRE_VALUE(t.device.create_timeline());
    CommandList good;
    REQUIRE_OK(good.copy(mine, 0, mine, 500, 100));
    CHECK_ERROR(
        t.device.queue(QueueKind::compute)
            .submit(std::move(good), {.wait = {{their_timeline, 0}}, .signal = {{my_timeline, 1}}}),
        ErrorCode::invalid_argument);
    // Rejected before anything was submitted: my timeline is untouched.
    CHECK_ERROR(my_timeline.wait(1, std::chrono::milliseconds(20)), ErrorCode::timeout);
    CHECK(my_timeline.submitted_value() == 0);
    CHECK_OK(my_timeline.failure());

    // The pageable path checks the pool's device too.
    CHECK_ERROR(ferry::upload(t.device.queue(QueueKind::upload), their_pool, data, mine, 0),
                ErrorCode::invalid_argument);

    // Nothing above touched the data.
    const auto back = REQUIRE_VALUE(ferry_test::read_bytes(t.device, mine, 0, size));
    ferry_test::check_bytes_equal(back, data, "buffer after rejected mixed-device calls");
  });
}
