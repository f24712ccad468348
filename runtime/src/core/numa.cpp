#include "core/numa.hpp"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <memory>
#include <system_error>

namespace ferry::detail {
namespace {

// The first line of a small sysfs file; empty when it cannot be read.
std::string read_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A CPU set sized for `cpus` CPUs (sched_getaffinity refuses a set smaller than the kernel's).
struct CpuSet {
  explicit CpuSet(int cpus)
      : count(cpus), set(CPU_ALLOC(static_cast<std::size_t>(cpus)), &free_set),
        bytes(CPU_ALLOC_SIZE(static_cast<std::size_t>(cpus))) {
    if (set) CPU_ZERO_S(bytes, set.get());
  }
  static void free_set(cpu_set_t* s) { CPU_FREE(s); }
  int count;
  std::unique_ptr<cpu_set_t, void (*)(cpu_set_t*)> set;
  std::size_t bytes;
};

// Sets the calling thread's CPUs; false where the system refused.
bool set_thread_cpus(const std::vector<int>& cpus) {
  const int size = std::max(1024, cpus.empty() ? 0 : *std::max_element(cpus.begin(), cpus.end()) + 1);
  CpuSet mask(size);
  if (!mask.set) return false;
  for (int cpu : cpus) {
    if (cpu >= 0) CPU_SET_S(static_cast<std::size_t>(cpu), mask.bytes, mask.set.get());
  }
  return sched_setaffinity(0, mask.bytes, mask.set.get()) == 0;
}

// Those of `wanted` the calling thread may use now.
std::vector<int> allowed_of(const std::vector<int>& wanted, const std::vector<int>& allowed) {
  std::vector<int> both;
  for (int cpu : wanted) {
    if (std::binary_search(allowed.begin(), allowed.end(), cpu)) both.push_back(cpu);
  }
  return both;
}

}  // namespace

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.empty()) return cpus;
  constexpr int kMaxCpu = 1 << 20;  // bounds a malformed range's size
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    const std::size_t dash = part.find('-');
    const std::optional<int> first = parse_int(part.substr(0, dash));
    const std::optional<int> last = dash == std::string_view::npos ? first : parse_int(part.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first || *last > kMaxCpu) return std::nullopt;
    for (int cpu = *first; cpu <= *last; ++cpu) cpus.push_back(cpu);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

int numa_node_count(const std::filesystem::path& sys_root) {
  int nodes = 0;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(sys_root / "devices/system/node", error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.compare(0, 4, "node") == 0 && parse_int(name.substr(4))) ++nodes;
  }
  return nodes;
}

std::vector<int> numa_node_cpus(int node, const std::filesystem::path& sys_root) {
  if (node < 0) return {};
  const std::optional<std::vector<int>> cpus = parse_cpu_list(read_line(
      sys_root / "devices/system/node" / ("node" + std::to_string(node)) / "cpulist"));
  return cpus.value_or(std::vector<int>{});
}

int pci_numa_node(std::string_view bus_id, const std::filesystem::path& sys_root) {
  if (bus_id.empty() || bus_id.find('/') != std::string_view::npos) return -1;
  std::string lower(bus_id);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::optional<int> node = parse_int(read_line(sys_root / "bus/pci/devices" / lower / "numa_node"));
  return node && *node >= 0 ? *node : -1;
}

std::vector<int> placement_cpus(NumaPlacement placement, int node,
                                const std::filesystem::path& sys_root) {
  if (placement != NumaPlacement::automatic || node < 0 || numa_node_count(sys_root) < 2) return {};
  return numa_node_cpus(node, sys_root);
}

std::vector<int> current_thread_cpus() {
  for (int size = 1024; size <= (1 << 20); size *= 2) {
    CpuSet mask(size);
    if (!mask.set) return {};
    if (sched_getaffinity(0, mask.bytes, mask.set.get()) == 0) {
      std::vector<int> cpus;
      for (int cpu = 0; cpu < size; ++cpu) {
        if (CPU_ISSET_S(static_cast<std::size_t>(cpu), mask.bytes, mask.set.get())) cpus.push_back(cpu);
      }
      return cpus;
    }
    if (errno != EINVAL) return {};
  }
  return {};
}

ScopedCpuPlacement::ScopedCpuPlacement(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  std::vector<int> former = current_thread_cpus();
  const std::vector<int> use = allowed_of(cpus, former);
  if (use.empty() || use == former) return;
  if (set_thread_cpus(use)) former_ = std::move(former);
}

ScopedCpuPlacement::~ScopedCpuPlacement() {
  if (!former_.empty()) (void)set_thread_cpus(former_);
}

void place_this_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  const std::vector<int> use = allowed_of(cpus, current_thread_cpus());
  if (!use.empty()) (void)set_thread_cpus(use);
}

}  // namespace ferry::detail
