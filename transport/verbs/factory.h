// transport/verbs/factory.h: the libibverbs backend's one entry point.
//
// RC queue pairs (one per peer, or one per peer and priority class) on one
// RDMA device, connected through the core's TCP bootstrap: the address blob
// carries the QP numbers, PSNs, GID, LID and MTU, as perftest does without
// -R. Small messages are SENDs into reposted receive buffers (inline when they
// fit; a payload of 1 KiB or more in registered memory is a second SGE, not
// copied); larger payloads go by rendezvous: the receiver's receive()
// advertises the destination (address + rkey) and the sender writes it with
// RDMA WRITE WITH IMMEDIATE (the immediate names the transfer).
//
// Device and options (BackendOptions::device / ::config, environment):
//   device       RDMA device name: BackendOptions::device (ContextOptions::
//                device, tictac-perf --device), not a config key; else
//                TICTAC_VERBS_DEVICE, else the first device with an active port
//   gid_index    GID table index (else TICTAC_VERBS_GID_INDEX, else the first
//                IPv4-mapped RoCE v2 GID; `address` picks a specific IPv4)
//   address      IPv4 address whose RoCE v2 GID to use (e.g. 127.0.0.1)
//   eager_bytes  size of a receive buffer = largest SEND message (8192)
//   sq_depth, rq_depth  work requests per QP (256, 512)
//   traffic_class, sl   GRH traffic class (DSCP << 2) and service level (0)
//   class_bounds  "B0,B1,..." (1..7 ascending priorities): one QP per peer and
//                priority class (class 0 below B0, class i in [B(i-1), Bi)),
//                each with its own class_traffic_class / class_sl (lists of
//                one value per class; default DSCP CS(n-1-i) and SL n-1-i for
//                class i of n). Both peers must set the same (kProtocolError
//                otherwise); cm=tcp only (docs/softroce.md 6)
//   idle_spins, idle_spin_us, idle_block_us  after this many progress()
//                calls that found nothing (64) and at least this long idle
//                (1000 us), the next one sleeps on the completion channel for
//                at most idle_block_us (1000 us; 0 = always spin): two busy
//                pollers starve rxe, which does its work in the kernel, but a
//                wake-up costs the guest ~300 us, more than a round trip
//   idle_yield_us  before that sleep, sched_yield() in each idle progress()
//                call for this long after the spin phase (0 = off, default)
//                (neither sleep nor yield happens while a post or a
//                rendezvous is in flight: its completion is imminent)
//   write_piece_bytes, write_queue_bytes  rendezvous payloads are written in
//                pieces of at most this size (131072), and at most this many
//                WRITE bytes sit in a QP's send queue (262144): SENDs (the
//                handshakes of other transfers, urgent or not) go before
//                queued WRITEs instead of behind a whole window of them
//   rndv_nap_us  a receiver whose only work in flight is awaited rendezvous
//                WRITEs naps this long per idle progress() call (timed, no
//                completion event); unset: 200 on a software device (rxe,
//                siw: no bus device in sysfs), else 0; 0 = never (0..100000)
//   rndv_spin_us, rts_batch, qp_timeout  see Tuning in tuning.h
//   adverts      1 (default): receiver-advertised rendezvous: an expect of
//                a tensor larger than an eager message sends its buffer's
//                address to the sender, which writes the tensor there
//                without a per-chunk kRts/kCts handshake; 0 = off (proto.h)
//   advert_batch adverts held back while the peer holds this many (16,
//                1..4096; 1 = each leaves at once; tuning.h)
//   windows      1: rkeys scoped per transfer: registrations get no remote
//                access, each kCts or advert names a type-2 memory window
//                over its buffer, invalidated before the receive is reported
//                done (window.cc); 0 (default): the registration's rkey.
//                A device without type-2 windows: kUnsupported at creation
//   cm           how QPs are connected (else TICTAC_VERBS_CM): "tcp" (default:
//                QP numbers and GIDs in the blob the core's bootstrap carries)
//                or "rdmacm" (librdmacm: listener on `address`, resolve
//                address and route, connect/accept, QPs created by the CM;
//                cm.h). rdmacm needs `address` (else TICTAC_VERBS_ADDRESS) on a
//                non-loopback RDMA interface: rxe on lo cannot route rdma_cm,
//                and creation then fails with kNoDevice saying so. Both sides
//                must use the same cm (else addPeer fails, kProtocolError).
//   cm_timeout_ms  rdma_cm resolve/connect/accept deadline in addPeer (10000)
// TICTAC_VERBS_STATS=1 prints the backend's diagnostic counters (sleeps,
// post -> completion times, gaps between progress() calls, medians of the
// turnaround, post -> completion and ibv_post_send(); stats.h) as one
// JSON line on stderr when the backend is destroyed.
// Every numeric key may also come from TICTAC_VERBS_<KEY> (e.g.
// TICTAC_VERBS_IDLE_SPINS); BackendOptions::config wins. A config key not
// listed here fails creation (kInvalidArgument naming it).
// No device: kNoDevice with the reason. Never initializes UCX.
#pragma once

#include <memory>

#include "transport/backend.h"

namespace tictac::transport::verbs {

Result<std::unique_ptr<Backend>> create(const BackendOptions& options, BackendEvents* events);

}  // namespace tictac::transport::verbs
