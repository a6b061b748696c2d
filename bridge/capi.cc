// bridge/capi.cc: the C ABI (tictac/tictac.h) over the C++ transport API.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "tictac/schedule_hints.h"
#include "tictac/tictac.h"
#include "tictac/transport/context.h"

using namespace tictac::transport;

struct tictac_context {
  std::shared_ptr<Context> ctx;
};
struct tictac_listener {
  std::unique_ptr<Listener> listener;
};
struct tictac_channel {
  std::shared_ptr<Channel> ch;
};
struct tictac_op {
  OpHandle op;
};

namespace {

thread_local std::string t_last_error;

int fail(const Status& s) {
  t_last_error = s.toString();
  return static_cast<int>(s.code());
}

int badArg(const char* what) {
  return fail(Status(StatusCode::kInvalidArgument, what));
}

Completion wrap(tictac_callback_t cb, void* arg) {
  if (cb == nullptr) return {};
  return [cb, arg](const Status& s) { cb(arg, static_cast<int>(s.code())); };
}

// Fills opts.hints from the options' hints_tsv or graph + analyzer.
Status loadHints(const tictac_options_t& c, ContextOptions& opts) {
  if (c.hints_tsv != nullptr && c.graph != nullptr) {
    return Status(StatusCode::kInvalidArgument, "set hints_tsv or graph, not both");
  }
  if (c.hints_tsv != nullptr) {
    auto h = loadTsvHints(c.hints_tsv);
    if (!h) return h.status();
    opts.hints = h.value();
  } else if (c.graph != nullptr) {
    try {
      tictac::sched::Graph g = tictac::sched::loadGraph(c.graph);
      opts.hints = tictac::makeScheduleHints(g, c.analyzer != nullptr ? c.analyzer : "tac");
    } catch (const tictac::sched::InputError& e) {
      return Status(StatusCode::kInvalidArgument,
                    std::string("graph ") + c.graph + ": " + e.what());
    } catch (const std::exception& e) {
      return Status(StatusCode::kIoError, std::string("graph ") + c.graph + ": " + e.what());
    }
  } else if (c.analyzer != nullptr) {
    return Status(StatusCode::kInvalidArgument, "analyzer set without a graph");
  }
  return Status::ok();
}

// tictac_options_t::backend_config: "key=value;key=value" (NULL or "": none).
Status parseBackendConfig(const char* text, std::map<std::string, std::string>* out) {
  if (text == nullptr) return Status::ok();
  const std::string all = text;
  size_t at = 0;
  while (at < all.size()) {
    size_t end = std::min(all.find(';', at), all.size());
    const std::string pair = all.substr(at, end - at);
    at = end + 1;
    if (pair.empty()) continue;  // "a=1;", ";a=1", "a=1;;b=2"
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status(StatusCode::kInvalidArgument, "backend_config '" + all + "': '" + pair +
                                                      "' is not key=value (pairs end with ';')");
    }
    (*out)[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  return Status::ok();
}

int giveOp(Result<OpHandle>& r, tictac_op_t** out) {
  if (!r) return fail(r.status());
  if (out != nullptr) *out = new tictac_op{r.value()};
  return TICTAC_OK;
}

}  // namespace

extern "C" {

const char* tictac_strerror(int code) {
  return statusName(static_cast<StatusCode>(code));
}
const char* tictac_last_error(void) {
  return t_last_error.c_str();
}

int tictac_context_create(const tictac_options_t* o, tictac_context_t** out) {
  if (out == nullptr) return badArg("out is NULL");
  ContextOptions opts;
  if (o != nullptr) {
    if (o->struct_size < sizeof(size_t) || o->struct_size > sizeof(tictac_options_t)) {
      return badArg("tictac_options_t.struct_size not set");
    }
    tictac_options_t c{};
    std::memcpy(&c, o, o->struct_size);
    if (c.backend != nullptr) opts.backend = c.backend;
    if (opts.backend != "verbs") {  // UCX names: verbs refuses keys it does not know
      if (c.ucx_tls != nullptr) opts.backend_config["TLS"] = c.ucx_tls;
      if (c.ucx_net_devices != nullptr) opts.backend_config["NET_DEVICES"] = c.ucx_net_devices;
    }
    if (Status b = parseBackendConfig(c.backend_config, &opts.backend_config); !b) return fail(b);
    opts.progress_thread = c.progress_thread != 0;
    if (c.progress_cpus != nullptr) opts.progress_cpus = c.progress_cpus;
    opts.job_token = c.job_token;
    opts.chunk_bytes = c.chunk_bytes;
    opts.window_bytes = c.window_bytes;
    opts.rate_gbps = c.rate_gbps;
    opts.max_queued = c.max_queued;
    opts.max_unexpected_bytes = c.max_unexpected_bytes;
    if (c.peer_timeout_ms != 0) opts.peer_timeout = std::chrono::milliseconds(c.peer_timeout_ms);
    if (Status h = loadHints(c, opts); !h) return fail(h);
  }
  auto ctx = Context::create(opts);
  if (!ctx) return fail(ctx.status());
  *out = new tictac_context{ctx.value()};
  return TICTAC_OK;
}

void tictac_context_destroy(tictac_context_t* ctx) {
  delete ctx;
}
unsigned tictac_progress(tictac_context_t* ctx) {
  return ctx ? ctx->ctx->progress() : 0;
}
unsigned tictac_progress_wait(tictac_context_t* ctx, unsigned timeout_us) {
  return ctx ? ctx->ctx->progress(std::chrono::microseconds(timeout_us)) : 0;
}
int tictac_event_fd(tictac_context_t* ctx) {
  return ctx ? ctx->ctx->eventFd() : -1;
}
int tictac_arm(tictac_context_t* ctx) {
  return ctx && ctx->ctx->arm() ? 1 : 0;
}

int tictac_register_memory(tictac_context_t* ctx, const void* addr, size_t len) {
  if (ctx == nullptr) return badArg("context is NULL");
  Status s = ctx->ctx->registerMemory(addr, len);
  return s ? TICTAC_OK : fail(s);
}

void tictac_release_memory(tictac_context_t* ctx, const void* addr, size_t len) {
  if (ctx != nullptr) ctx->ctx->releaseMemory(addr, len);
}

int tictac_listen(tictac_context_t* ctx, uint16_t port, tictac_listener_t** out) {
  if (ctx == nullptr || out == nullptr) return badArg("context or out is NULL");
  auto l = ctx->ctx->listen(port);
  if (!l) return fail(l.status());
  *out = new tictac_listener{std::move(l.value())};
  return TICTAC_OK;
}

uint16_t tictac_listener_port(const tictac_listener_t* l) {
  return l ? l->listener->port() : 0;
}

int tictac_accept(tictac_listener_t* l, int timeout_ms, tictac_channel_t** out) {
  if (l == nullptr || out == nullptr) return badArg("listener or out is NULL");
  auto ch = l->listener->accept(std::chrono::milliseconds(timeout_ms < 0 ? 1 << 30 : timeout_ms));
  if (!ch) return fail(ch.status());
  *out = new tictac_channel{ch.value()};
  return TICTAC_OK;
}

void tictac_listener_close(tictac_listener_t* l) {
  if (l != nullptr) l->listener->close();
}

void tictac_listener_destroy(tictac_listener_t* l) {
  delete l;
}

int tictac_connect(tictac_context_t* ctx, const char* host, uint16_t port, tictac_channel_t** out) {
  if (ctx == nullptr || host == nullptr || out == nullptr) return badArg("NULL argument");
  auto ch = ctx->ctx->connect(host, port);
  if (!ch) return fail(ch.status());
  *out = new tictac_channel{ch.value()};
  return TICTAC_OK;
}

void tictac_channel_destroy(tictac_channel_t* ch) {
  if (ch != nullptr) ch->ch->close();
  delete ch;
}

int tictac_send(tictac_channel_t* ch, uint64_t id, uint32_t iteration, const char* name,
                const void* buf, size_t len, int64_t priority, tictac_callback_t cb, void* arg,
                tictac_op_t** out) {
  if (ch == nullptr) return badArg("channel is NULL");
  if (priority > static_cast<int64_t>(UINT32_MAX)) return badArg("priority exceeds 32 bits");
  std::optional<Priority> p;
  if (priority >= 0) p = static_cast<Priority>(priority);
  auto r = ch->ch->send({id, iteration, name ? name : ""}, buf, len, p, wrap(cb, arg));
  return giveOp(r, out);
}

int tictac_send_batch(tictac_channel_t* ch, const tictac_send_item_t* items, size_t n,
                      size_t item_size, tictac_op_t** outs) {
  // The first layout's size; a newer header may only append fields.
  constexpr size_t kItemV1 = offsetof(tictac_send_item_t, arg) + sizeof(void*);
  if (ch == nullptr) return badArg("channel is NULL");
  if (items == nullptr && n > 0) return badArg("items is NULL");
  if (item_size < kItemV1 || item_size > sizeof(tictac_send_item_t)) {
    return badArg("item_size is not sizeof(tictac_send_item_t)");
  }
  if (n > SIZE_MAX / item_size) return badArg("too many items");
  std::vector<SendItem> v;
  std::vector<std::unique_ptr<tictac_op>> made;  // the handles, made before anything is queued
  try {
    v.resize(n);
    made.resize(outs != nullptr ? n : 0);
    for (auto& m : made) m = std::make_unique<tictac_op>();
  } catch (const std::exception&) {  // bad_alloc, length_error: before anything is queued
    return fail(Status(StatusCode::kNoResource, "no memory for a batch of " + std::to_string(n)));
  }
  for (size_t i = 0; i < n; ++i) {
    tictac_send_item_t it{};  // a copy: the caller's stride need not align it
    std::memcpy(&it, reinterpret_cast<const char*>(items) + i * item_size, item_size);
    if (it.priority > static_cast<int64_t>(UINT32_MAX)) {
      return fail(Status(StatusCode::kInvalidArgument,
                         "item " + std::to_string(i) + " of the batch: priority exceeds 32 bits"));
    }
    v[i].tensor = {it.id, it.iteration, it.name ? it.name : ""};
    v[i].buf = it.buf;
    v[i].len = it.len;
    if (it.priority >= 0) v[i].priority = static_cast<Priority>(it.priority);
    v[i].completion = wrap(it.cb, it.arg);
  }
  auto r = ch->ch->sendBatch(std::move(v));
  if (!r) return fail(r.status());
  for (size_t i = 0; i < made.size(); ++i) {  // nothing here throws: none is lost
    made[i]->op = r.value()[i];
    outs[i] = made[i].release();
  }
  return TICTAC_OK;
}

int tictac_expect(tictac_channel_t* ch, uint64_t id, uint32_t iteration, void* dst, size_t len,
                  tictac_callback_t cb, void* arg, tictac_op_t** out) {
  if (ch == nullptr) return badArg("channel is NULL");
  auto r = ch->ch->expect({id, iteration, ""}, dst, len, wrap(cb, arg));
  return giveOp(r, out);
}

int tictac_cancel(tictac_channel_t* ch, tictac_op_t* op) {
  if (ch == nullptr || op == nullptr) return 0;
  return ch->ch->cancel(op->op) ? 1 : 0;
}

int tictac_op_test(const tictac_op_t* op) {
  return op != nullptr && op->op->done() ? 1 : 0;
}

int tictac_op_wait(tictac_op_t* op, int timeout_ms) {
  if (op == nullptr) return badArg("op is NULL");
  Status s = timeout_ms < 0 ? op->op->wait() : op->op->wait(std::chrono::milliseconds(timeout_ms));
  return s ? TICTAC_OK : fail(s);
}

void tictac_op_release(tictac_op_t* op) {
  delete op;
}

}  // extern "C"
