/* tests/c/c_test.h: what the C ABI test's files share (C, tictac.h only):
 * CHECK (exit 1 with the file, line, message and tictac_last_error()), a
 * connected pair of contexts, a counting callback, a monotonic clock, and
 * the cases in c_api_more.c. */
#ifndef TICTAC_TESTS_C_TEST_H
#define TICTAC_TESTS_C_TEST_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tictac/tictac.h"

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, " (%s)\n", tictac_last_error());     \
      exit(1);                                             \
    }                                                      \
  } while (0)

struct accept_arg {
  tictac_listener_t* listener;
  tictac_channel_t* channel;
  int rc;
};

static inline void* do_accept(void* p) {
  struct accept_arg* a = (struct accept_arg*)p;
  a->rc = tictac_accept(a->listener, 20000, &a->channel);
  return NULL;
}

/* a listens (port 0), b connects: *ab is a's channel to b, *ba b's to a. */
static inline void pair_up(tictac_context_t* a, tictac_context_t* b, tictac_listener_t** l,
                           tictac_channel_t** ab, tictac_channel_t** ba) {
  CHECK(tictac_listen(a, 0, l) == TICTAC_OK, "listen");
  struct accept_arg acc = {*l, NULL, -1};
  pthread_t t;
  pthread_create(&t, NULL, do_accept, &acc);
  CHECK(tictac_connect(b, "127.0.0.1", tictac_listener_port(*l), ba) == TICTAC_OK, "connect");
  pthread_join(t, NULL);
  CHECK(acc.rc == TICTAC_OK, "accept");
  *ab = acc.channel;
}

static inline void on_done(void* arg, int status) {
  int* slot = (int*)arg;
  (*slot)++;
  (void)status;
}

static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* c_api_more.c: tictac_send_batch() over a connected pair (a -> b), and
 * max_unexpected_bytes with a current and an older struct_size. */
void check_send_batch(tictac_channel_t* ab, tictac_channel_t* ba);
void check_unexpected_limit(const tictac_options_t* base);
void check_backend_config(const tictac_options_t* base);

#endif
