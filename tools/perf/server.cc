// tictac-perf server: answers the client's runs (bw sink, lat echo, prio
// urgent replies from the completion while a bulk sink stays posted).
#include <algorithm>

#include "tools/perf/perf.h"

namespace tictac::perf {

int serve(Session& s, transport::Listener& listener) {
  for (;;) {
    RunConfig cfg;
    auto e = s.ch->expect({kConfigId, s.run, ""}, &cfg, sizeof(cfg));
    if (!e || !s.wait(e.value())) return 1;
    if (cfg.test == kQuit) return 0;
    Buffer buf(cfg.size, 0), bulk(cfg.bulk, 0);
    if (cfg.test == kBw) {
      ExpectRing ring{s.ch.get(), 0, cfg.iters, 0, 0, s.run, &buf, {}, {}};
      ring.fill(256);
      if (!sendReady(s, *s.ch)) return 1;
      while (ring.done < cfg.iters) {
        ring.fill(256);
        s.progress();
      }
      ring.finish(s);
    } else if (cfg.test == kLat) {
      transport::OpHandle out;
      if (!sendReady(s, *s.ch)) return 1;
      for (uint64_t i = 0; i < cfg.iters; ++i) {
        auto in = s.ch->expect({i, s.run, ""}, buf.data(), buf.size());
        if (!in || !s.wait(in.value())) return 1;
        if (out && !s.wait(out)) return 1;  // the previous echo left buf: reuse it
        auto sent = s.ch->send({i, s.run, ""}, buf.data(), buf.size(), 0);
        if (!sent) return 1;
        out = sent.value();
      }
      if (out && !s.wait(out)) return 1;  // buf is freed below: the last echo must be done
    } else if (cfg.test == kPrio) {
      if (cfg.mode == kIsolated) {
        auto c2 = listener.accept(std::chrono::seconds(10));
        if (!c2) return 1;
        s.ch2 = c2.value();
      }
      Channel* urgent_ch = cfg.mode == kIsolated ? s.ch2.get() : s.ch.get();
      uint32_t run = s.run;
      ExpectRing hi{urgent_ch, kUrgent, cfg.iters, 0, 0, run, &buf,
                    [urgent_ch, run](uint64_t i) {  // the 0-byte reply, from the completion
                      (void)urgent_ch->send({kReply + i, run, ""}, nullptr, 0, 0);
                    },
                    {}};
      uint64_t bulk_total = UINT64_MAX;
      ExpectRing lo{s.ch.get(), kBulk, UINT64_MAX, 0, 0, run, &bulk, {}, {}};
      auto de = s.ch->expect({kDone, run, ""}, &bulk_total, sizeof(bulk_total));
      if (!de) return 1;
      hi.fill(cfg.iters);
      lo.fill(8);
      if (!sendReady(s, *s.ch)) return 1;
      while (!(de.value()->done() && lo.done >= bulk_total && hi.done == cfg.iters)) {
        hi.fill(cfg.iters);
        lo.fill(de.value()->done() ? std::min<uint64_t>(8, bulk_total - lo.done) : 8);
        if (de.value()->done()) lo.count = bulk_total;
        s.progress();
      }
      hi.finish(s);  // lo may hold expects beyond the bulk the client sent
      lo.finish(s);
      auto fin = s.ch->send({kDone, run, ""}, nullptr, 0, 0);
      if (!fin || !s.wait(fin.value())) return 1;
      if (s.ch2) s.ch2->close();
      s.ch2.reset();
    }
    s.run++;
  }
}

}  // namespace tictac::perf
