#include "transport/verbs/device.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace tictac::transport::verbs {

namespace {

Status sysError(const std::string& what, int err) {
  return {StatusCode::kIoError, what + ": " + std::strerror(err)};
}

bool parseInt(const std::string& text, int* out) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0 || v > 65535) return false;
  *out = static_cast<int>(v);
  return true;
}

bool isV4Mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, 12) == 0;
}

// The GID type of entry i: ibv_query_gid_ex, else sysfs gid_attrs/types/<i>.
// Returns false for an empty or unreadable entry.
bool gidEntry(Device& d, int i, ibv_gid* gid, bool* v2) {
  ibv_gid_entry e{};
  if (ibv_query_gid_ex(d.ctx, d.port, static_cast<uint32_t>(i), &e, 0) == 0) {
    std::memcpy(gid, &e.gid, sizeof(*gid));
    *v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
    return true;
  }
  if (ibv_query_gid(d.ctx, d.port, i, gid) != 0) return false;
  static const ibv_gid zero{};
  if (std::memcmp(gid, &zero, sizeof(zero)) == 0) return false;
  std::ifstream f("/sys/class/infiniband/" + d.name + "/ports/" + std::to_string(d.port) +
                  "/gid_attrs/types/" + std::to_string(i));
  std::string type;
  std::getline(f, type);
  *v2 = type.find("v2") != std::string::npos;
  return true;
}

// Picks the GID index: explicit, else the IPv4-mapped RoCE v2 GID (of
// `address` when given), else any RoCE v2 GID, else index 0 (InfiniBand).
Status chooseGid(Device& d, const DeviceConfig& c) {
  if (c.gid_index >= 0) {
    bool v2 = false;
    if (c.gid_index >= d.port_attr.gid_tbl_len || !gidEntry(d, c.gid_index, &d.gid, &v2)) {
      return {StatusCode::kInvalidArgument, "GID index " + std::to_string(c.gid_index) +
                                                " is empty or out of range on " + d.name};
    }
    d.gid_index = c.gid_index;
    return Status::ok();
  }
  in_addr want{};
  if (!c.address.empty() && inet_pton(AF_INET, c.address.c_str(), &want) != 1) {
    return {StatusCode::kInvalidArgument,
            "verbs address '" + c.address + "' is not an IPv4 address"};
  }
  int mapped = -1, anyv2 = -1, any = -1;
  for (int i = 0; i < d.port_attr.gid_tbl_len; ++i) {
    ibv_gid g{};
    bool v2 = false;
    if (!gidEntry(d, i, &g, &v2)) continue;
    if (any < 0) any = i;
    if (!v2) continue;
    if (anyv2 < 0) anyv2 = i;
    if (!isV4Mapped(g)) continue;
    if (!c.address.empty() && std::memcmp(&g.raw[12], &want, 4) == 0) {
      mapped = i;
      break;
    }
    if (mapped < 0 && c.address.empty()) mapped = i;
  }
  if (!c.address.empty() && mapped < 0) {
    return {StatusCode::kNoDevice, d.name + " has no RoCE v2 GID for " + c.address};
  }
  int pick = mapped >= 0 ? mapped : anyv2 >= 0 ? anyv2 : d.roce ? any : 0;
  if (pick < 0) return {StatusCode::kNoDevice, d.name + " port has no usable GID"};
  d.gid_index = pick;
  bool v2 = false;
  if (!gidEntry(d, pick, &d.gid, &v2) && d.roce) {
    return {StatusCode::kNoDevice, d.name + ": cannot read GID " + std::to_string(pick)};
  }
  return Status::ok();
}

}  // namespace

std::string gidText(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, buf, sizeof(buf));
  return buf;
}

Result<DeviceConfig> deviceConfig(const BackendOptions& options) {
  DeviceConfig c;
  c.device = options.device;
  if (c.device.empty()) {
    if (const char* e = std::getenv("TICTAC_VERBS_DEVICE"); e != nullptr) c.device = e;
  }
  std::string gid;
  if (auto it = options.config.find("gid_index"); it != options.config.end()) {
    gid = it->second;
  } else if (const char* e = std::getenv("TICTAC_VERBS_GID_INDEX"); e != nullptr && *e) {
    gid = e;
  }
  if (!gid.empty() && !parseInt(gid, &c.gid_index)) {
    return Status(StatusCode::kInvalidArgument, "verbs gid_index '" + gid + "' is not an index");
  }
  if (auto it = options.config.find("address"); it != options.config.end()) c.address = it->second;
  return c;
}

