// verbs_floor: the floor of tictac's verbs latency and bandwidth. An RC SEND
// ping-pong on raw libibverbs, with the QP configuration the verbs backend
// uses (one CQ for sends and receives, a completion channel, 256 send / 512
// receive work requests of 8 KiB receive buffers, inline sends), none of the
// library's per-message work. Against ib_send_lat in the same boot it shows
// what the configuration costs; against tictac-perf --test lat, what the
// library's user space costs. --calls / --pages / --work add a known amount
// of user space to every turn (indirect calls, hot pages touched, ALU work),
// which calibrates what each costs on the machine (in the soft-RoCE guest:
// qemu). --bw measures RDMA WRITE bandwidth on the same QP instead
// (verbs_floor_bw.cc): plain, as ib_write_bw, or WITH IMMEDIATE into a
// receiver that takes every completion, as the backend's rendezvous.
//
//   verbs_floor [options]            server (waits for one client)
//   verbs_floor [options] HOST       client; prints the half round trip (--bw: Gb/s)
//
// The layout is the backend's as it runs on rxe; on other devices the backend
// may pick another GID type, path MTU or inline size than this fixed one.
//
// Exit 0 on a complete run, 1 on any failure (named on stderr), 2 on usage.
#include "bench/verbs_floor.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kMaxIters = 10000000;

struct Opts {
  size_t size = 72;  // tictac's 8-byte message: 8 B EagerHdr + 56 B core header + 8
  int iters = 2000, port = 18517, sq = 256, rq = 512, recv_bytes = 8192, inline_max = 220;
  int depth = 128;  // --bw: ib_write_bw's default tx depth
  bool shared_cq = true, channel = true, json = false, bw = false, imm = false, spin = false;
  std::string device, host;
  Load load;
};

const char kUsage[] =
    "usage: verbs_floor [-d DEV] [-p PORT] [-s BYTES] [-n ITERS] [--separate-cq] [--no-channel]\n"
    "                   [--calls K] [--pages K] [--work K] [--bw [--imm] [--depth K] [--spin]]\n"
    "                   [--json] [HOST]\n"
    "An RC SEND ping-pong on raw libibverbs with tictac's verbs QP configuration\n"
    "(or, with --bw, RDMA WRITE bandwidth on the same QP).\n"
    "Without HOST: the server (start it first, same options). With HOST: the client.\n"
    "  -d DEV          ibverbs device (default: the first)\n"
    "  -p PORT         TCP port of the QP exchange (default 18517)\n"
    "  -s BYTES        message size, 0..8192 (default 72: tictac's 8-byte message with\n"
    "                  its headers); with --bw 1..64 MiB (default 65536, ib_write_bw's)\n"
    "  -n ITERS        round trips (--bw: WRITEs), 1..10000000 (default 2000); both sides\n"
    "                  must agree\n"
    "  --separate-cq   a send CQ and a receive CQ (perftest's layout) instead of one\n"
    "  --no-channel    no completion channel on the CQ\n"
    "  --calls K       K indirect calls per turn (before each post), a call's cost\n"
    "  --pages K       read K distinct pages (the same ones, at offset 0, each turn), <= 4096\n"
    "  --work K        K rounds of a dependent multiply-add per turn\n"
    "  --bw            bandwidth instead: the client RDMA WRITEs -n messages of -s bytes\n"
    "                  to the server's buffer and prints Gb/s (as ib_write_bw)\n"
    "  --imm           with --bw: WRITE WITH IMMEDIATE; the server takes every receive\n"
    "                  completion, sleeping on the completion channel in between (as the\n"
    "                  verbs backend's receiver does)\n"
    "  --depth K       with --bw: WRITEs outstanding, 1..256 (default 128, ib_write_bw's)\n"
    "  --spin          with --bw --imm: the server polls instead of sleeping (needed\n"
    "                  with --no-channel)\n"
    "  --json          the client prints one JSON object instead of the table\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "verbs_floor: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

