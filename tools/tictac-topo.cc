// tictac-topo: where each RDMA (ibverbs) device sits in this machine, from
// hwloc, and where to bind the progress thread and the tensors' memory.
// stdout: TSV records (see --help) or, with --json, one JSON object per line.
// stderr: a table for people and the notes. Exit 0; 1 when hwloc fails or
// libibverbs finds no device (host records are still printed); 2 bad usage.
#include <infiniband/verbs.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "transport/topo/topology.h"

namespace topo = tictac::transport::topo;
using nlohmann::json;

namespace {

constexpr const char* kRecords = R"(Records on stdout (TSV, no header; "-" for none):
  host    CORES  CPUS  PCI_DISCOVERY(yes|no)  RDMA_DEVICES
  numa    NODE   CPUS
  gpu     NAME   NUMA_NODE|unknown  PCI_BUSID
  device  NAME   NUMA_NODE|unknown  LOCAL_CPUS  PCI_BUSID  PROGRESS_CPU  GPUS  PCI_NEIGHBOURS
With --json the same records as JSON objects with a "kind" key. CPU lists are
OS indexes ("0-3,8"). A device is "unknown" when hwloc cannot place it: rxe and
siw have no PCI device. PCI devices come from Linux sysfs (/sys/bus/pci).)";

std::vector<std::string> rdmaDevices() {
  std::vector<std::string> names;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  if (list) ibv_free_device_list(list);
  return names;
}

std::string orDash(const std::string& s) {
  return s.empty() ? "-" : s;
}
json numaJson(int node) {
  return node < 0 ? json("unknown") : json(node);
}
std::string numaText(int node) {
  return node < 0 ? "unknown" : std::to_string(node);
}

