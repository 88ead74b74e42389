#!/usr/bin/env python3
"""Fails when an #include points up the layer order of docs/architecture.md.

Layers, bottom to top (a file may include its own layer's files and any
layer below; the public C header include/nodus/nodus.h is plain types and
may be included everywhere):

  0 src/base        status, logging, settings, dtypes, sockets, bootstrap, sizes
  1 src/plan        Plan, Step, PlanCursor, the verifier
  1 src/kernels     reduce / copy kernels
  2 src/topo        hwloc node, fabric, Topology
  3 transports      loopback, shm, net (tcp, verbs)
  3 algorithms      ring, tree, ... (pure plan builders)
  4 src/tune        cost model, tuner, the planner
  5 src/exec        the executor
  6 src/core        communicators, the C API
  7 tools, bench, sim, plugins, tests, examples

Two folders of one layer may not include each other either (transports and
algorithms know nothing of one another), so that each can be read alone.

Usage: scripts/check-layers.py [REPO]   (exit 1 and one line per violation)
"""
import os
import re
import sys

LAYERS = [
    ("include/nodus", -1),
    ("src/base", 0),
    ("src/plan", 1),
    ("src/kernels", 1),
    ("src/topo", 2),
    ("transports", 3),
    ("algorithms", 3),
    ("src/tune", 4),
    ("src/exec", 5),
    ("src/core", 6),
    ("tools", 7),
    ("bench", 7),
    ("sim", 7),
    ("plugins", 7),
    ("tests", 7),
    ("examples", 7),
]
SOURCES = (".h", ".hpp", ".cc", ".cpp", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """(folder, rank) of a repository path, or None for files outside the layers."""
    for folder, rank in LAYERS:
        if path == folder or path.startswith(folder + "/"):
            return folder, rank
    return None


def resolve(include, including, repo):
    """The repository path an include names: relative to the file, else to an include root."""
    here = os.path.dirname(including)
    for base in (here, "include", "src", ""):
        cand = os.path.normpath(os.path.join(base, include))
        if os.path.isfile(os.path.join(repo, cand)):
            return cand
    return None


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    bad = []
    checked = 0
    for top in ("src", "algorithms", "transports", "tools", "bench", "sim", "plugins"):
        for root, dirs, files in os.walk(os.path.join(repo, top)):
            dirs[:] = [d for d in dirs if d not in ("tests", "build")]
            for name in files:
                if not name.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(root, name), repo)
                mine = layer_of(path)
                if mine is None:
                    continue
                with open(os.path.join(repo, path), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        checked += 1
                        target = resolve(m.group(1), path, repo)
                        theirs = layer_of(target) if target else None
                        if theirs is None:
                            continue  # a file of the same plugin, a generated header
                        if theirs[1] > mine[1] or (theirs[1] == mine[1] and theirs[0] != mine[0] and mine[1] < 7):
                            bad.append(f"{path}:{lineno}: {mine[0]} (layer {mine[1]}) includes {target} "
                                       f"({theirs[0]}, layer {theirs[1]})")
    for line in bad:
        print(line)
    print(f"check-layers: {checked} includes checked, {len(bad)} point up or across the layer order")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
