/* tests/c/c_api_test.c: the C ABI from C, using only tictac/tictac.h.
 * Two contexts in this process (UCX_TLS from argv[1], default "tcp"): accept
 * runs on a pthread, then tensors of several sizes go a -> b and are checked
 * byte for byte, then as one batch (tictac_send_batch); a size mismatch must
 * fail on both sides with TICTAC_SIZE_MISMATCH; callbacks must fire exactly once. Ordering-hint
 * options: an unreadable or malformed graph or hints file fails context
 * creation with a code and a message; a caller built against the older,
 * shorter tictac_options_t (struct_size without the hint fields) still works.
 * Caller-driven progress without a progress thread: a tensor completes under a
 * loop of tictac_progress_wait() on both contexts; an idle context sleeps
 * (tictac_arm() then 1, tictac_event_fd() a valid fd); a progress thread
 * makes tictac_arm() 0. progress_cpus: a malformed CPU list fails creation
 * with TICTAC_INVALID_ARGUMENT naming it; an older struct_size ignores it.
 * c_api_more.c: tictac_send_batch(), and max_unexpected_bytes (an older
 * struct_size ignores it too). Exit 0 = pass. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_test.h"
#include "tictac/tictac.h"

static int fired[64];

/* Two contexts without a progress thread, driven by tictac_progress_wait(). */
static void caller_driven(const tictac_options_t* base) {
  tictac_options_t o = *base;
  o.progress_thread = 0;
  tictac_context_t *a = NULL, *b = NULL;
  CHECK(tictac_context_create(&o, &a) == TICTAC_OK, "create a (caller-driven)");
  CHECK(tictac_context_create(&o, &b) == TICTAC_OK, "create b (caller-driven)");
  CHECK(tictac_event_fd(a) >= 0 && tictac_event_fd(b) >= 0, "event fds");
  tictac_listener_t* l = NULL;
  tictac_channel_t *ab = NULL, *ba = NULL;
  pair_up(a, b, &l, &ab, &ba);
  size_t n = 3u << 20;
  unsigned char* src = malloc(n);
  unsigned char* dst = calloc(n, 1);
  for (size_t k = 0; k < n; ++k) src[k] = (unsigned char)(k * 13 + 5);
  int cb[2] = {0, 0};
  tictac_op_t *e = NULL, *s = NULL;
  CHECK(tictac_expect(ba, 500, 0, dst, n, on_done, &cb[0], &e) == TICTAC_OK, "expect");
  CHECK(tictac_send(ab, 500, 0, NULL, src, n, 0, on_done, &cb[1], &s) == TICTAC_OK, "send");
  double t0 = now_ms();
  while (!(tictac_op_test(s) && tictac_op_test(e))) {
    CHECK(now_ms() - t0 < 30000, "caller-driven transfer not done in 30 s");
    tictac_progress_wait(a, 1000);
    tictac_progress_wait(b, 1000);
  }
  CHECK(tictac_op_wait(s, 0) == TICTAC_OK && tictac_op_wait(e, 0) == TICTAC_OK, "codes");
  CHECK(memcmp(src, dst, n) == 0, "caller-driven data");
  CHECK(cb[0] == 1 && cb[1] == 1, "caller-driven callbacks");
  int armed = 0;
  for (int i = 0; i < 100000 && !(armed = tictac_arm(b)); ++i) tictac_progress(b);
  CHECK(armed == 1, "an idle context arms");
  /* It sleeps out the 100 ms; over UCX tcp a call may return 0 early after an
     empty wake-up (documented), so a few calls may share them, never many. */
  t0 = now_ms();
  unsigned calls = 0, handled = 0;
  double longest = 0; /* such wake-ups come right after arming: one call still sleeps long */
  for (double left = 100; left > 0 && calls < 100; left = 100 - (now_ms() - t0), ++calls) {
    double c0 = now_ms();
    handled += tictac_progress_wait(b, (unsigned)(left * 1000));
    if (now_ms() - c0 > longest) longest = now_ms() - c0;
  }
  CHECK(handled == 0, "idle progress_wait handles nothing");
  CHECK(calls < 20, "idle progress_wait did not sleep (%u calls in 100 ms)", calls);
  CHECK(longest >= 50, "no idle progress_wait slept most of 100 ms (longest %.1f ms)", longest);
  tictac_op_release(e);
  tictac_op_release(s);
  free(src);
  free(dst);
  tictac_channel_destroy(ab);
  tictac_channel_destroy(ba);
  tictac_listener_destroy(l);
  tictac_context_destroy(a);
  tictac_context_destroy(b);
}