// The library binds its progress thread to the local CPUs by itself
// (progress_cpus "auto"); TICTAC_PROGRESS_CPUS=N narrows it to one CPU.
std::string bindHint(const topo::Placement& p, int cpu) {
  const std::string one = "TICTAC_PROGRESS_CPUS=" + std::to_string(cpu);
  if (p.numaNode >= 0) {
    return "progress thread on CPU " + std::to_string(cpu) + " (" + one +
           "), tensor memory on NUMA node " + std::to_string(p.numaNode) +
           ": hwloc-bind --cpubind node:" + std::to_string(p.numaNode) +
           " --membind node:" + std::to_string(p.numaNode) + " -- CMD";
  }
  if (!p.cpus.empty()) {
    return "progress thread on CPU " + std::to_string(cpu) + " (" + one + "; local CPUs " +
           topo::formatCpuList(p.cpus) + ")";
  }
  return "no device locality (the library leaves its progress thread unbound): keep it off the "
         "compute cores, e.g. " +
         one;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tictac-topo: NUMA node, local CPUs, GPUs and PCI neighbours of every RDMA device, "
      "and the recommended bindings (hwloc)."};
  app.footer(kRecords);
  bool asJson = false;
  std::vector<std::string> only;
  app.add_flag("--json", asJson, "JSON lines on stdout instead of TSV (default: TSV)");
  app.add_option("-d,--device", only, "only this ibverbs device (repeatable; default: all)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::string err;
  auto t = topo::Topology::load(&err);
  if (!t) {
    std::cerr << "tictac-topo: cannot read the machine's topology: " << err << "\n";
    return 1;
  }
  std::vector<std::string> devices = rdmaDevices();
  for (const auto& d : only) {
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) {
      std::cerr << "tictac-topo: no ibverbs device named '" << d << "' (see ibv_devices)\n";
      return 2;
    }
  }
  if (!only.empty()) devices = only;
  const std::vector<int> all = t->allCpus();
  const bool pci = t->seesPci();
  auto emit = [&](const json& j, const std::string& tsv) {
    std::cout << (asJson ? j.dump() : tsv) << "\n";
  };

  emit({{"kind", "host"},
        {"cores", t->cores()},
        {"cpus", topo::formatCpuList(all)},
        {"pci_discovery", pci},
        {"rdma_devices", devices.size()}},
       "host\t" + std::to_string(t->cores()) + "\t" + topo::formatCpuList(all) + "\t" +
           (pci ? "yes" : "no") + "\t" + std::to_string(devices.size()));
  std::fprintf(stderr, "host: %d cores, CPUs %s, PCI discovery %s\n", t->cores(),
               topo::formatCpuList(all).c_str(), pci ? "yes" : "no (no PCI bus in sysfs)");
  for (const auto& n : t->numaNodes()) {
    const std::string cpus = topo::formatCpuList(n.cpus);
    emit({{"kind", "numa"}, {"node", n.index}, {"cpus", cpus}},
         "numa\t" + std::to_string(n.index) + "\t" + orDash(cpus));
    std::fprintf(stderr, "  NUMA node %d: CPUs %s\n", n.index, cpus.c_str());
  }
  for (const auto& g : t->gpus()) {
    emit({{"kind", "gpu"},
          {"name", g.name},
          {"numa_node", numaJson(g.numaNode)},
          {"pci_busid", g.pciBusId}},
         "gpu\t" + g.name + "\t" + numaText(g.numaNode) + "\t" + orDash(g.pciBusId));
    std::fprintf(stderr, "  GPU %s (%s) on NUMA node %s\n", g.name.c_str(), g.pciBusId.c_str(),
                 numaText(g.numaNode).c_str());
  }
  if (devices.empty()) {
    std::fprintf(stderr,
                 "no RDMA device: libibverbs finds none. On a kernel with rdma_rxe: "
                 "rdma link add rxe0 type rxe netdev <iface>; without it: tools/softroce-vm run -- "
                 "tictac-topo (see docs/softroce.md)\n");
    return 1;
  }

  std::fprintf(stderr, "%-10s %-8s %-12s %-13s %-9s %s\n", "device", "numa", "local_cpus", "pci",
               "progress", "neighbours");
  for (const auto& d : devices) {
    const topo::Placement p = t->place(d);
    const int cpu = topo::progressCpu(p, all);
    std::vector<std::string> gpuNames, near;
    json nearJson = json::array(), gpuJson = json::array();
    for (const auto& n : t->neighbours(d)) {
      if (n.kind == "gpu" || n.kind == "coproc") {
        gpuNames.push_back(n.name);
        gpuJson.push_back(n.name);
      } else {
        near.push_back(n.name + ":" + n.kind);
      }
      nearJson.push_back({{"name", n.name}, {"kind", n.kind}, {"pci_busid", n.pciBusId}});
    }
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
      return s;
    };
    const std::string cpus = topo::formatCpuList(p.cpus), hint = bindHint(p, cpu);
    json j = {{"kind", "device"},
              {"device", d},
              {"numa_node", numaJson(p.numaNode)},
              {"local_cpus", cpus},
              {"pci_busid", p.pciBusId},
              {"progress_cpu", cpu},
              {"membind_node", p.numaNode < 0 ? json(nullptr) : json(p.numaNode)},
              {"gpus", gpuJson},
              {"pci_neighbours", nearJson},
              {"recommended", hint}};
    if (!p.note.empty()) j["note"] = p.note;
    emit(j, "device\t" + d + "\t" + numaText(p.numaNode) + "\t" + orDash(cpus) + "\t" +
                orDash(p.pciBusId) + "\t" + std::to_string(cpu) + "\t" + orDash(join(gpuNames)) +
                "\t" + orDash(join(near)));
    std::fprintf(stderr, "%-10s %-8s %-12s %-13s %-9d %s\n", d.c_str(),
                 numaText(p.numaNode).c_str(), orDash(cpus).c_str(), orDash(p.pciBusId).c_str(),
                 cpu, orDash(join(near)).c_str());
    if (!p.note.empty()) std::fprintf(stderr, "  %s: %s\n", d.c_str(), p.note.c_str());
    std::fprintf(stderr, "  recommended: %s\n", hint.c_str());
  }
  return 0;
}
