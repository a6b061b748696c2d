/* tests/c/c_api_more.c: more of the C ABI test (see c_api_test.c):
 * tictac_send_batch(), the receive limit max_unexpected_bytes, which a
 * caller built against an older header (struct_size ending before it) does
 * not get, and backend_config. */
#include <stddef.h>
#include <string.h>

#include "c_test.h"

/* tictac_send_batch(): a bad item or item_size fails the whole batch (no
 * callback, no id left "being sent"); then the same items all arrive intact,
 * each callback fires once, and the handles come back in the items' order. */
void check_send_batch(tictac_channel_t* ab, tictac_channel_t* ba) {
  enum { N = 4 };
  const size_t n = 100000;
  unsigned char* src = malloc(N * n);
  unsigned char* dst = calloc(N * n, 1);
  CHECK(src != NULL && dst != NULL, "batch buffers");
  int cb[N] = {0};
  tictac_send_item_t items[N];
  tictac_op_t *e[N], *s[N];
  memset(items, 0, sizeof(items));
  for (int i = 0; i < N; ++i) {
    for (size_t k = 0; k < n; ++k) src[i * n + k] = (unsigned char)(k * 3 + i);
    CHECK(tictac_expect(ba, 700 + i, 0, dst + i * n, n, NULL, NULL, &e[i]) == TICTAC_OK, "expect");
    tictac_send_item_t it = {700 + i, 0, "b", src + i * n, n, N - i, on_done, &cb[i]};
    items[i] = it;
  }
  items[2].buf = NULL;
  CHECK(tictac_send_batch(ab, items, N, sizeof(items[0]), s) == TICTAC_INVALID_ARGUMENT,
        "bad item");
  CHECK(strstr(tictac_last_error(), "item 2") != NULL, "the error names the item");
  items[2].buf = src + 2 * n;
  CHECK(tictac_send_batch(ab, items, N, sizeof(items[0]) - 1, s) == TICTAC_INVALID_ARGUMENT,
        "short item_size");
  CHECK(tictac_send_batch(ab, items, N, sizeof(items[0]) + 8, s) == TICTAC_INVALID_ARGUMENT,
        "item_size of a newer header");
  CHECK(tictac_send_batch(ab, items, N, sizeof(items[0]), s) == TICTAC_OK, "batch");
  for (int i = 0; i < N; ++i) {
    CHECK(tictac_op_wait(s[i], 30000) == TICTAC_OK, "batch send %d", i);
    CHECK(tictac_op_wait(e[i], 30000) == TICTAC_OK, "batch expect %d", i);
    CHECK(memcmp(src + i * n, dst + i * n, n) == 0, "batch data %d", i);
    CHECK(cb[i] == 1, "batch callback %d fired %d times", i, cb[i]);
    tictac_op_release(s[i]);
    tictac_op_release(e[i]);
  }
  CHECK(tictac_send_batch(ab, NULL, 0, sizeof(items[0]), NULL) == TICTAC_OK, "empty batch");
  free(src);
  free(dst);
}

/* a's limit is 1 byte (max_unexpected_bytes, with the given struct_size);
 * b sends a's tensor 1 (4 KiB, eager) before a expects it. With the limit,
 * a's pending expect of another tensor fails TICTAC_PEER_LOST; without it,
 * that expect stays pending, a fence tensor arrives after tensor 1, and
 * tensor 1 lands intact once expected. */
