/* tictac/tictac.h: the C ABI of the tictac transport (for C, dlopen, FFI).
 *
 * Opaque handles over the C++ objects of tictac/transport/context.h; every
 * function that can fail returns an int code (TICTAC_OK = 0, or one of the
 * codes below, equal to tictac::transport::StatusCode), and
 * tictac_last_error() gives the message of the calling thread's last failure.
 * Completion contract as in C++: a callback fires exactly once, never inside
 * the call that posted it, from the progress context (tictac_progress() or
 * tictac_progress_wait(), the progress thread, or a thread in
 * tictac_op_wait()). An op handle stays valid
 * until tictac_op_release(), even after completion.
 */
#ifndef TICTAC_TICTAC_H
#define TICTAC_TICTAC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TICTAC_OK = 0,
  TICTAC_IN_PROGRESS = 1,
  TICTAC_NO_RESOURCE = 2, /* queue limit reached: retry after completions */
  TICTAC_CANCELED = 3,
  TICTAC_PEER_LOST = 4,
  TICTAC_TIMEOUT = 5,
  TICTAC_INVALID_ARGUMENT = 6,
  TICTAC_SIZE_MISMATCH = 7,
  TICTAC_NO_DEVICE = 8,
  TICTAC_IO_ERROR = 9,
  TICTAC_PROTOCOL_ERROR = 10,
  TICTAC_UNSUPPORTED = 11
};

typedef struct tictac_context tictac_context_t;
typedef struct tictac_listener tictac_listener_t;
typedef struct tictac_channel tictac_channel_t;
typedef struct tictac_op tictac_op_t;

/* Zero-initialize, set struct_size = sizeof(tictac_options_t), then the
 * fields you need; 0 / NULL fields take the library defaults. */
typedef struct tictac_options {
  size_t struct_size;
  const char* backend;         /* "ucx" (default) or "verbs" */
  const char* ucx_tls;         /* UCX_TLS for this context, e.g. "shm", "tcp" */
  const char* ucx_net_devices; /* UCX_NET_DEVICES, e.g. "lo" */
  int progress_thread;         /* non-zero: run progress on an internal thread */
  uint64_t job_token;
  size_t chunk_bytes;
  size_t window_bytes;
  double rate_gbps;
  size_t max_queued;
  uint32_t peer_timeout_ms; /* 0: 3000; at least 1000 (two heartbeats), at most 86400000 */
  /* Ordering hints for sends without a priority (priority < 0), so a framework
   * need not compute priorities itself. At most one of the two sources:
   *   hints_tsv: tictac-analyze output (name<TAB>priority lines), matched by
   *              tensor name;
   *   graph:     a model graph (.json interchange format or .onnx) analyzed in
   *              process by `analyzer` ("tac" when NULL; "tic", "fifo", ...);
   *              matched by name, or by id = the recv op's index in the graph.
   * A bad file or analyzer fails tictac_context_create with
   * TICTAC_INVALID_ARGUMENT (TICTAC_IO_ERROR if unreadable) naming it. */
  const char* hints_tsv;
  const char* graph;
  const char* analyzer;
  /* Where the progress thread runs: "auto" (NULL: the CPUs local to the
   * device, from hwloc; unbound when unknown), "none", or a CPU list such as
   * "0-3,8". TICTAC_PROGRESS_CPUS overrides it. A caller built against an
   * older header (struct_size ending before this field) gets "auto". */
  const char* progress_cpus;
  /* What one peer's tensors that arrived before their expect may hold in this
   * process (0: 1 GiB); a peer sending more is failed, its ops end
   * TICTAC_PEER_LOST naming the limit. Older headers: the default. */
  size_t max_unexpected_bytes;
  /* Backend options, "key=value" pairs separated by ';' (a value may hold
   * commas; nothing is trimmed; empty pairs are skipped; a key given twice
   * keeps its last value), e.g. "windows=1;class_bounds=100,1000" for verbs
   * (the keys listed in transport/verbs/factory.h; a key verbs does not know
   * fails creation naming it) or UCX configuration names such as "TLS=tcp"
   * for ucx. Applied after ucx_tls / ucx_net_devices (which only ucx takes).
   * A pair without '=' or with an empty key fails with
   * TICTAC_INVALID_ARGUMENT. Older headers: none. */
  const char* backend_config;
} tictac_options_t;

typedef void (*tictac_callback_t)(void* arg, int status);

/* Short name of a code ("ok", "peer_lost", ...). */
const char* tictac_strerror(int code);
/* Message of this thread's last failed call ("" if none). */
const char* tictac_last_error(void);

int tictac_context_create(const tictac_options_t* options, tictac_context_t** out);
void tictac_context_destroy(tictac_context_t* ctx);
/* Runs progress once; returns the number of events handled. */
unsigned tictac_progress(tictac_context_t* ctx);
/* tictac_progress(), and when that pass handled nothing, sleeps until the
 * backend has events (a message, a completion) or timeout_us passed, then
 * runs progress once more; returns the events handled (0 when it timed out,
 * and possibly after an early wake-up that brought nothing to handle). Pacing
 * (rate_gbps) shortens the sleep to when the next chunk may leave. A send,
 * expect, cancel or close from another thread, and a lost peer, end the
 * sleep at once; another thread's progress is noticed within about 20 ms.
 * Returns at once with a
 * progress thread, or when called from a completion callback. */
