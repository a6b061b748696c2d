// tools/ps/launch.cc: spawns the roles as separate processes and collects
// their stdout (JSON lines) and stderr (UCX's transport choice, messages).
#include "tools/ps/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

namespace tictac::ps {

namespace {

struct NetnsNode {
  std::string ns, ip, dev;
};

std::vector<NetnsNode> netnsNodes() {
  std::vector<NetnsNode> out;
  const char* env = std::getenv("TICTAC_NETNS");
  if (env == nullptr) return out;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    NetnsNode n;
    std::stringstream is(item);
    std::getline(is, n.ns, ':');
    std::getline(is, n.ip, ':');
    std::getline(is, n.dev, ':');
    if (!n.dev.empty()) out.push_back(n);
  }
  return out;
}

std::string fmt(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

std::vector<std::string> roleArgs(const std::string& self, const Config& c) {
  const std::pair<const char*, std::string> flags[] = {
      {"--mode", c.mode},
      {"--workers", std::to_string(c.workers)},
      {"--ps", std::to_string(c.ps)},
      {"--iterations", std::to_string(c.iterations)},
      {"--order", c.order},
      {"--seed", std::to_string(c.seed)},
      {"--backend", c.backend},
      {"--rate-gbps", fmt(c.rate_gbps)},
      {"--compute-scale", fmt(c.compute_scale)},
      {"--bwd-factor", fmt(c.bwd_factor)},
      {"--chunk", std::to_string(c.chunk_bytes)},
      {"--window", std::to_string(c.window_bytes)},
      {"--port", std::to_string(c.port)},
      {"--trace-iteration", std::to_string(c.trace_iteration)}};
  std::vector<std::string> args{self, c.graph};
  for (const auto& [flag, value] : flags) {
    args.push_back(flag);
    args.push_back(value);
  }
  return args;
}

void readLines(int fd, const std::function<void(const std::string&)>& fn) {
  std::string buf;
  char tmp[65536];
  ssize_t got;
  while ((got = read(fd, tmp, sizeof tmp)) > 0 || (got < 0 && errno == EINTR)) {
    if (got < 0) continue;
    buf.append(tmp, static_cast<size_t>(got));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      fn(buf.substr(0, nl));
      buf.erase(0, nl + 1);
    }
  }
  if (!buf.empty()) fn(buf);
  close(fd);
}

// The first of n consecutive ports that 127.0.0.1 can bind now (0: none
// found). A port the kernel picks is tried with the ones above it, so two
// launches at once (or a port some other program holds) do not collide the
// way a fixed default did.
uint16_t freePorts(uint32_t n) {
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::vector<int> fds;
    uint16_t base = 0;
    for (uint32_t i = 0; i < n; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) break;
      fds.push_back(fd);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(i == 0 ? 0 : static_cast<uint16_t>(base + i));
      socklen_t len = sizeof(a);
      if ((i > 0 && base + i > 65535) || bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
          getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        break;
      }
      if (i == 0) base = ntohs(a.sin_port);
    }
    const bool ok = fds.size() == n && base != 0;
    for (int fd : fds) close(fd);
    if (ok) return base;
  }
  return 0;
}

}  // namespace

RunOutput launch(const std::string& self, const Config& config, double timeout_s) {
  RunOutput out;
  auto nodes = netnsNodes();
  const uint32_t total = config.ps + config.workers;
  const bool netns = !nodes.empty();
  if (netns && nodes.size() < total) {
    out.error = "TICTAC_NETNS has " + std::to_string(nodes.size()) + " nodes, need " +
                std::to_string(total);
    return out;
  }
  Config c = config;  // every PS has a namespace of its own: the fixed ports are free there
  if (!netns && !c.port_set) {
    if (uint16_t base = freePorts(c.ps); base != 0) c.port = base;
  }
  std::string peers;
  for (uint32_t i = 0; i < c.ps; ++i) {
    peers += (i ? "," : "") + (netns ? nodes[i].ip : std::string("127.0.0.1")) + ":" +
             std::to_string(c.port + i);
  }
  std::mutex mu;
  std::vector<pid_t> pids;
  std::vector<std::thread> readers;
  for (uint32_t i = 0; i < total; ++i) {
    const bool is_ps = i < c.ps;
    const uint32_t rank = is_ps ? i : i - c.ps;
    std::vector<std::string> args;
    if (netns) {
      args = {"ip",
              "netns",
              "exec",
              nodes[i].ns,
              "env",
              "UCX_TLS=tcp",
              "UCX_NET_DEVICES=" + nodes[i].dev};
    }
    auto ra = roleArgs(self, c);
    args.insert(args.end(), ra.begin(), ra.end());
    args.insert(args.end(), {"--role", is_ps ? "ps" : "worker", "--rank", std::to_string(rank),
                             "--peers", peers});
    if (netns) args.push_back("--shaped");
    int po[2], pe[2];
    if (pipe(po) != 0 || pipe(pe) != 0) {
      out.error = "pipe failed";
      break;
    }
    pid_t pid = fork();
    if (pid == 0) {
      dup2(po[1], 1);
      dup2(pe[1], 2);
      close(po[0]);
      close(po[1]);
      close(pe[0]);
      close(pe[1]);
      setenv("UCX_LOG_LEVEL", "info", 0);  // reports the transports an endpoint uses
      std::vector<char*> av;
      for (auto& a : args) av.push_back(a.data());
      av.push_back(nullptr);
      execvp(av[0], av.data());
      _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    pids.push_back(pid);
    std::string tag = (is_ps ? "ps" : "w") + std::to_string(rank);
    // UCX logs to stdout by default: both streams go through the same filter.
    auto onLine = [&out, &mu, tag](const std::string& l) {
      auto j = nlohmann::json::parse(l, nullptr, false);
      std::lock_guard<std::mutex> g(mu);
      if (!j.is_discarded() && j.is_object()) {
        out.lines.push_back(std::move(j));
        return;
      }
      auto p = l.find("ep_cfg[");
      if (p != std::string::npos) {
        auto a = l.find('(', p), b = l.find(')', p);
        if (a != std::string::npos && b > a)
          out.ucx_transports.push_back(tag + " " + l.substr(a + 1, b - a - 1));
        return;
      }
      if (l.find("UCX  INFO") != std::string::npos || l.find("UCX  DIAG") != std::string::npos)
        return;
      std::cerr << "[" << tag << "] " << l << "\n";
    };
    readers.emplace_back(readLines, po[0], onLine);
    readers.emplace_back(readLines, pe[0], onLine);
  }
  // Wait; the first failure or the deadline ends the others.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  size_t alive = pids.size();
  std::vector<bool> reaped(pids.size(), false);
  while (alive > 0) {
    bool progress = false;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (reaped[i]) continue;
      int st = 0;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        reaped[i] = true;
        --alive;
        progress = true;
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && out.error.empty()) {
          out.error = "role " + std::to_string(i) + " failed (status " + std::to_string(st) + ")";
        }
      }
    }
    if ((!out.error.empty() || std::chrono::steady_clock::now() > deadline) && alive > 0) {
      if (out.error.empty()) out.error = "timed out after " + fmt(timeout_s) + " s";
      for (size_t i = 0; i < pids.size(); ++i)
        if (!reaped[i]) kill(pids[i], SIGKILL);
    }
    if (!progress) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& t : readers) t.join();
  return out;
}

}  // namespace tictac::ps
