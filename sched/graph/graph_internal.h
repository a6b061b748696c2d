// sched/graph/graph_internal.h: helpers shared by the graph loaders, the
// validator and the timing-trace reader. Not part of the public API.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tictac/sched/graph.h"

namespace tictac::sched::detail {

// `name` as a JSON string literal (quoted, control characters escaped,
// invalid UTF-8 replaced), for error messages.
std::string quoted(std::string_view name);

// Throws InputError "<what> <quoted name>: ..." when `name` is empty or holds
// a tab, newline or carriage return (names end up in TSV lines).
void checkName(std::string_view name, std::string_view what);

// Kahn's algorithm over the input edges; ready ops are taken in list
// position order. Returns fewer than g.ops.size() indices when the graph has
// a cycle. Requires every input index to be valid. Iterative.
std::vector<OpIndex> kahnOrder(const Graph& g);

// Given a graph whose kahnOrder() is `partial` (shorter than the op list),
// returns "a -> b -> c -> a" for one cycle. Iterative.
std::string describeCycle(const Graph& g, const std::vector<OpIndex>& partial);

// Bytes a name may not hold: the TSV outputs' separators (tab, newline) and
// every other control character (a NUL was written raw into them).
inline constexpr char kBadNameBytesData[] =
    "\t\n\r\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12\x13\x14\x15\x16"
    "\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f";
// sizeof: the array's terminating NUL is one of them.
inline constexpr std::string_view kBadNameBytes{kBadNameBytesData, sizeof kBadNameBytesData};
// "a tab", "a newline" or "a control character" (for messages).
const char* badByteName(char c);

// Reads a whole file. Throws std::runtime_error "<path>: <strerror>" on I/O
// failure (tools exit 1 on it), and InputError naming the path for a device
// (/dev/zero never ends) or more than kMaxInputFileBytes (a pipe that never
// ends: the read stops there; protobuf's own limit for an ONNX model).
inline constexpr size_t kMaxInputFileBytes = size_t{2} << 30;
std::string readFile(const std::string& path);

// One warning line summarising the ops prune() removed, e.g.
// "ignored 3 ops that no output depends on: a, b, c"; at most 10 names are
// listed, then "... (N more)". Empty string when `removed` is empty.
std::string prunedWarning(const std::vector<std::string>& removed);

}  // namespace tictac::sched::detail