unsigned tictac_progress_wait(tictac_context_t* ctx, unsigned timeout_us);
/* For a caller that sleeps on several contexts or in its own event loop:
 * after tictac_arm() returned 1, the fd of tictac_event_fd() becomes readable
 * (poll/epoll, POLLIN) once this context has events; then call
 * tictac_progress(). tictac_arm() returns 0 for "call tictac_progress() now"
 * (work pending, pacing waits for a time rather than an event, a progress
 * thread runs, the call came from a completion, or the backend cannot sleep:
 * tictac_event_fd() is then -1). A send/expect from another thread or a lost
 * peer does not make the fd readable: such a caller should also wake on a
 * timeout (or its own signal) and call tictac_progress(). The fd may turn
 * readable with nothing to handle (UCX tcp): re-arm and sleep again. */
int tictac_event_fd(tictac_context_t* ctx);
int tictac_arm(tictac_context_t* ctx);
int tictac_register_memory(tictac_context_t* ctx, const void* addr, size_t len);
void tictac_release_memory(tictac_context_t* ctx, const void* addr, size_t len);

/* port 0 = any free port; tictac_listener_port() tells which. */
int tictac_listen(tictac_context_t* ctx, uint16_t port, tictac_listener_t** out);
uint16_t tictac_listener_port(const tictac_listener_t* listener);
int tictac_accept(tictac_listener_t* listener, int timeout_ms, tictac_channel_t** out);
/* Stops listening, from any thread (NULL: nothing): new connections are
   refused, and a tictac_accept() waiting for one (and every later one)
   returns TICTAC_CANCELED; one already in a handshake finishes it (within
   connect_timeout) and may still return TICTAC_OK with a channel to destroy.
   The listener stays valid until tictac_listener_destroy(), which must not
   run while another thread is inside tictac_accept(). */
void tictac_listener_close(tictac_listener_t* listener);
void tictac_listener_destroy(tictac_listener_t* listener);
int tictac_connect(tictac_context_t* ctx, const char* host, uint16_t port, tictac_channel_t** out);
/* Closes the channel (pending ops fail with TICTAC_CANCELED). */
void tictac_channel_destroy(tictac_channel_t* channel);

/* priority < 0: ask the hint provider / default. name may be NULL. cb may be
 * NULL. *out (if out is non-NULL) receives a handle to release. */
int tictac_send(tictac_channel_t* ch, uint64_t id, uint32_t iteration, const char* name,
                const void* buf, size_t len, int64_t priority, tictac_callback_t cb, void* arg,
                tictac_op_t** out);
/* One tensor of tictac_send_batch(): tictac_send()'s arguments. */
typedef struct tictac_send_item {
  uint64_t id;
  uint32_t iteration;
  const char* name; /* may be NULL */
  const void* buf;
  size_t len;
  int64_t priority;     /* < 0: the hint provider / default */
  tictac_callback_t cb; /* may be NULL */
  void* arg;
} tictac_send_item_t;
/* Queues n tensors as one submission: the scheduler holds all of them before
 * any chunk leaves, so they go out by priority, not by their order here (a
 * loop of tictac_send() may start the first before the last is queued).
 * item_size: sizeof(tictac_send_item_t) as the caller's header has it (the
 * array's stride); the library takes its own layout and older, shorter ones,
 * anything else is TICTAC_INVALID_ARGUMENT. All or nothing, as
 * Channel::sendBatch: on an error none is queued, no callback runs and outs
 * is untouched (a batch larger than max_queued: TICTAC_INVALID_ARGUMENT; one
 * that does not fit now: TICTAC_NO_RESOURCE). outs (if non-NULL, n entries)
 * receives the handles, in the items' order, each to release. */
int tictac_send_batch(tictac_channel_t* ch, const tictac_send_item_t* items, size_t n,
                      size_t item_size, tictac_op_t** outs);
int tictac_expect(tictac_channel_t* ch, uint64_t id, uint32_t iteration, void* dst, size_t len,
                  tictac_callback_t cb, void* arg, tictac_op_t** out);
/* 1 if canceled, 0 if too late or unknown. */
int tictac_cancel(tictac_channel_t* ch, tictac_op_t* op);

/* 1 when complete, else 0. */
int tictac_op_test(const tictac_op_t* op);
/* Waits up to timeout_ms (< 0: forever); returns the op's code or TICTAC_TIMEOUT.
 * Inside a completion callback, for an op not yet complete: TICTAC_INVALID_ARGUMENT
 * at once (completions do not nest; it would wait forever). */
int tictac_op_wait(tictac_op_t* op, int timeout_ms);
void tictac_op_release(tictac_op_t* op);

#ifdef __cplusplus
}
#endif

#endif /* TICTAC_TICTAC_H */
