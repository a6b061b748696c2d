#include "transport/topo/topology.h"

#include <hwloc.h>

#include <cstdio>
#include <cstring>

namespace tictac::transport::topo {

struct Topology::Impl {
  hwloc_topology_t topo = nullptr;
  ~Impl() {
    if (topo) hwloc_topology_destroy(topo);
  }
};

namespace {

// OS indexes of a bitmap, bounded by the machine's cpuset (bitmaps may be infinite).
std::vector<int> indexes(hwloc_topology_t t, hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (!set) return out;
  hwloc_bitmap_t b = hwloc_bitmap_dup(set);
  hwloc_bitmap_and(b, b, hwloc_topology_get_topology_cpuset(t));
  for (int i = hwloc_bitmap_first(b); i >= 0; i = hwloc_bitmap_next(b, i)) out.push_back(i);
  hwloc_bitmap_free(b);
  return out;
}

// The NUMA node of an object's locality; -1 if it has none or spans several.
int numaOf(hwloc_topology_t t, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, obj);
  if (!anc || !anc->nodeset || hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

hwloc_obj_t findOpenFabrics(hwloc_topology_t t, std::string_view name) {
  for (hwloc_obj_t o = hwloc_get_next_osdev(t, nullptr); o; o = hwloc_get_next_osdev(t, o)) {
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && o->name && name == o->name) return o;
  }
  return nullptr;
}

hwloc_obj_t pciParent(hwloc_obj_t o) {
  while (o && o->type != HWLOC_OBJ_PCI_DEVICE) o = o->parent;
  return o;
}

std::string busId(hwloc_obj_t pci) {
  char buf[32];
  const auto& a = pci->attr->pcidev;
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", unsigned(a.domain), unsigned(a.bus),
                unsigned(a.dev), unsigned(a.func));
  return buf;
}

const char* osdevKind(hwloc_obj_osdev_type_t t) {
  switch (t) {
    case HWLOC_OBJ_OSDEV_GPU:
      return "gpu";
    case HWLOC_OBJ_OSDEV_COPROC:
      return "coproc";
    case HWLOC_OBJ_OSDEV_NETWORK:
      return "net";
    case HWLOC_OBJ_OSDEV_OPENFABRICS:
      return "openfabrics";
    case HWLOC_OBJ_OSDEV_BLOCK:
      return "block";
    case HWLOC_OBJ_OSDEV_DMA:
      return "dma";
  }
  return "pci";
}

// A PCI device described by its first OS device, else by its PCI class.
Neighbour describe(hwloc_topology_t t, hwloc_obj_t pci) {
  Neighbour n;
  n.pciBusId = busId(pci);
  n.name = n.pciBusId;
  n.numaNode = numaOf(t, pci);
  const unsigned id = pci->attr->pcidev.class_id, cls = id >> 8;
  n.kind = id == 0x0302  ? "gpu"  // 3D controller; VGA (0x0300) is only a GPU with a driver (osdev)
           : cls == 0x03 ? "display"
           : cls == 0x12 ? "coproc"
           : cls == 0x02 ? "net"
           : cls == 0x01 ? "block"
                         : "pci";
  for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
    if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) {
      n.name = c->name;
      n.kind = osdevKind(c->attr->osdev.type);
      break;
    }
  }
  return n;
}

}  // namespace

Topology::Topology(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Topology::~Topology() = default;

std::unique_ptr<Topology> Topology::load(std::string* error) {
  auto impl = std::make_unique<Impl>();
  if (hwloc_topology_init(&impl->topo) != 0) {
    impl->topo = nullptr;
    if (error) *error = std::string("hwloc_topology_init: ") + std::strerror(errno);
    return nullptr;
  }
  hwloc_topology_set_io_types_filter(impl->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // On Linux the core "linux" component finds PCI devices in sysfs; the
  // libpciaccess-based "pci" plugin adds nothing there and leaks on each load.
  hwloc_topology_set_components(impl->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  if (hwloc_topology_load(impl->topo) != 0) {
    if (error) *error = std::string("hwloc_topology_load: ") + std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<Topology>(new Topology(std::move(impl)));
}

std::vector<NumaNode> Topology::numaNodes() const {
  std::vector<NumaNode> out;
  hwloc_topology_t t = impl_->topo;
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr); o;
       o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o)) {
    out.push_back({static_cast<int>(o->os_index), indexes(t, o->cpuset)});
  }
  return out;
}

std::vector<int> Topology::allCpus() const {
  return indexes(impl_->topo, hwloc_topology_get_allowed_cpuset(impl_->topo));
}

int Topology::cores() const {
  return hwloc_get_nbobjs_by_type(impl_->topo, HWLOC_OBJ_CORE);
}

bool Topology::seesPci() const {
  return hwloc_get_next_pcidev(impl_->topo, nullptr) != nullptr;
}

Placement Topology::place(std::string_view ibvDevice) const {
  Placement p;
  p.device = std::string(ibvDevice);
  hwloc_topology_t t = impl_->topo;
  hwloc_obj_t os = findOpenFabrics(t, ibvDevice);
  if (!os) {
    p.note = seesPci() ? "hwloc sees no PCI device for it (a software device such as rxe or siw)"
                       : "hwloc sees no PCI devices on this machine (no /sys/bus/pci: a container "
                         "or a VM without PCI)";
    return p;
  }
  if (hwloc_obj_t pci = pciParent(os)) p.pciBusId = busId(pci);
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, os);
  p.cpus = indexes(t, anc ? anc->cpuset : nullptr);
  p.numaNode = numaOf(t, os);
  if (p.numaNode < 0) p.note = "local CPUs span several NUMA nodes";
  return p;
}

std::vector<Neighbour> Topology::neighbours(std::string_view ibvDevice) const {
  std::vector<Neighbour> out;
  hwloc_topology_t t = impl_->topo;
  hwloc_obj_t os = findOpenFabrics(t, ibvDevice);
  if (!os) return out;
  hwloc_obj_t self = pciParent(os);
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, os);
  for (hwloc_obj_t d = hwloc_get_next_pcidev(t, nullptr); d; d = hwloc_get_next_pcidev(t, d)) {
    if (d != self && hwloc_get_non_io_ancestor_obj(t, d) == anc) out.push_back(describe(t, d));
  }
  return out;
}

std::vector<Neighbour> Topology::gpus() const {
  std::vector<Neighbour> out;
  hwloc_topology_t t = impl_->topo;
  for (hwloc_obj_t d = hwloc_get_next_pcidev(t, nullptr); d; d = hwloc_get_next_pcidev(t, d)) {
    Neighbour n = describe(t, d);
    if (n.kind == "gpu" || n.kind == "coproc") out.push_back(std::move(n));
  }
  return out;
}

Placement placeDevice(std::string_view ibvDevice) {
  std::string err;
  auto t = Topology::load(&err);
  if (!t) {
    Placement p;
    p.device = std::string(ibvDevice);
    p.note = err;
    return p;
  }
  return t->place(ibvDevice);
}

int progressCpu(const Placement& p, const std::vector<int>& allCpus) {
  if (!p.cpus.empty()) return p.cpus.back();
  return allCpus.empty() ? -1 : allCpus.back();
}

}  // namespace tictac::transport::topo