static void early_tensor(const tictac_options_t* base, size_t struct_size, int limited) {
  tictac_options_t o = *base;
  o.progress_thread = 1;
  tictac_context_t *a = NULL, *b = NULL;
  CHECK(tictac_context_create(&o, &b) == TICTAC_OK, "create b");
  o.struct_size = struct_size;
  o.max_unexpected_bytes = 1;
  CHECK(tictac_context_create(&o, &a) == TICTAC_OK, "create a (struct_size %zu)", struct_size);
  tictac_listener_t* l = NULL;
  tictac_channel_t *ab = NULL, *ba = NULL;
  pair_up(a, b, &l, &ab, &ba);
  char src[4096], dst[4096], other[8];
  memset(src, 9, sizeof(src));
  tictac_op_t *pending = NULL, *s = NULL, *e = NULL;
  CHECK(tictac_expect(ab, 999, 0, other, sizeof(other), NULL, NULL, &pending) == TICTAC_OK, "x");
  CHECK(tictac_send(ba, 1, 0, NULL, src, sizeof(src), 0, NULL, NULL, &s) == TICTAC_OK, "send");
  if (limited) {
    CHECK(tictac_op_wait(pending, 30000) == TICTAC_PEER_LOST, "max_unexpected_bytes of 1 applies");
  } else {
    /* A fence: tensor 2 (8 bytes, less urgent, so it leaves after tensor 1)
     * arriving proves that tensor 1 came before its expect. */
    char f_src[8] = {0}, f_dst[8];
    tictac_op_t *fs = NULL, *fe = NULL;
    CHECK(tictac_send(ba, 2, 0, NULL, f_src, 8, 1, NULL, NULL, &fs) == TICTAC_OK, "fence");
    CHECK(tictac_expect(ab, 2, 0, f_dst, 8, NULL, NULL, &fe) == TICTAC_OK, "fence expect");
    CHECK(tictac_op_wait(fe, 30000) == TICTAC_OK, "the fence arrives under no limit");
    tictac_op_release(fs);
    tictac_op_release(fe);
    CHECK(tictac_op_wait(pending, 500) == TICTAC_TIMEOUT,
          "an older struct_size ignores max_unexpected_bytes");
    CHECK(tictac_expect(ab, 1, 0, dst, sizeof(dst), NULL, NULL, &e) == TICTAC_OK, "expect");
    CHECK(tictac_op_wait(e, 30000) == TICTAC_OK && memcmp(src, dst, sizeof(src)) == 0,
          "the early tensor arrives under no limit");
    CHECK(tictac_op_wait(s, 30000) == TICTAC_OK, "its send");
    tictac_op_release(e);
  }
  tictac_op_release(pending);
  tictac_op_release(s);
  tictac_channel_destroy(ab);
  tictac_channel_destroy(ba);
  tictac_listener_destroy(l);
  tictac_context_destroy(a);
  tictac_context_destroy(b);
}

void check_unexpected_limit(const tictac_options_t* base) {
  early_tensor(base, sizeof(tictac_options_t), 1);
  early_tensor(base, offsetof(tictac_options_t, max_unexpected_bytes), 0);
}

/* backend_config: "key=value;..." pairs. A pair that is not key=value, or a
 * key the verbs backend does not know (checked before it looks for a device),
 * fails creation naming it; UCX takes its configuration names; a caller
 * built against an older header has none (the field is never read). */
void check_backend_config(const tictac_options_t* base) {
  tictac_options_t o = *base;
  tictac_context_t* c = NULL;
  const char* bad[] = {"TLS", "TLS=tcp;=lo", ";;windws"};
  for (int i = 0; i < 3; ++i) {
    o.backend_config = bad[i];
    CHECK(tictac_context_create(&o, &c) == TICTAC_INVALID_ARGUMENT &&
              strstr(tictac_last_error(), "is not key=value") != NULL,
          "a malformed backend_config is refused, named");
  }
  o.backend = "verbs";
  o.backend_config = "windows=1;windws=1";
  CHECK(tictac_context_create(&o, &c) ==
                (TICTAC_TEST_HAVE_VERBS ? TICTAC_INVALID_ARGUMENT : TICTAC_UNSUPPORTED) &&
            (!TICTAC_TEST_HAVE_VERBS || strstr(tictac_last_error(), "unknown option 'windws'")),
        "verbs refuses a key it does not know, named");
  o.backend = base->backend;
  o.backend_config = ";TLS=tcp;;NET_DEVICES=lo;";
  CHECK(tictac_context_create(&o, &c) == TICTAC_OK, "UCX takes its names from backend_config");
  tictac_context_destroy(c);
  o.backend_config = "NOT A LIST";
  o.struct_size = offsetof(tictac_options_t, backend_config);
  CHECK(tictac_context_create(&o, &c) == TICTAC_OK, "an older struct_size has no backend_config");
  tictac_context_destroy(c);
}
