// transport/verbs/device.h: one opened RDMA device (internal).
//
// Device::open picks the device and port, the GID index (see factory.h), and
// creates the protection domain, the completion channel (non-blocking fd) and
// one completion queue shared by every QP of the backend. Owned by the backend
// and used from its (serialized) calls only.
#pragma once

#include <infiniband/verbs.h>

#include <map>
#include <memory>
#include <string>

#include "transport/backend.h"

namespace tictac::transport::verbs {

struct DeviceConfig {
  std::string device;   // empty: first device with an active port
  int gid_index = -1;   // -1: automatic
  std::string address;  // IPv4 whose mapped RoCE v2 GID to prefer
  int cq_entries = 4096;
  ibv_context* context = nullptr;  // open this one (rdma_cm's, not owned) instead
  uint8_t port = 1;                // with `context`: its port
};

// Reads options.device/config and the environment (see factory.h).
Result<DeviceConfig> deviceConfig(const BackendOptions& options);

class Device {
 public:
  static Result<std::unique_ptr<Device>> open(const DeviceConfig& config);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Grows the CQ to hold at least `entries` completions (more peers).
  Status reserveCq(int entries);

  std::string name;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  int cq_size = 0;
  uint8_t port = 1;
  ibv_port_attr port_attr{};
  ibv_device_attr dev_attr{};
  int gid_index = 0;
  ibv_gid gid{};
  bool roce = true;      // Ethernet link layer: GRH always, LID unused
  bool owns_ctx = true;  // false: rdma_cm's context (DeviceConfig::context)
  // No bus device behind it in sysfs (rxe, siw): the "NIC" is kernel code
  // running on the host's CPUs, so the CPU a poller spins on is the wire's.
  bool software = false;

 private:
  Device() = default;
};

// "::ffff:127.0.0.1" style text of a GID (for messages).
std::string gidText(const ibv_gid& gid);

}  // namespace tictac::transport::verbs
