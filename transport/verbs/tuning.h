// transport/verbs/tuning.h: the verbs backend's tunables (internal). Each
// comes from BackendOptions::config or TICTAC_VERBS_<KEY> (factory.h lists
// the keys; backend.cc parses and checks them); the defaults are below.
#pragma once

#include <cstdint>
#include <vector>

namespace tictac::transport::verbs {

struct Tuning {
  uint32_t recv_bytes = 8192;  // receive buffer = largest SEND message
  uint32_t sq_depth = 256;
  uint32_t rq_depth = 512;  // a peer's RTSs and WRITE-WITH-IMMs each take one; RNR costs a jiffy
  // Consumed receive buffers are reposted in one ibv_post_recv chain once this
  // many are free (at most rq_depth / 4): a message's processing then pays
  // no post_recv, and at least rq_depth - repost_batch buffers stay posted.
  uint32_t repost_batch = 16;
  uint8_t traffic_class = 0;
  uint8_t sl = 0;
  // Priority classes: class i takes priorities in [bound[i-1], bound[i])
  // (class 0 below bound[0]), one QP each with class_tc[i] / class_sl[i].
  std::vector<uint32_t> class_bounds;       // empty: one class
  std::vector<uint8_t> class_tc, class_sl;  // one per class once init() ran
  // RC ACK timeout exponent (4.096 us * 2^qp_timeout before a retransmission;
  // 14 = 67 ms). rxe on lo retransmits now and then even in ib_write_bw.
  uint32_t qp_timeout = 14;
  uint32_t idle_spins = 64;       // idle progress() calls before one blocks...
  uint32_t idle_spin_us = 1000;   // ...and idle for at least this long
  uint32_t idle_block_us = 1000;  // how long such a call may sleep on the CQ channel (0: never)
  uint32_t idle_yield_us = 0;     // then first yield the CPU this long
  // While the only thing in flight is a rendezvous receive (kCts sent, the
  // peer's WRITE awaited: at least its transfer time), the idle path sleeps
  // after min(idle_spin_us, rndv_spin_us) instead of spinning; kNever: spin.
  static constexpr uint32_t kNever = 0xFFFFFFFFu;
  uint32_t rndv_spin_us = kNever;
  // In the same state, after kNapAfter empty calls, each call first naps
  // this long (a timed sleep: no completion event, so the writing peer's CPU
  // pays no wake-up); 0: never. kAuto: kSoftNapUs on a software device
  // (Device::software: rxe does the wire's work on the CPUs, and a receiver
  // spinning through a bulk transfer takes one of them from it), else 0 (a
  // real NIC's WRITE of 1 MiB lasts less than such a nap).
  static constexpr uint32_t kAuto = 0xFFFFFFFFu, kSoftNapUs = 200, kNapAfter = 8;
  uint32_t rndv_nap_us = kAuto;
  // Rendezvous payloads are written in pieces of write_piece bytes, and at
  // most write_queue bytes of them sit in a QP's send queue: the QP sends in
  // order, so a kRts/kCts/eager SEND queued behind a window of WRITEs would
  // wait for all of them (the next chunk's handshake then idles the wire).
  uint32_t write_piece = 128 << 10;
  uint32_t write_queue = 256 << 10;
  // The handshake records of one core pass to one peer (the kRts of the
  // rendezvous chunks posted, the kCts of the receives started) share one
  // SEND of up to rts_batch records (1: one SEND each). They leave at the
  // backend's next progress() or arm(), before an eager message to the same
  // peer, or when rts_batch are waiting.
  uint32_t rts_batch = 16;
  // Receiver-advertised rendezvous (advert.cc): 1 = an expect of a tensor
  // too large for an eager message offers its buffer to the sender, which
  // then writes the tensor there without a kRts/kCts handshake; 0 = off.
  uint32_t adverts = 1;
  // Adverts are held back while the peer holds at least advert_batch of
  // this side's, until advert_batch wait (then they share SENDs of up to
  // rts_batch records): a stream of expects, each posted as one completes,
  // sends an advert SEND per advert_batch tensors instead of one per tensor
  // (each SEND toward the writer costs rxe's CPUs what the wire needs).
  // An advert is never needed for progress: a tensor sent before its
  // advert leaves goes by kRts/kCts. 1 = every advert leaves at once.
  uint32_t advert_batch = 16;
  // 1 = rkeys scoped per transfer (window.cc): registrations get no remote
  // access; each kCts and advert hands out a type-2 memory window bound over
  // its buffer alone, invalidated before the receive is reported done. 0 =
  // the registration's rkey (the peer may write the whole region while it
  // stays registered).
  uint32_t windows = 0;
};

}  // namespace tictac::transport::verbs
