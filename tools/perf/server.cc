// tictac-perf server: answers the client's runs (bw sink, lat echo, prio
// urgent replies from the completion while a bulk sink stays posted).
#include <algorithm>

#include "tools/perf/perf.h"

namespace tictac::perf {

namespace {

using transport::StatusCode;

// One clear line for a failed run (tictac-perf.cc adds "session failed");
// returns the exit status 1.
int fail(const char* what, const Status& st) {
  std::fprintf(stderr, "tictac-perf: %s: %s\n", what, st.toString().c_str());
  return 1;
}

// Why a run's loop must stop early: a ring's first failure, else a lost
// channel; ok while the run can go on.
Status broken(std::initializer_list<const ExpectRing*> rings,
              std::initializer_list<const Channel*> chans) {
  for (const ExpectRing* r : rings) {
    if (r->failed()) return r->error;
  }
  for (const Channel* c : chans) {
    if (!c->alive()) return Status(StatusCode::kPeerLost, "the connection to the client failed");
  }
  return {};
}

// Receives the next run's config: 0 ok, else the exit status after one line.
int receiveConfig(Session& s, RunConfig& cfg) {
  auto e = s.ch->expect({kConfigId, s.run, ""}, &cfg, sizeof(cfg));
  if (!e) return fail("posting the run-config expect", e.status());
  Status st = s.wait(e.value());
  if (st.code() == StatusCode::kSizeMismatch) {
    std::fprintf(stderr,
                 "tictac-perf: the client's run config is not version %u (a different "
                 "tictac-perf version?): %s\n",
                 kConfigVersion, st.toString().c_str());
    return 1;
  }
  if (!st) return fail("waiting for the client's run config", st);
  if (cfg.version != kConfigVersion) {
    std::fprintf(stderr,
                 "tictac-perf: the client sent run-config version %u; this server speaks "
                 "version %u (use the same tictac-perf on both sides)\n",
                 cfg.version, kConfigVersion);
    return 1;
  }
  return 0;
}

}  // namespace

int serve(Session& s, transport::Listener& listener) {
  for (;;) {
    RunConfig cfg;
    if (int rc = receiveConfig(s, cfg); rc != 0) return rc;
    if (cfg.test == kQuit) return 0;
    if (cfg.size > kMaxBytes || cfg.bulk > kMaxBytes) {  // a client may send anything
      std::fprintf(stderr,
                   "tictac-perf: the client's run config asks for %llu-byte messages and a "
                   "%llu-byte bulk tensor (at most %llu each)\n",
                   static_cast<unsigned long long>(cfg.size),
                   static_cast<unsigned long long>(cfg.bulk),
                   static_cast<unsigned long long>(kMaxBytes));
      return 1;
    }
    Buffer buf(cfg.size, 0), bulk(cfg.bulk, 0);
    if (cfg.test == kBw) {
      ExpectRing ring{s.ch.get(), 0, cfg.iters, 0, 0, s.run, &buf, {}, {}, {}, false};
      ring.fill(256);
      if (Status st = sendReady(s, *s.ch); !st) return fail("sending ready", st);
      Status why;
      while (ring.done < cfg.iters && (why = broken({&ring}, {s.ch.get()})).isOk()) {
        ring.fill(256);
        s.progress();
      }
      if (why.isOk()) why = broken({&ring}, {});  // the last expects may have failed
      ring.finish(s);
      if (!why) return fail("bw run: receive failed", why);
    } else if (cfg.test == kLat) {
      transport::OpHandle out;
      if (Status st = sendReady(s, *s.ch); !st) return fail("sending ready", st);
      for (uint64_t i = 0; i < cfg.iters; ++i) {
        auto in = s.ch->expect({i, s.run, ""}, buf.data(), buf.size());
        if (!in) return fail("lat run: posting an expect", in.status());
        if (Status st = s.wait(in.value()); !st) return fail("lat run: receive failed", st);
        if (Status st = out ? s.wait(out) : Status(); !st) {  // the previous echo left buf
          return fail("lat run: echo failed", st);
        }
        auto sent = s.ch->send({i, s.run, ""}, buf.data(), buf.size(), 0);
        if (!sent) return fail("lat run: echo failed", sent.status());
        out = sent.value();
      }
      if (Status st = out ? s.wait(out) : Status(); !st) {  // buf is freed below
        return fail("lat run: echo failed", st);
      }
    } else if (cfg.test == kPrio) {
      if (cfg.mode == kIsolated) {
        auto c2 = listener.accept(std::chrono::seconds(10));
        if (!c2) return fail("isolated mode: accepting the second connection", c2.status());
        s.ch2 = c2.value();
      }
      Channel* urgent_ch = cfg.mode == kIsolated ? s.ch2.get() : s.ch.get();
      uint32_t run = s.run;
      ExpectRing hi{urgent_ch,
                    kUrgent,
                    cfg.iters,
                    0,
                    0,
                    run,
                    &buf,
                    [urgent_ch, run](uint64_t i) {  // the 0-byte reply, from the completion
                      (void)urgent_ch->send({kReply + i, run, ""}, nullptr, 0, 0);
                    },
                    {},
                    {},
                    false};
      uint64_t bulk_total = UINT64_MAX;
      ExpectRing lo{s.ch.get(), kBulk, UINT64_MAX, 0, 0, run, &bulk, {}, {}, {}, false};
      auto de = s.ch->expect({kDone, run, ""}, &bulk_total, sizeof(bulk_total));
      if (!de) return fail("prio run: posting the done expect", de.status());
      // The client sends an urgent tensor a millisecond: 1024 posted expects
      // are a second ahead of it (all of -n were posted, 3 GB at 10^8).
      const uint64_t hi_depth = std::min<uint64_t>(cfg.iters, 1024);
      hi.fill(hi_depth);
      lo.fill(8);
      if (Status st = sendReady(s, *s.ch); !st) return fail("sending ready", st);
      Status why;
      while (!(de.value()->done() && lo.done >= bulk_total && hi.done == cfg.iters)) {
        if (de.value()->done() && !de.value()->status()) why = de.value()->status();
        if (why.isOk()) why = broken({&hi, &lo}, {s.ch.get(), urgent_ch});
        if (!why) break;
        hi.fill(hi_depth);
        lo.fill(de.value()->done() ? std::min<uint64_t>(8, bulk_total - lo.done) : 8);
        if (de.value()->done()) lo.count = bulk_total;
        s.progress();
      }
      if (why.isOk()) why = broken({&hi, &lo}, {});  // the last expects may have failed
      hi.finish(s);  // lo may hold expects beyond the bulk the client sent
      lo.finish(s);
      if (!why) {  // bulk_total must outlive the done expect
        if (!de.value()->done()) (void)s.ch->cancel(de.value());
        (void)s.wait(de.value(), std::chrono::seconds(10));
        return fail("prio run: receive failed", why);
      }
      auto fin = s.ch->send({kDone, run, ""}, nullptr, 0, 0);
      if (!fin) return fail("prio run: sending done", fin.status());
      if (Status st = s.wait(fin.value()); !st) return fail("prio run: sending done", st);
      if (s.ch2) s.ch2->close();
      s.ch2.reset();
    }
    s.run++;
  }
}

}  // namespace tictac::perf
