// tictac-test-peer: the other process of the cross-process transport tests.
//
//   tictac-test-peer BACKEND MODE [SIZE...]
// Listens on a free port, prints "PORT <n>" on stdout, accepts one channel.
//   echo: for each SIZE i (in order) expects tensor (i, 0) of that size,
//         then sends back tensor (1000 + i, 0): the 8-byte checksum of it.
//   hold: posts nothing and sleeps until killed (the peer-loss tests kill it).
//   flood: sends tensors (0, 0), (1, 0), ... of SIZE bytes, one after the
//         other, until killed or the channel fails.
// Exit: 0 done, 1 transport failure, 2 usage.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/backend_helper.h"

using namespace tictac::transport;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tictac-test-peer BACKEND echo|hold|flood [SIZE...]\n");
    return 2;
  }
  std::string backend = argv[1], mode = argv[2];
  std::vector<size_t> sizes;
  for (int i = 3; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  ContextOptions o = test::backendHelper(backend).options();
  auto ctx = Context::create(o);
  if (!ctx) {
    std::fprintf(stderr, "peer: %s\n", ctx.status().toString().c_str());
    return 1;
  }
  auto listener = ctx.value()->listen(0, "127.0.0.1");
  if (!listener) return 1;
  std::printf("PORT %u\n", listener.value()->port());
  std::fflush(stdout);
  auto ch = listener.value()->accept(std::chrono::seconds(30));
  if (!ch) {
    std::fprintf(stderr, "peer: accept: %s\n", ch.status().toString().c_str());
    return 1;
  }
  if (mode == "hold") {
    for (;;) {
      ctx.value()->progress();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  if (mode == "flood") {
    std::vector<char> buf(sizes.empty() ? 0 : sizes[0], 7);
    for (uint64_t i = 0;; ++i) {
      auto s = ch.value()->send({i, 0, ""}, buf.data(), buf.size());
      if (!s || !s.value()->wait().isOk()) return 1;
    }
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<char> buf(sizes[i]);
    auto e = ch.value()->expect({i, 0, ""}, buf.data(), buf.size());
    if (!e || !e.value()->wait().isOk()) {
      std::fprintf(stderr, "peer: expect %zu failed\n", i);
      return 1;
    }
    uint64_t sum = test::checksum(buf.data(), buf.size());
    auto s = ch.value()->send({1000 + i, 0, ""}, &sum, sizeof(sum));
    if (!s || !s.value()->wait().isOk()) {
      std::fprintf(stderr, "peer: reply %zu failed\n", i);
      return 1;
    }
  }
  return 0;
}
