// Where an RDMA device sits in the machine, from hwloc: its NUMA node, the
// CPUs local to it, and the PCI devices and GPUs near it. Used to bind the
// verbs progress thread and by tictac-topo.
//
// Thread safety: a Topology is immutable after load(); its const methods may
// be called from any thread. Loading costs milliseconds to tens of
// milliseconds (sysfs walk): do it at setup, never per message.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "transport/core/cpu_set.h"

namespace tictac::transport::topo {

// A PCI device or OS device near an RDMA device (or anywhere, for gpus()).
struct Neighbour {
  std::string name;      // OS device name (e.g. "eth0", "mlx5_1", "card0"), else the PCI bus id
  std::string kind;      // "gpu", "coproc", "display", "net", "openfabrics", "block", "dma", "pci"
  std::string pciBusId;  // "0000:3b:00.0", empty when not on PCI
  int numaNode = -1;     // -1 when hwloc cannot place it
};

// Placement of one ibverbs device. numaNode < 0 means unknown: hwloc sees no
// PCI device for it (a software device such as rxe or siw, or a machine
// whose sysfs shows no PCI bus); cpus is then empty and note says why.
struct Placement {
  std::string device;
  int numaNode = -1;
  std::vector<int> cpus;  // OS indexes of the PUs local to the device, ascending
  std::string pciBusId;   // empty when unknown
  std::string note;       // why the placement is unknown; empty when known
  bool known() const { return numaNode >= 0 || !cpus.empty(); }
};

struct NumaNode {
  int index = 0;          // OS index
  std::vector<int> cpus;  // OS indexes of its PUs
};

class Topology {
 public:
  // Loads the topology of this machine with I/O devices. Returns nullptr and
  // sets *error when hwloc fails.
  static std::unique_ptr<Topology> load(std::string* error);
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  std::vector<NumaNode> numaNodes() const;  // at least one on Linux
  std::vector<int> allCpus() const;         // every PU the process may use
  int cores() const;
  bool seesPci() const;  // hwloc found at least one PCI device
  Placement place(std::string_view ibvDevice) const;
  // PCI devices and GPUs that share the device's locality (same non-I/O
  // ancestor, e.g. the same NUMA node), the device itself excluded. Empty
  // when the device is unknown to hwloc.
  std::vector<Neighbour> neighbours(std::string_view ibvDevice) const;
  std::vector<Neighbour> gpus() const;  // every GPU / co-processor OS device

 private:
  struct Impl;
  explicit Topology(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One-shot helper for the progress thread: loads a topology and places the
// device. On a hwloc failure the placement is unknown with the error as note.
Placement placeDevice(std::string_view ibvDevice);

// The CPU a progress thread for this placement should be bound to: the last
// PU local to the device, or the last usable PU of the machine when the
// placement is unknown; -1 when allCpus is empty.
int progressCpu(const Placement& p, const std::vector<int>& allCpus);

// "0-3,8,10-11" for {0,1,2,3,8,10,11} (transport/core/cpu_set.h).
using transport::formatCpuList;

}  // namespace tictac::transport::topo
