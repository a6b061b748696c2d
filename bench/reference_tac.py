#!/usr/bin/python3
"""Times the reference TicTac implementation's TAC (xldrx/tictac) on a graph.

The anchor of docs/perf.md. Nothing of the reference is committed here: this
driver extracts tictac/common.py and tictac/tac.py from a git checkout of
xldrx/tictac given on the command line into a temporary directory, and runs
the reference's own TAC loop (TAC._get_results: _update_properties, then a sort
with its pairwise comparator, once per recv) on a graph in our interchange
format. The reference imports TensorFlow and tftracer at module level but its
TAC loop never calls them, so both are replaced by empty placeholder modules; the
TensorFlow graph walk is replaced by the same dependency sets computed here
(not timed). Only the Python standard library is needed.

  /usr/bin/python3 bench/reference_tac.py --reference-git /path/to/tictac/.git \\
      GRAPH.json [--bandwidth-gbps 10] [--order-out FILE.tsv]

stdout: one JSON object {"graph", "ops", "recvs", "tac_seconds"}.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types


def extract_reference(git_dir, dest):
    pkg = os.path.join(dest, "tictac")
    os.makedirs(pkg)
    open(os.path.join(pkg, "__init__.py"), "w").close()  # its own imports tic (unused)
    for name in ("common.py", "tac.py"):
        text = subprocess.run(["git", "--git-dir", git_dir, "show", "HEAD:tictac/" + name],
                              check=True, capture_output=True, text=True).stdout
        with open(os.path.join(pkg, name), "w") as f:
            f.write(text)
    tf = types.ModuleType("tensorflow")
    tf.Variable = object  # only used in an annotation
    sys.modules["tensorflow"] = tf
    tftracer = types.ModuleType("tftracer")
    tftracer.Timeline = None
    sys.modules["tftracer"] = tftracer
    sys.path.insert(0, dest)


class FakeTfOp:
    """What the reference reads of a TensorFlow op: .op.name."""

    def __init__(self, name):
        self.name = name


class Node:
    def __init__(self, name):
        self.op = FakeTfOp(name)
        self.deps = set()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--reference-git", required=True, help="git dir of xldrx/tictac")
    ap.add_argument("--bandwidth-gbps", type=float, default=10.0)
    ap.add_argument("--order-out", help="write the reference's order as name<TAB>priority")
    args = ap.parse_args()

    with open(args.graph) as f:
        g = json.load(f)
    tmp = tempfile.mkdtemp(prefix="tictac-ref-")
    extract_reference(args.reference_git, tmp)
    from tictac.tac import TAC  # noqa: E402 (after the placeholders)

    ops = {op["name"]: op for op in g["ops"]}
    nodes = {name: Node(name) for name in ops}
    times = {}
    order = []  # topological
    seen = set()

    def visit(name):  # iterative DFS post-order
        stack = [(name, False)]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if n in seen:
                continue
            seen.add(n)
            stack.append((n, True))
            for i in ops[n].get("inputs", []):
                if i not in seen:
                    stack.append((i, False))

    for n in ops:
        visit(n)
    comm, comp = [], []
    for n in order:
        op, node = ops[n], nodes[n]
        if op["kind"] == "recv":
            node.deps = {node}
            times[node] = op["bytes"] * 8 / (args.bandwidth_gbps * 1e3)
            comm.append(node)
        else:
            for i in op.get("inputs", []):
                node.deps |= nodes[i].deps
            times[node] = op.get("time_us", 0.0)
            comp.append(node)

    tac = TAC.__new__(TAC)  # skip __init__: it walks a TensorFlow graph
    tac._comm_ops = comm
    tac._comp_ops = comp
    tac._get_time = times.__getitem__
    t0 = time.perf_counter()
    result = tac._get_results()
    seconds = time.perf_counter() - t0
    if args.order_out:
        with open(args.order_out, "w") as f:
            for prio, name in result:
                f.write("%s\t%d\n" % (name, prio))
    print(json.dumps({"graph": g.get("name", ""), "ops": len(ops), "recvs": len(comm),
                      "tac_seconds": round(seconds, 4)}))


if __name__ == "__main__":
    main()
