// NUMA placement (core/numa.hpp): cpulist parsing, reading a host's nodes and a PCI device's node
// from a sysfs tree (a fake one here, with the layout Linux uses), the placement decision, and
// moving the calling thread onto CPUs and back (on this machine, checked with sched_getaffinity).
#include <doctest/doctest.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/numa.hpp"

using ferry::NumaPlacement;
using namespace ferry::detail;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A fake /sys: two nodes of 4 CPUs (node 1 with a gap), a GPU on node 1, one with no node (-1),
// one whose numa_node file is missing.
struct FakeSys {
  fs::path root;
  FakeSys() {
    std::random_device random;
    root = fs::temp_directory_path() / ("ferry_fake_sys_" + std::to_string(random()));
    write_file(root / "devices/system/node/node0/cpulist", "0-3\n");
    write_file(root / "devices/system/node/node1/cpulist", "4-5,7,9\n");
    write_file(root / "devices/system/node/online", "0-1\n");      // not a node
    fs::create_directories(root / "devices/system/node/power");    // not a node
    write_file(root / "bus/pci/devices/0000:3b:00.0/numa_node", "1\n");
    write_file(root / "bus/pci/devices/0000:86:00.0/numa_node", "-1\n");
    fs::create_directories(root / "bus/pci/devices/0000:af:00.0");
  }
  ~FakeSys() {
    std::error_code error;
    fs::remove_all(root, error);
  }
};

}  // namespace

TEST_CASE("numa: cpulists parse like the kernel writes them") {
  CHECK(parse_cpu_list("0-3") == std::vector<int>{0, 1, 2, 3});
  CHECK(parse_cpu_list("0-1,8,10-11\n") == std::vector<int>{0, 1, 8, 10, 11});
  CHECK(parse_cpu_list("5") == std::vector<int>{5});
  CHECK(parse_cpu_list("3,1,1-2") == std::vector<int>{1, 2, 3});  // sorted, no duplicates
  CHECK(parse_cpu_list("") == std::vector<int>{});                 // a node without CPUs
  for (const char* bad : {"a", "1-", "-1", "3-1", "1,,2", "1-2-3", "1 ,2", "99999999999", "0-2000000"}) {
    INFO(bad);
    CHECK_FALSE(parse_cpu_list(bad).has_value());
  }
}

TEST_CASE("numa: nodes, their CPUs and PCI devices' nodes from sysfs") {
  const FakeSys sys;
  CHECK(numa_node_count(sys.root) == 2);
  CHECK(numa_node_cpus(0, sys.root) == std::vector<int>{0, 1, 2, 3});
  CHECK(numa_node_cpus(1, sys.root) == std::vector<int>{4, 5, 7, 9});
  CHECK(numa_node_cpus(2, sys.root).empty());
  CHECK(numa_node_cpus(-1, sys.root).empty());
  CHECK(pci_numa_node("0000:3b:00.0", sys.root) == 1);
  CHECK(pci_numa_node("0000:3B:00.0", sys.root) == 1);  // CUDA writes upper case
  CHECK(pci_numa_node("0000:86:00.0", sys.root) == -1);
  CHECK(pci_numa_node("0000:af:00.0", sys.root) == -1);
  CHECK(pci_numa_node("0000:00:00.0", sys.root) == -1);
  CHECK(pci_numa_node("", sys.root) == -1);
  CHECK(pci_numa_node("../../../devices/system/node/node1", sys.root) == -1);
  CHECK(numa_node_count(sys.root / "missing") == 0);
}

TEST_CASE("numa: placement only on a host of several nodes, for a known node, when asked") {
  const FakeSys sys;
  CHECK(placement_cpus(NumaPlacement::automatic, 1, sys.root) == std::vector<int>{4, 5, 7, 9});
  CHECK(placement_cpus(NumaPlacement::automatic, 0, sys.root) == std::vector<int>{0, 1, 2, 3});
  CHECK(placement_cpus(NumaPlacement::off, 1, sys.root).empty());
  CHECK(placement_cpus(NumaPlacement::automatic, -1, sys.root).empty());
  fs::remove_all(sys.root / "devices/system/node/node1");  // one node left: nothing to choose
  CHECK(placement_cpus(NumaPlacement::automatic, 0, sys.root).empty());
}

TEST_CASE("numa: a thread is moved onto CPUs and back, and never onto none") {
  // On its own thread, so that the test runner's thread keeps its CPUs whatever happens.
  std::thread([] {
    const std::vector<int> all = current_thread_cpus();
    REQUIRE_FALSE(all.empty());
    const std::vector<int> one = {all.back()};
    {
      const ScopedCpuPlacement placed(one);
      CHECK(current_thread_cpus() == one);
      {
        const ScopedCpuPlacement nowhere(std::vector<int>{all.back() + 100000});  // not allowed
        CHECK(current_thread_cpus() == one);
      }
      CHECK(current_thread_cpus() == one);
    }
    CHECK(current_thread_cpus() == all);
    {
      const ScopedCpuPlacement nothing({});
      CHECK(current_thread_cpus() == all);
    }
    place_this_thread({all.front(), all.back() + 100000});  // only the allowed one is taken
    CHECK(current_thread_cpus() == std::vector<int>{all.front()});
  }).join();
}
