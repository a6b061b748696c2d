// tictac-perf: shared helpers (percentiles, expect ring, config, table rows).
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "tools/perf/perf.h"

namespace tictac::perf {

Buffer::Buffer(size_t size, char fill) : size_(size) {
  constexpr size_t kHuge = size_t{2} << 20;
  size_t rounded = (std::max<size_t>(size, 1) + kHuge - 1) / kHuge * kHuge;
  data_ = static_cast<char*>(std::aligned_alloc(kHuge, rounded));
  if (data_ == nullptr) throw std::bad_alloc();
  // Advice only: 4 KiB pages if refused. NOHUGEPAGE for --no-huge-pages, so
  // THP=always kernels give 4 KiB pages too.
  (void)::madvise(data_, rounded, huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  std::memset(data_, fill, rounded);
}

Buffer::~Buffer() {
  std::free(data_);
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

json latJson(const std::vector<double>& us) {
  return {{"p50", pct(us, 0.5)},
          {"p99", pct(us, 0.99)},
          {"p999", pct(us, 0.999)},
          {"max", us.empty() ? 0.0 : *std::max_element(us.begin(), us.end())}};
}

double sinceUs(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

void ExpectRing::fill(uint64_t depth) {
  while (!failed() && next < count && next - done < depth) {
    uint64_t i = next;
    auto e = ch->expect({base + i, it, ""}, buf->data(), buf->size(), [this, i](const Status& s) {
      done++;
      if (finishing && s.code() == transport::StatusCode::kCanceled) return;  // finish()
      if (!s) {
        if (!failed()) error = s;
        return;
      }
      if (on_done) on_done(i);
    });
    if (!e) {  // back-pressure: retry on the next fill(); anything else stops the ring
      if (e.status().code() != transport::StatusCode::kNoResource) error = e.status();
      return;
    }
    next++;
    pending.push_back(e.value());
    while (!pending.empty() && pending.front()->done()) pending.pop_front();
  }
}

void ExpectRing::finish(Session& s) {
  finishing = true;
  for (auto& h : pending) {
    if (!h->done()) (void)ch->cancel(h);
  }
  for (auto& h : pending) (void)s.wait(h);
  pending.clear();
}

Status sendConfig(Session& s, const RunConfig& cfg) {
  auto op = s.ch->send({kConfigId, s.run, ""}, &cfg, sizeof(cfg), 0);
  if (!op) return op.status();
  Status st = s.wait(op.value());
  if (st.code() == transport::StatusCode::kSizeMismatch) {  // a version-1 server (32 bytes)
    std::string why = "the server rejected the run config (a different tictac-perf version?): ";
    return Status(st.code(), why + st.message());
  }
  return st;
}

Status sendReady(Session& s, transport::Channel& ch) {
  auto op = ch.send({kReadyId, s.run, ""}, nullptr, 0, 0);
  return op ? Status() : op.status();
}

Status waitReady(Session& s, transport::Channel& ch) {
  auto e = ch.expect({kReadyId, s.run, ""}, nullptr, 0);
  if (!e) return e.status();
  Status st = s.wait(e.value(), kReadyWait);
  if (st.code() == transport::StatusCode::kTimeout && !e.value()->done()) {
    (void)ch.cancel(e.value());
    return Status(st.code(), "no ready from the server within " +
                                 std::to_string(kReadyWait.count()) + " s (an older tictac-perf?)");
  }
  if (st.code() == transport::StatusCode::kPeerLost) {
    std::string why =
        "the server closed the connection before the run started (see its output; "
        "it may have rejected the run config): ";
    return Status(st.code(), why + st.message());
  }
  return st;
}

void printRow(const json& r, bool header) {
  if (header) {
    std::fprintf(stderr, "%s\n", std::string(100, '-').c_str());
    std::fprintf(stderr, " %-9s %-9s %-10s %-12s %-12s %-11s %-11s %-11s %-11s\n", "#mode",
                 "#bytes", "#iters", "BW[Gb/s]", "MsgRate[Mpps]", "t_p50[us]", "t_p99[us]",
                 "t_p999[us]", "t_max[us]");
  }
  const json& l = r.contains("hi_lat_us") ? r["hi_lat_us"] : r["lat_us"];
  std::fprintf(stderr, " %-9s %-9zu %-10zu %-12.3f %-13.4f %-11.2f %-11.2f %-11.2f %-11.2f\n",
               r.value("mode", r.value("test", "")).c_str(), r["size"].get<size_t>(),
               r["iters"].get<size_t>(), r["bw_gbps"].get<double>(),
               r["msg_rate_mpps"].get<double>(), l["p50"].get<double>(), l["p99"].get<double>(),
               l["p999"].get<double>(), l["max"].get<double>());
}

}  // namespace tictac::perf
