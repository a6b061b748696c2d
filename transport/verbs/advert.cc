// Verbs backend: the receiver-advertised rendezvous (caller's thread, under
// the core's lock; proto.h has the records). An expect of a tensor too large
// for an eager message sends its buffer (kAdv) to the sender, whose post()
// then writes the tensor's chunks there: no kRts/kCts per chunk, and one
// receive completion per tensor. Both sides count the SEND records of a QP
// in wire order, so that a sender can tell whether a data record of the
// tensor crossed the advert (the receiver's core may then be landing it the
// usual way, and the advert is declined). The receiver's buffer stays the
// sender's to write until the advert's single end arrives (the WRITE WITH
// IMMEDIATE that completes the tensor, or a kAdvEnd queued behind the
// WRITEs), or the connection dies.
#include <algorithm>
#include <cstring>

#include "transport/core/wire.h"
#include "transport/verbs/backend.h"

namespace tictac::transport::verbs {
namespace {

// Data records not yet taken by the peer that a Conn remembers; beyond it,
// an advert older than the forgotten ones is declined.
constexpr size_t kTxDataMax = 4096;
// Adverts of one peer accepted and not yet ended; beyond it (a peer that
// floods them), new ones are declined: the tensors go the usual way.
constexpr size_t kAdvertsInMax = 65536;

// The tensor a core header names, with its type; false if it is not one.
bool coreHeader(const void* p, size_t n, wire::Header* h) {
  if (n < sizeof(wire::Header)) return false;
  std::memcpy(h, p, sizeof(*h));
  return h->magic == wire::kMagic;
}

// A record about this side's send of a tensor (data, or its abort): one that
// crossed an advert of that tensor declines it.
bool namesTensor(const wire::Header& h) {
  return h.type == static_cast<uint8_t>(wire::MsgType::kData) ||
         h.type == static_cast<uint8_t>(wire::MsgType::kAbort);
}

// The core header of a record of kind `kind` when it names this side's send
// of a tensor (an eager message or kRts carrying data or an abort).
bool sendRecord(uint8_t kind, const void* header, size_t header_len, wire::Header* h) {
  return (kind == static_cast<uint8_t>(MsgKind::kEager) ||
          kind == static_cast<uint8_t>(MsgKind::kRts)) &&
         coreHeader(header, header_len, h) && namesTensor(*h);
}

}  // namespace

bool VerbsBackend::advertise(PeerId peer, uint32_t iteration, uint64_t tensor, void* dst,
                             size_t len, const MemoryRegion* region, uint64_t token) {
  // A tensor that fits an eager message would pay the advert's SEND for nothing.
  if (tune_.adverts == 0 || region == nullptr || classCount() != 1 ||
      len + sizeof(EagerHdr) + sizeof(wire::Header) <= tune_.recv_bytes) {
    return false;
  }
  Conn* c = connOf(peer, 0);
  if (c == nullptr || c->dead || !c->connected) return false;
  const uint32_t imm = newImmediate();
  adverts_out_[imm] = AdvertOut{token,
                                c->qpn,
                                len,
                                AdvTag{tensor, iteration},
                                false,
                                false,
                                const_cast<ibv_mr*>(mrOf(region)),
                                Window{}};
  advert_imm_[token] = imm;
  MsgHdr mh;
  mh.kind = static_cast<uint8_t>(MsgKind::kAdv);
  mh.recv_id = imm;
  mh.len = len;
  mh.send_id = tensor;
  mh.reserved = iteration;
  mh.addr = reinterpret_cast<uintptr_t>(dst);
  mh.rkey = mrOf(region)->rkey;
  const AdvBody body{c->rx_records};  // what the core had been given when it expected
  c->adverts_held.push_back(
      makeMsg(*c, mh, {reinterpret_cast<const std::byte*>(&body), sizeof(body)}, nullptr));
  adverts_check_ = true;
  if (stats_.on) ++stats_.adverts;
  return true;
}

void VerbsBackend::releaseAdverts(Conn& c) {
  if (c.adverts_held.size() < tune_.advert_batch && c.adverts_sent >= tune_.advert_batch) return;
  std::vector<Work> held;
  held.swap(c.adverts_held);
  for (Work& w : held) {
    if (c.dead) break;  // killConn failed them (deferRecord may kill it)
    auto a = adverts_out_.find(w.mh.recv_id);
    if (a == adverts_out_.end()) continue;
    if (tune_.windows != 0) {  // the kAdv names a window over the buffer alone
      auto win = bindWindow(c, a->second.mr, w.mh.addr, w.mh.len);
      if (!win) {  // never sent: it ends here, and the tensor goes the usual way
        if (!c.dead) finishAdvert(c.qpn, a->first, 0, Status::ok(), false);
        continue;
      }
      a->second.win = win.value();
      w.mh.rkey = win.value().rkey;
    }
    a->second.sent = true;
    ++c.adverts_sent;
    deferRecord(c, std::move(w));
  }
}

void VerbsBackend::unadvertise(uint64_t token) {
  auto t = advert_imm_.find(token);
  if (t == advert_imm_.end()) return;
  auto a = adverts_out_.find(t->second);
  if (a == adverts_out_.end() || a->second.revoked) return;
  a->second.revoked = true;
  Conn* c = connByQpn(a->second.qpn);
  if (c == nullptr || c->dead) return;  // killConn ends it
  if (!a->second.sent) {                // never left: it ends here
    std::erase_if(c->adverts_held, [&](const Work& w) { return w.mh.recv_id == a->first; });
    finishAdvert(c->qpn, a->first, 0, Status::ok(), false);
    return;
  }
  MsgHdr mh;
  mh.kind = static_cast<uint8_t>(MsgKind::kAdvRevoke);
  mh.recv_id = a->first;
  mh.send_id = a->second.tag.tensor;
  mh.reserved = a->second.tag.iteration;
  deferRecord(*c, makeMsg(*c, mh, {}, nullptr));
}

void VerbsBackend::noteTx(Conn& c, uint8_t kind, const void* core_header, size_t header_len) {
  const uint64_t n = ++c.tx_records;
  wire::Header h;
  // A tensor small enough for an eager message at the peer is never
  // advertised (advertise()): the ping-pong path remembers nothing.
  if (classCount() != 1 || !sendRecord(kind, core_header, header_len, &h) ||
      h.total_len + sizeof(EagerHdr) + sizeof(wire::Header) <= c.send_bytes) {
    return;
  }
  c.tx_data.emplace_back(n, AdvTag{h.tensor_id, h.iteration});
  if (c.tx_data.size() > kTxDataMax) {
    c.tx_forgot = c.tx_data.front().first;
    c.tx_data.pop_front();
  }
}

void VerbsBackend::onAdvert(Conn& c, const MsgHdr& mh, const AdvBody& body) {
  const AdvTag tag{mh.send_id, mh.reserved};
  while (!c.tx_data.empty() && c.tx_data.front().first <= body.seen) c.tx_data.pop_front();
  // A tensor that noteTx() does not track (eager-sized) cannot be checked for crossing.
  bool decline = classCount() != 1 || mh.len == 0 || body.seen < c.tx_forgot ||
                 mh.len + sizeof(EagerHdr) + sizeof(wire::Header) <= c.send_bytes ||
                 c.adverts_in.size() >= kAdvertsInMax || c.adverts_in.count(tag) != 0;
  for (size_t i = 0; !decline && i < c.tx_data.size(); ++i) decline = c.tx_data[i].second == tag;
  // Not on the wire yet: deferred (c.records) or queued (c.backlog) records.
  auto names = [&](const Work& w) {
    wire::Header h;
    return sendRecord(w.mh.kind, w.hdr, w.mh.hdr_len, &h) &&
           AdvTag{h.tensor_id, h.iteration} == tag;
  };
  for (size_t i = 0; !decline && i < c.records.size(); ++i) decline = names(c.records[i]);
  for (size_t i = 0; !decline && i < c.backlog.size(); ++i) {
    const uint64_t id = c.backlog[i];
    decline = id < works_.size() && works_[id].live && names(works_[id]);
  }
  if (decline) {
    if (stats_.on) ++stats_.adverts_declined;
    endAdvert(c, mh.recv_id, 0);
    return;
  }
  c.adverts_in[tag] = Conn::AdvertIn{mh.recv_id, mh.rkey, mh.addr, mh.len, 0};
  c.last_rkey = mh.rkey;
}

void VerbsBackend::onAdvertRevoke(Conn& c, const MsgHdr& mh) {
  auto it = c.adverts_in.find(AdvTag{mh.send_id, mh.reserved});
  if (it == c.adverts_in.end() || it->second.imm != mh.recv_id) return;  // its end is on the way
  const uint64_t written = it->second.written;
  if (written > 0) c.adverts_cut.insert(it->first);  // the rest has nowhere to go
  c.adverts_in.erase(it);
  endAdvert(c, mh.recv_id, written);
}

void VerbsBackend::endAdvert(Conn& c, uint32_t imm, uint64_t written) {
  MsgHdr mh;
  mh.kind = static_cast<uint8_t>(MsgKind::kAdvEnd);
  mh.recv_id = imm;
  mh.len = written;
  Work w = makeMsg(c, mh, {}, nullptr);
  if (written == 0) return deferRecord(c, std::move(w));
  w.after_writes = true;  // the receiver may free the buffer once it has this
  queueWork(c, std::move(w));
}

bool VerbsBackend::postToAdvert(Conn& c, std::span<const std::byte> header, const void* data,
                                size_t len, const MemoryRegion* region, uint64_t token,
                                Status* st) {
  wire::Header h;
  // Only this direction's data and aborts name a tensor the peer advertised
  // (acks and nacks are about the peer's own sends).
  if (!coreHeader(header.data(), header.size(), &h) || !namesTensor(h)) return false;
  const AdvTag tag{h.tensor_id, h.iteration};
  const bool data_msg = h.type == static_cast<uint8_t>(wire::MsgType::kData);
  if (!c.adverts_cut.empty() && c.adverts_cut.count(tag) != 0) {
    // The receiver withdrew the buffer mid-tensor (its expect was canceled):
    // the send fails, and its abort goes the usual way.
    if (!data_msg || (h.flags & wire::kFlagLast) != 0) c.adverts_cut.erase(tag);
    if (!data_msg) return false;
    *st = Status(StatusCode::kCanceled, "verbs: the receiver canceled its expect of tensor " +
                                            std::to_string(h.tensor_id) + " mid-transfer");
    return true;
  }
  auto it = c.adverts_in.find(tag);
  if (it == c.adverts_in.end()) return false;
  Conn::AdvertIn a = it->second;
  if (data_msg && len == 0) return false;  // nothing to write (and a WRITE needs bytes)
  if (!data_msg || h.total_len != a.len || h.offset > a.len || len > a.len - h.offset ||
      len != h.length) {
    // An abort (or not the tensor the receiver expects): the advert ends
    // before it, and what follows goes the usual way.
    c.adverts_in.erase(it);
    endAdvert(c, a.imm, a.written);
    return false;
  }
  ibv_mr* own = nullptr;
  uint32_t lkey = 0;
  if (region != nullptr) {
    lkey = mrOf(region)->lkey;
  } else if (len > 0) {
    auto m = regTemp(data, len);
    if (!m) {
      *st = m.status();
      return true;
    }
    own = m.value();
    lkey = own->lkey;
  }
  a.written += len;
  const bool last = a.written == a.len;
  if (last) {
    c.adverts_in.erase(it);
  } else {
    it->second.written = a.written;
  }
  if (stats_.on) ++stats_.advert_writes;
  queueWrite(c, RndvSendArgs{token, static_cast<const char*>(data), len, lkey, own,
                             a.addr + h.offset, a.rkey, a.imm, last});
  return true;
}

bool VerbsBackend::finishAdvert(uint32_t qpn, uint32_t imm, uint64_t bytes, const Status& st,
                                bool from_peer) {
  auto a = adverts_out_.find(imm);
  if (a == adverts_out_.end() || a->second.qpn != qpn) return false;
  if (from_peer && !a->second.sent) return false;  // the peer cannot know it
  if (a->second.sent) {
    Conn* c = connByQpn(qpn);
    if (c != nullptr && c->adverts_sent > 0 && --c->adverts_sent < tune_.advert_batch &&
        !c->adverts_held.empty()) {
      adverts_check_ = true;
    }
  }
  const AdvertOut out = a->second;
  advert_imm_.erase(out.token);
  adverts_out_.erase(a);
  const uint64_t done = std::min(bytes, out.len);
  if (closeWindow(qpn, out.win, st, out.token, done, true, nullptr)) return true;  // reported then
  adverts_done_.push_back(AdvertDone{out.token, done, st});
  return true;
}

void VerbsBackend::failAdverts(uint32_t qpn, const Status& st) {
  std::vector<uint32_t> ids;
  for (auto& [imm, a] : adverts_out_) {
    if (a.qpn == qpn) ids.push_back(imm);
  }
  for (uint32_t imm : ids) finishAdvert(qpn, imm, 0, st, false);
}

}  // namespace tictac::transport::verbs