int main(int argc, char** argv) {
  tictac_options_t opts;
  memset(&opts, 0, sizeof(opts));
  opts.struct_size = sizeof(opts);
  opts.ucx_tls = argc > 1 ? argv[1] : "tcp";
  if (strcmp(opts.ucx_tls, "tcp") == 0) opts.ucx_net_devices = "lo";
  opts.progress_thread = 1;
  tictac_context_t *a = NULL, *b = NULL;
  CHECK(tictac_context_create(&opts, &a) == TICTAC_OK, "create a");
  CHECK(tictac_context_create(&opts, &b) == TICTAC_OK, "create b");
  tictac_listener_t* l = NULL;
  tictac_channel_t *ab = NULL, *ba = NULL;
  pair_up(a, b, &l, &ab, &ba);

  size_t sizes[] = {0, 1, 1000, 65536, 1 << 20, 5u << 20};
  for (int i = 0; i < 6; ++i) {
    size_t n = sizes[i];
    unsigned char* src = malloc(n + 1);
    unsigned char* dst = calloc(n + 1, 1);
    for (size_t k = 0; k < n; ++k) src[k] = (unsigned char)(k * 7 + i);
    tictac_op_t *e = NULL, *s = NULL;
    CHECK(tictac_expect(ba, (uint64_t)i, 0, dst, n, on_done, &fired[2 * i], &e) == TICTAC_OK,
          "expect");
    CHECK(tictac_send(ab, (uint64_t)i, 0, "t", src, n, i, on_done, &fired[2 * i + 1], &s) ==
              TICTAC_OK,
          "send");
    CHECK(tictac_op_wait(s, 30000) == TICTAC_OK, "send %zu", n);
    CHECK(tictac_op_wait(e, 30000) == TICTAC_OK, "expect %zu", n);
    CHECK(tictac_op_test(s) == 1 && tictac_op_test(e) == 1, "test");
    CHECK(memcmp(src, dst, n) == 0, "data of size %zu", n);
    CHECK(fired[2 * i] == 1 && fired[2 * i + 1] == 1, "callbacks of size %zu", n);
    tictac_op_release(e);
    tictac_op_release(s);
    free(src);
    free(dst);
  }
  check_send_batch(ab, ba);
  char small[10], big[100];
  memset(big, 1, sizeof(big));
  tictac_op_t *e = NULL, *s = NULL;
  CHECK(tictac_expect(ba, 99, 0, small, sizeof(small), NULL, NULL, &e) == TICTAC_OK, "expect");
  CHECK(tictac_send(ab, 99, 0, NULL, big, sizeof(big), -1, NULL, NULL, &s) == TICTAC_OK, "send");
  CHECK(tictac_op_wait(e, 30000) == TICTAC_SIZE_MISMATCH, "mismatch on the receiver");
  CHECK(tictac_op_wait(s, 30000) == TICTAC_SIZE_MISMATCH, "mismatch on the sender");
  CHECK(strcmp(tictac_strerror(TICTAC_SIZE_MISMATCH), "size_mismatch") == 0, "strerror");
  CHECK(tictac_send(ab, 1, 0, NULL, NULL, 5, 0, NULL, NULL, NULL) == TICTAC_INVALID_ARGUMENT,
        "null buffer rejected");
  CHECK(strlen(tictac_last_error()) > 0, "last error set");
  CHECK(tictac_arm(a) == 0, "no arming with a progress thread");
  double t0 = now_ms();
  tictac_progress_wait(a, 10000000);
  CHECK(now_ms() - t0 < 1000, "progress_wait with a progress thread returns at once");
  CHECK(tictac_progress_wait(NULL, 10) == 0 && tictac_event_fd(NULL) == -1 && tictac_arm(NULL) == 0,
        "NULL context");
  tictac_op_release(e);
  tictac_op_release(s);
  tictac_channel_destroy(ab);
  tictac_channel_destroy(ba);
  tictac_listener_close(l); /* stops listening: accept fails at once */
  tictac_listener_close(l);
  tictac_listener_close(NULL);
  tictac_channel_t* none = NULL;
  t0 = now_ms();
  CHECK(tictac_accept(l, 20000, &none) == TICTAC_CANCELED && none == NULL, "accept after close");
  CHECK(now_ms() - t0 < 5000, "accept after close waited %.0f ms", now_ms() - t0);
  tictac_listener_destroy(l);
  tictac_context_destroy(a);
  tictac_context_destroy(b);

  caller_driven(&opts);
  check_unexpected_limit(&opts);
  check_backend_config(&opts);

  tictac_options_t h = opts;
  tictac_context_t* c = NULL;
  h.progress_thread = 0;
  h.graph = "/nonexistent/model.json";
  CHECK(tictac_context_create(&h, &c) == TICTAC_IO_ERROR && c == NULL, "unreadable graph");
  CHECK(strstr(tictac_last_error(), "/nonexistent/model.json") != NULL, "error names the graph");
  h.graph = NULL;
  h.hints_tsv = "/nonexistent/hints.tsv";
  CHECK(tictac_context_create(&h, &c) == TICTAC_IO_ERROR && c == NULL, "unreadable hints");
  h.hints_tsv = NULL;
  h.analyzer = "tac";
  CHECK(tictac_context_create(&h, &c) == TICTAC_INVALID_ARGUMENT, "analyzer without graph");
  h = opts;
  h.progress_thread = 0;
  h.struct_size = offsetof(tictac_options_t, hints_tsv); /* an older caller */
  h.graph = "/never/read.json";                          /* beyond its struct_size */
  h.progress_cpus = "not-a-cpu-list";
  CHECK(tictac_context_create(&h, &c) == TICTAC_OK, "older options layout");
  tictac_context_destroy(c);
  h = opts; /* progress_cpus: a bad list fails creation and names the value */
  h.progress_thread = 1;
  h.progress_cpus = "2-1";
  c = NULL;
  CHECK(tictac_context_create(&h, &c) == TICTAC_INVALID_ARGUMENT && c == NULL, "bad progress_cpus");
  CHECK(strstr(tictac_last_error(), "progress_cpus \"2-1\"") != NULL, "error names progress_cpus");
  h.progress_cpus = "none";
  CHECK(tictac_context_create(&h, &c) == TICTAC_OK, "progress_cpus none");
  tictac_context_destroy(c);
  printf("c_api_test: ok\n");
  return 0;
}
