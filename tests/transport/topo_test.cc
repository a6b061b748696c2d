// hwloc placement of RDMA devices (transport/topo). Built twice: topo_test
// (suite 'unit', the host: no RDMA device) and topo_guest_test (suite 'verbs',
// inside tools/softroce-vm where rxelo and rxed0 exist and cannot be placed),
// with tictac-topo --json run end to end on each.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/sched/tool_test_util.h"
#include "transport/topo/topology.h"

namespace topo = tictac::transport::topo;

namespace {

std::vector<std::string> rdmaDevices() {
  std::vector<std::string> names;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  if (list) ibv_free_device_list(list);
  return names;
}

TEST(TopoFormat, CpuListsCompressRuns) {
  EXPECT_EQ(topo::formatCpuList({}), "");
  EXPECT_EQ(topo::formatCpuList({3}), "3");
  EXPECT_EQ(topo::formatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(topo::formatCpuList({1, 3, 5}), "1,3,5");
}

TEST(TopoFormat, ProgressCpuPrefersDeviceLocalCpus) {
  topo::Placement local;
  local.numaNode = 1;
  local.cpus = {4, 5, 6, 7};
  EXPECT_EQ(topo::progressCpu(local, {0, 1, 2, 3, 4, 5, 6, 7}), 7);
  topo::Placement unknown;
  EXPECT_FALSE(unknown.known());
  EXPECT_EQ(topo::progressCpu(unknown, {0, 1, 2}), 2);
  EXPECT_EQ(topo::progressCpu(unknown, {}), -1);
}

TEST(Topology, LoadsThisMachine) {
  std::string err;
  auto t = topo::Topology::load(&err);
  ASSERT_TRUE(t) << err;
  const auto all = t->allCpus();
  ASSERT_FALSE(all.empty());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  EXPECT_GE(t->cores(), 1);
  const auto nodes = t->numaNodes();
  ASSERT_FALSE(nodes.empty());
  size_t covered = 0;
  for (const auto& n : nodes) {
    EXPECT_GE(n.index, 0);
    for (int c : n.cpus) EXPECT_TRUE(std::binary_search(all.begin(), all.end(), c)) << c;
    covered += n.cpus.size();
  }
  EXPECT_GE(covered, all.size()) << "every usable CPU belongs to a NUMA node";
}

TEST(Topology, UnknownDeviceIsUnplacedWithAReason) {
  std::string err;
  auto t = topo::Topology::load(&err);
  ASSERT_TRUE(t) << err;
  const topo::Placement p = t->place("tictac-no-such-device");
  EXPECT_EQ(p.device, "tictac-no-such-device");
  EXPECT_FALSE(p.known());
  EXPECT_LT(p.numaNode, 0);
  EXPECT_TRUE(p.cpus.empty());
  EXPECT_TRUE(p.pciBusId.empty());
  EXPECT_FALSE(p.note.empty());
  EXPECT_TRUE(t->neighbours("tictac-no-such-device").empty());
  EXPECT_EQ(topo::progressCpu(p, t->allCpus()), t->allCpus().back());
}

TEST(Topology, OneShotHelperMatchesTopology) {
  const topo::Placement p = topo::placeDevice("tictac-no-such-device");
  EXPECT_FALSE(p.known());
  EXPECT_FALSE(p.note.empty());
}

// Every device libibverbs lists gets an answer; software devices are unknown.
TEST(Topology, PlacesEveryRdmaDevice) {
  const auto devices = rdmaDevices();
  const bool guest = std::getenv("TICTAC_GUEST") != nullptr;
  if (devices.empty()) {
    if (guest) {
      FAIL() << "in the guest libibverbs must list rxelo";
    }
    GTEST_SKIP() << "no RDMA device on this machine (the guest run covers this case)";
  }
  std::string err;
  auto t = topo::Topology::load(&err);
  ASSERT_TRUE(t) << err;
  for (const auto& d : devices) {
    const topo::Placement p = t->place(d);
    EXPECT_EQ(p.device, d);
    if (d.rfind("rxe", 0) == 0 || d.rfind("siw", 0) == 0) {
      EXPECT_FALSE(p.known()) << d << " is a software device";
      EXPECT_FALSE(p.note.empty()) << d;
    } else if (p.known()) {
      EXPECT_FALSE(p.cpus.empty()) << d;
      EXPECT_FALSE(p.pciBusId.empty()) << d;
    }
  }
  if (guest) {
    EXPECT_NE(std::find(devices.begin(), devices.end(), "rxelo"), devices.end());
  }
}

// tictac-topo --json end to end: the host record always; with no device,
// exit 1 and a hint on stderr; with devices, one record each whose
// recommendation names the TICTAC_PROGRESS_CPUS value (software devices:
// numa_node "unknown"). The verbs backend's own answer agrees: "auto" leaves
// the progress thread unbound on a device hwloc cannot place.
TEST(TopoTool, JsonRecordsForThisMachine) {
  tictac::sched::testing::ScratchDir dir("topo-tool");
  const auto r = dir.run(std::string(TICTAC_BUILD_ROOT) + "/tools/tictac-topo", "--json");
  const auto devices = rdmaDevices();
  EXPECT_EQ(r.code, devices.empty() ? 1 : 0) << r.err;
  std::istringstream lines(r.out);
  int hosts = 0;
  std::vector<std::string> seen;
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);  // every line is one JSON object
    if (j.at("kind") == "host") {
      ++hosts;
      EXPECT_EQ(j.at("rdma_devices").get<size_t>(), devices.size());
    } else if (j.at("kind") == "device") {
      const std::string d = j.at("device");
      seen.push_back(d);
      const std::string hint = j.at("recommended");
      EXPECT_NE(
          hint.find("TICTAC_PROGRESS_CPUS=" + std::to_string(j.at("progress_cpu").get<int>())),
          std::string::npos)
          << hint;
      if (d.rfind("rxe", 0) == 0) {
        EXPECT_EQ(j.at("numa_node"), "unknown") << d;
      }
    }
  }
  EXPECT_EQ(hosts, 1);
  EXPECT_EQ(seen, devices);
  if (devices.empty()) {
    EXPECT_NE(r.err.find("no RDMA device"), std::string::npos) << r.err;
  }
}

}  // namespace