Opts parse(int argc, char** argv) {
  Opts o;
  auto value = [&](int& i) {
    if (i + 1 >= argc) usage(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  auto parseNum = [](const char* flag, const char* text, long lo, long hi) {
    char* end = nullptr;
    long v = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v < lo || v > hi) {
      usage("bad value '" + std::string(text) + "' for " + flag + " (" + std::to_string(lo) + ".." +
            std::to_string(hi) + ")");
    }
    return static_cast<int>(v);
  };
  auto num = [&](int& i, long lo, long hi) {
    const char* flag = argv[i];
    return parseNum(flag, value(i), lo, hi);
  };
  const char* size_text = nullptr;  // parsed once the mode is known
  bool depth_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "-d") {
      o.device = value(i);
    } else if (a == "-p") {
      o.port = num(i, 1, 65535);
    } else if (a == "-s") {
      size_text = value(i);
    } else if (a == "-n") {
      o.iters = num(i, 1, kMaxIters);
    } else if (a == "--separate-cq") {
      o.shared_cq = false;
    } else if (a == "--no-channel") {
      o.channel = false;
    } else if (a == "--calls") {
      o.load.calls = num(i, 0, 1 << 20);
    } else if (a == "--pages") {
      o.load.pages = num(i, 0, Load::kMaxPages);
    } else if (a == "--work") {
      o.load.work = num(i, 0, 1 << 24);
    } else if (a == "--bw") {
      o.bw = true;
    } else if (a == "--imm") {
      o.imm = true;
    } else if (a == "--spin") {
      o.spin = true;
    } else if (a == "--depth") {
      o.depth = num(i, 1, 256);
      depth_given = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (!a.empty() && a[0] != '-' && o.host.empty()) {
      o.host = a;
    } else {
      usage("unknown argument '" + a + "'");
    }
  }
  if (!o.bw && (o.imm || o.spin || depth_given)) usage("--imm, --spin and --depth need --bw");
  if (o.spin && !o.imm) usage("--spin needs --imm (without it the server takes no completion)");
  if (o.imm && !o.spin && !o.channel)
    usage("--imm without --spin sleeps on the channel: no --no-channel");
  if (o.bw && (o.load.calls || o.load.pages || o.load.work)) {
    usage("--calls, --pages and --work load the ping-pong's turns, not --bw");
  }
  if (o.bw) o.size = 65536;
  if (size_text != nullptr) {
    o.size = static_cast<size_t>(o.bw ? parseNum("-s", size_text, 1, 64 << 20)
                                      : parseNum("-s", size_text, 0, o.recv_bytes));
  }
  return o;
}

struct Wire {
  uint32_t qpn;
  uint32_t iters;  // both sides must run the same test
  uint64_t size;
  uint8_t gid[16];
  uint64_t addr;  // --bw: the server's bulk buffer
  uint32_t rkey;
  uint32_t mode;  // 1: --bw, 2: --imm, 4: --spin
};

