// bench/verbs_floor.h: the raw-verbs pieces of verbs_floor (verbs_floor_qp.cc)
// and the known user-space load it can add to every turn. Any failure ends
// the process with a message naming it (exit 1): this is a benchmark, whose
// only caller is a person or a script reading its exit status.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <string>

// Work added to each turn, before the post: `calls` indirect calls (through
// a volatile function pointer, so none is inlined), `pages` distinct pages
// read (the same pages every turn, each at offset 0: hot in the host's
// caches, though they share cache sets), `work` dependent multiply-adds.
struct Load {
  static constexpr int kMaxPages = 4096;
  int calls = 0, pages = 0, work = 0;
  void prepare();  // maps the page pool (when pages > 0), before any timed turn
  void run(int turn);
};

struct Verbs {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;  // tictac's CQ has one; armed only by --bw --imm's sink
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;  // == send_cq with one shared CQ (tictac's layout)
  ibv_qp* qp = nullptr;
  ibv_gid gid{};  // the IPv4-mapped (RoCE v2) GID of port 1
  int gid_index = -1;
  char* recv_buf = nullptr;
  char* send_buf = nullptr;
  ibv_mr* recv_mr = nullptr;
  ibv_mr* send_mr = nullptr;
  int rq = 0, recv_bytes = 0, inline_max = 0;
  uint32_t to_repost = 0, next_repost = 0;  // receive buffers consumed, in order
  int sends_out = 0, sq = 0;
  int recvs_ready = 0;  // receives completed, not yet taken by awaitRecv
};

// Ends the process with exit 1 and "verbs_floor: what[: strerror(err)]" on
// stderr (every file of verbs_floor fails through it).
[[noreturn]] void fail(const std::string& what, int err = 0);

// Opens `device` (empty: the first), creates the CQ(s), an RC QP with these
// capacities, its buffers, and posts every receive.
Verbs openVerbs(const std::string& device, bool shared_cq, bool channel, int sq, int rq,
                int inline_max, int recv_bytes);
// RESET -> INIT -> RTR -> RTS towards the peer's QP (path MTU 4096, as tictac).
void connectQp(Verbs& v, uint32_t peer_qpn, const uint8_t peer_gid[16]);
// One signaled SEND of `size` bytes (inline when it fits).
void postSend(Verbs& v, size_t size, int id);
// Polls until a receive completes (reposting consumed buffers 16 at a time);
// any error completion, or nothing for 5 s, ends the process.
void awaitRecv(Verbs& v);
// Takes the completions that are there (on the send CQ) without waiting.
void reapSends(Verbs& v);
// Waits until every SEND completed (5 s at most, then ends the process).
void drainSends(Verbs& v);
// Takes the completions that are there on both CQs without waiting.
void reapAll(Verbs& v);

// The TCP exchange (verbs_floor_tcp.cc). The client (`host` set) connects,
// retrying for 5 s while the server opens its device; the server listens on
// `port` and accepts one client.
int tcpConnect(const std::string& host, int port);
// Sends `len` bytes and reads as many from the peer; nothing for `wait_s`
// seconds, or a closed connection, ends the process naming it.
void exchange(int fd, const void* out, void* in, size_t len, double wait_s = 10);

// --bw (verbs_floor_bw.cc). Where the client's WRITEs land: the server's
// bulk buffer.
struct BwTarget {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};
// A page-aligned `size`-byte buffer, registered for local and remote write.
ibv_mr* registerBulk(Verbs& v, size_t size);
// The client: `iters` signaled RDMA WRITEs (WITH IMMEDIATE = the index when
// `imm`) of `size` bytes from `src` to `t`, at most `depth` outstanding.
// Returns the seconds from the first post to the last completion; 5 s
// without a completion ends the process.
double runWrites(Verbs& v, ibv_mr* src, BwTarget t, size_t size, int iters, int depth, bool imm);
// The server with --imm: takes `iters` receive completions (reposting the
// receives); between them it sleeps on the completion channel when `block`
// (the verbs backend's idle receiver), else spins. 5 s without one ends it.
void sinkImms(Verbs& v, int iters, bool block);
