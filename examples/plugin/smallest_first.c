/* An example tictac analyzer plugin: "smallest-first".
 *
 * Sends the smallest parameters first: recv ops get priorities 0, 1, 2, ...
 * by ascending bytes, ties by name. It shows the whole plugin contract of
 * tictac/sched/plugin.h in plain C: one exported entry point returning a
 * static table, an analyze function that reads the graph through C arrays,
 * writes one priority per recv and reports errors through its buffer.
 *
 * Build: see meson.build here (a shared_module). Use:
 *   tictac-analyze GRAPH --plugin libtictac-smallest-first.so --algo smallest-first
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tictac/sched/plugin.h"

/* qsort has no context argument: sort an array of pointers to the ops. */
static int by_bytes_then_name(const void* a, const void* b) {
  const tictac_op_v1* x = *(const tictac_op_v1* const*)a;
  const tictac_op_v1* y = *(const tictac_op_v1* const*)b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int smallest_first(const tictac_graph_v1* graph, const tictac_analyzer_options_v1* options,
                          uint32_t* priorities, char* error, size_t error_size) {
  (void)options; /* sizes alone decide */
  const tictac_op_v1** recvs = malloc(sizeof *recvs * (graph->num_ops ? graph->num_ops : 1));
  if (!recvs) {
    snprintf(error, error_size, "out of memory for %u ops", graph->num_ops);
    return 1;
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < graph->num_ops; ++i)
    if (graph->ops[i].kind == TICTAC_OP_RECV) recvs[n++] = &graph->ops[i];
  if (n == 0) {
    free(recvs);
    snprintf(error, error_size, "graph '%s' has no recv ops", graph->name);
    return 2;
  }
  qsort(recvs, n, sizeof *recvs, by_bytes_then_name);
  for (uint32_t k = 0; k < n; ++k) priorities[recvs[k] - graph->ops] = k;
  free(recvs);
  return 0;
}

static const tictac_analyzer_v1 kAnalyzers[] = {
    {"smallest-first", smallest_first},
};

static const tictac_analyzer_plugin_v1 kPlugin = {
    TICTAC_ANALYZER_ABI_VERSION,
    sizeof kAnalyzers / sizeof kAnalyzers[0],
    kAnalyzers,
};

const tictac_analyzer_plugin_v1* tictac_analyzer_plugin(void) {
  return &kPlugin;
}
