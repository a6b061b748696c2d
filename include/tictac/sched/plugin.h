/* tictac/sched/plugin.h: the C entry point of third-party analyzer plugins.
 *
 * A plugin is a shared library (built e.g. with Meson's shared_module) that
 * exports one C function:
 *
 *     const tictac_analyzer_plugin_v1* tictac_analyzer_plugin(void);
 *
 * tictac::sched::AnalyzerRegistry::loadPlugin(path) dlopen()s the library,
 * calls that function once, reads `abi_version` (the first member of every
 * version of the struct, so it can always be read) and refuses the library
 * unless it equals TICTAC_ANALYZER_ABI_VERSION; then it registers every
 * analyzer of the table under its name (replacing a built-in of the same
 * name). The library stays loaded while any registry or analyzer uses it.
 *
 * Contract of `analyze`:
 * - Inputs are read-only and valid only during the call. The graph is the one
 *   tictac analyzes: validated, acyclic, ops in list order, `inputs` and
 *   `outputs` index into `ops`.
 * - Write priorities[i] for every recv op i (lower = more urgent; equal
 *   numbers are allowed). Entries of compute ops are ignored. Every entry
 *   starts as TICTAC_PRIORITY_UNSET; a recv left unset is an error.
 * - Return 0 on success. On failure return non-zero and write a
 *   NUL-terminated message of at most error_size bytes to `error`.
 * - It may be called from several threads at once, on different graphs: keep
 *   no mutable global state (or lock it). It must not throw or longjmp.
 * The table and the strings it points to must stay valid while the library
 * is loaded (static storage is the usual choice).
 *
 * Versioning: a change to any struct below or to the contract gives a new
 * version with new struct names (..._v2); the entry point keeps its name.
 */
#ifndef TICTAC_SCHED_PLUGIN_H_
#define TICTAC_SCHED_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C ABI: snake_case names like other C interfaces (UCX, verbs). */
/* NOLINTBEGIN(readability-identifier-naming) */

#define TICTAC_ANALYZER_ABI_VERSION 1u
#define TICTAC_ANALYZER_ENTRY_POINT "tictac_analyzer_plugin"
#define TICTAC_PRIORITY_UNSET 0xffffffffu

enum tictac_op_kind { TICTAC_OP_RECV = 0, TICTAC_OP_COMPUTE = 1 };

typedef struct tictac_op_v1 {
  const char* name; /* unique in the graph, NUL-terminated */
  uint32_t kind;    /* enum tictac_op_kind */
  uint32_t num_inputs;
  const uint32_t* inputs; /* indices into tictac_graph_v1::ops */
  uint64_t bytes;         /* recv: transfer size */
  double time_us;         /* compute: run time (0 when unknown); recv: measured time */
  int32_t has_time;       /* non-zero when time_us was given or traced */
} tictac_op_v1;

typedef struct tictac_graph_v1 {
  const char* name;
  uint32_t num_ops;
  uint32_t num_outputs;
  const tictac_op_v1* ops;
  const uint32_t* outputs;
} tictac_graph_v1;

typedef struct tictac_analyzer_options_v1 {
  double bandwidth_gbps; /* transfer time = bytes*8/(gbps*1e3) us + latency_us */
  double latency_us;
  int32_t use_recv_times; /* non-zero: a recv's own time_us (has_time) replaces it */
  uint64_t seed;
} tictac_analyzer_options_v1;

typedef struct tictac_analyzer_v1 {
  const char* name; /* the --algo name, e.g. "smallest-first" */
  int (*analyze)(const tictac_graph_v1* graph, const tictac_analyzer_options_v1* options,
                 uint32_t* priorities /* graph->num_ops entries */, char* error, size_t error_size);
} tictac_analyzer_v1;

typedef struct tictac_analyzer_plugin_v1 {
  uint32_t abi_version; /* TICTAC_ANALYZER_ABI_VERSION; always the first member */
  uint32_t num_analyzers;
  const tictac_analyzer_v1* analyzers;
} tictac_analyzer_plugin_v1;

typedef const tictac_analyzer_plugin_v1* (*tictac_analyzer_plugin_fn)(void);

/* The entry point a plugin defines (with default visibility). */
const tictac_analyzer_plugin_v1* tictac_analyzer_plugin(void);

/* NOLINTEND(readability-identifier-naming) */

#ifdef __cplusplus
}
#endif

#endif /* TICTAC_SCHED_PLUGIN_H_ */