// --bw: the client writes and reports; the server sinks the immediates (or
// only waits for the client's end of the run).
int runBw(const Opts& o, Verbs& v, ibv_mr* bulk, BwTarget t, int fd) {
  const bool client = !o.host.empty();
  double secs = 0;
  if (client) {
    secs = runWrites(v, bulk, t, o.size, o.iters, std::min(o.depth, o.sq), o.imm);
  } else if (o.imm) {
    sinkImms(v, o.iters, !o.spin);
  }
  char go = 1;
  // The server waits out the whole run here: as long as it takes at 1 MB/s,
  // and a minute (a dead client closes the connection at once).
  exchange(fd, &go, &go, 1, 60 + static_cast<double>(o.size) * o.iters / 1e6);
  if (!client) return 0;
  double gbps = static_cast<double>(o.size) * o.iters * 8e-9 / secs;
  if (o.json) {
    std::printf(
        "{\"test\":\"floor_bw\",\"size\":%zu,\"iters\":%d,\"imm\":%s,\"depth\":%d,"
        "\"sink\":\"%s\",\"bw_gbps\":%.6f}\n",
        o.size, o.iters, o.imm ? "true" : "false", o.depth,
        o.imm ? (o.spin ? "spin" : "block") : "none", gbps);
  } else {
    std::printf(" #bytes #iters imm depth BW[Gb/s]\n %-6zu %-6d %-3s %-5d %.4f\n", o.size, o.iters,
                o.imm ? "yes" : "no", o.depth, gbps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Opts o = parse(argc, argv);
  const bool client = !o.host.empty();
  std::vector<double> t(client && !o.bw ? static_cast<size_t>(o.iters) + 1
                                        : 0);  // before the barrier
  o.load.prepare();
  Verbs v = openVerbs(o.device, o.shared_cq, o.channel, o.sq, o.rq, o.inline_max, o.recv_bytes);
  int fd = tcpConnect(o.host, o.port);
  ibv_mr* bulk = o.bw ? registerBulk(v, o.size) : nullptr;
  Wire me{v.qp->qp_num,
          static_cast<uint32_t>(o.iters),
          o.size,
          {},
          0,
          0,
          (o.bw ? 1u : 0u) | (o.imm ? 2u : 0u) | (o.spin ? 4u : 0u)},
      peer{};
  std::memcpy(me.gid, v.gid.raw, sizeof me.gid);
  if (bulk != nullptr) me.addr = reinterpret_cast<uintptr_t>(bulk->addr), me.rkey = bulk->rkey;
  exchange(fd, &me, &peer, sizeof me);
  if (peer.iters != me.iters || peer.size != me.size || peer.mode != me.mode) {
    auto mode = [](uint32_t m) {
      return std::string(m & 1 ? " --bw" : "") + (m & 2 ? " --imm" : "") + (m & 4 ? " --spin" : "");
    };
    fail("the peer runs -n " + std::to_string(peer.iters) + " -s " + std::to_string(peer.size) +
         mode(peer.mode) + ", this side -n " + std::to_string(o.iters) + " -s " +
         std::to_string(o.size) + mode(me.mode));
  }
  connectQp(v, peer.qpn, peer.gid);
  char go = 1;
  exchange(fd, &go, &go, 1);  // both QPs are ready to receive
  if (!client)
    std::fprintf(stderr, "verbs_floor: connected, running %d %s\n", o.iters,
                 o.bw ? "WRITEs" : "round trips");
  if (o.bw) return runBw(o, v, bulk, BwTarget{peer.addr, peer.rkey}, fd);

  auto nowUs = [] {
    auto since = std::chrono::steady_clock::now().time_since_epoch();
    return std::chrono::duration<double, std::micro>(since).count();
  };
  for (int i = 0; i < o.iters; ++i) {
    if (!client) awaitRecv(v);
    if (client) t[i] = nowUs();
    o.load.run(i);
    postSend(v, o.size, i);
    if (client) awaitRecv(v);
    reapSends(v);
  }
  if (client) t[o.iters] = nowUs();
  drainSends(v);              // the last SEND delivered (acked) before the QP goes away
  exchange(fd, &go, &go, 1);  // and the peer's too
  if (!client) return 0;
  std::vector<double> half(o.iters);
  for (int i = 0; i < o.iters; ++i) half[i] = (t[i + 1] - t[i]) / 2;
  std::sort(half.begin(), half.end());
  double p50 = half[half.size() / 2], p99 = half[std::min(half.size() - 1, half.size() * 99 / 100)];
  if (o.json) {
    std::printf(
        "{\"test\":\"floor\",\"size\":%zu,\"iters\":%d,\"shared_cq\":%s,\"channel\":%s,"
        "\"calls\":%d,\"pages\":%d,\"work\":%d,\"lat_us\":{\"p50\":%.3f,\"p99\":%.3f}}\n",
        o.size, o.iters, o.shared_cq ? "true" : "false", o.channel ? "true" : "false", o.load.calls,
        o.load.pages, o.load.work, p50, p99);
  } else {
    std::printf(
        " #bytes #iters calls pages work t_p50[us] t_p99[us]\n %-6zu %-6d %-5d %-5d %-4d %-9.2f "
        "%.2f\n",
        o.size, o.iters, o.load.calls, o.load.pages, o.load.work, p50, p99);
  }
  return 0;
}