Result<std::unique_ptr<Device>> Device::open(const DeviceConfig& c) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    return Status(StatusCode::kNoDevice,
                  "no RDMA device: libibverbs lists none (load rdma_rxe and `rdma link add`, "
                  "or run inside tools/softroce-vm)");
  }
  // The named device, else the first one with an active port 1 and a GID
  // that fits the configuration (see chooseGid).
  std::unique_ptr<Device> d;
  std::string seen;
  Status last(StatusCode::kNoDevice, "");
  for (int i = 0; i < n && !d; ++i) {
    std::string name = ibv_get_device_name(list[i]);
    seen += (seen.empty() ? "" : ", ") + name;
    if (!c.device.empty() && name != c.device) continue;
    if (c.context != nullptr && name != ibv_get_device_name(c.context->device)) continue;
    std::unique_ptr<Device> cand(new Device());
    cand->owns_ctx = c.context == nullptr;
    cand->ctx = c.context != nullptr ? c.context : ibv_open_device(list[i]);
    cand->port = c.port;
    cand->name = name;
    if (cand->ctx == nullptr) {
      last = sysError("ibv_open_device(" + name + ")", errno);
      continue;
    }
    if (ibv_query_port(cand->ctx, cand->port, &cand->port_attr) != 0) {
      last = sysError("ibv_query_port(" + name + ")", errno);
      continue;
    }
    if (cand->port_attr.state != IBV_PORT_ACTIVE) {
      last = Status(StatusCode::kNoDevice, name + " port 1 is not active");
      continue;
    }
    cand->roce = cand->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    cand->software = ::access((std::string(list[i]->ibdev_path) + "/device").c_str(), F_OK) != 0;
    if (ibv_query_device(cand->ctx, &cand->dev_attr) != 0) {
      last = sysError("ibv_query_device(" + name + ")", errno);
      continue;
    }
    last = chooseGid(*cand, c);
    if (last) d = std::move(cand);
  }
  ibv_free_device_list(list);
  if (!d) {
    if (c.device.empty() || !last.message().empty()) {
      std::string why = last.message().empty() ? "no usable RDMA device" : last.message();
      return Status(last.code(), why + " (devices: " + seen + ")");
    }
    return Status(StatusCode::kNoDevice,
                  "RDMA device '" + c.device + "' not found (devices: " + seen + ")");
  }
  d->pd = ibv_alloc_pd(d->ctx);
  if (d->pd == nullptr) return sysError("ibv_alloc_pd", errno);
  d->channel = ibv_create_comp_channel(d->ctx);
  if (d->channel == nullptr) return sysError("ibv_create_comp_channel", errno);
  int fl = fcntl(d->channel->fd, F_GETFL);
  if (fl < 0 || fcntl(d->channel->fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return sysError("fcntl", errno);
  d->cq_size = std::min(c.cq_entries, d->dev_attr.max_cqe);
  d->cq = ibv_create_cq(d->ctx, d->cq_size, nullptr, d->channel, 0);
  if (d->cq == nullptr) return sysError("ibv_create_cq", errno);
  d->cq_size = d->cq->cqe;
  return d;
}

Status Device::reserveCq(int entries) {
  if (entries <= cq_size) return Status::ok();
  int want = std::min(std::max(entries, cq_size * 2), dev_attr.max_cqe);
  if (want < entries) {
    return {StatusCode::kNoResource,
            name + ": completion queue cannot hold " + std::to_string(entries) + " entries"};
  }
  if (int rc = ibv_resize_cq(cq, want); rc != 0) return sysError("ibv_resize_cq", rc);
  cq_size = cq->cqe;
  return Status::ok();
}

Device::~Device() {
  if (cq != nullptr) ibv_destroy_cq(cq);
  if (channel != nullptr) ibv_destroy_comp_channel(channel);
  if (pd != nullptr) ibv_dealloc_pd(pd);
  if (ctx != nullptr && owns_ctx) ibv_close_device(ctx);
}

}  // namespace tictac::transport::verbs
