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

Usage: scripts/check-layers.py [REPO]            exit 1 and one line per violation
       scripts/check-layers.py --dot FILE [REPO]  also writes the folders and the
                                                  includes between them as Graphviz
                                                  (docs/layers.svg is made from it)
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


def write_dot(path, edges):
    """Folders as boxes ranked by layer, an arrow per folder pair that includes, labelled with the count."""
    lines = ["digraph layers {", '  rankdir=BT; node [shape=box, style="rounded,filled", fillcolor="#eef3fb", '
             'fontname="Helvetica"]; edge [color="#5a6b84", fontname="Helvetica", fontsize=9];']
    ranks = {}
    for folder, rank in LAYERS:
        if folder in ("tests", "examples"):
            continue
        ranks.setdefault(rank, []).append(folder)
    for rank in sorted(ranks):
        names = " ".join(f'"{f}"' for f in ranks[rank])
        lines.append(f'  {{ rank=same; {names} }}')
        for f in ranks[rank]:
            label = f if rank >= 0 else "include/nodus (C API types)"
            lines.append(f'  "{f}" [label="{label}\\nlayer {rank}"];')
    for (a, b), n in sorted(edges.items()):
        if a in ("tests", "examples") or b in ("tests", "examples"):
            continue
        lines.append(f'  "{a}" -> "{b}" [label="{n}"];')
    lines.append("}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    args = sys.argv[1:]
    dot = None
    if len(args) >= 2 and args[0] == "--dot":
        dot, args = args[1], args[2:]
    repo = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    bad = []
    edges = {}
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
                        if theirs[0] != mine[0]:
                            edges[(mine[0], theirs[0])] = edges.get((mine[0], theirs[0]), 0) + 1
                        if theirs[1] > mine[1] or (theirs[1] == mine[1] and theirs[0] != mine[0] and mine[1] < 7):
                            bad.append(f"{path}:{lineno}: {mine[0]} (layer {mine[1]}) includes {target} "
                                       f"({theirs[0]}, layer {theirs[1]})")
    if dot:
        write_dot(dot, edges)
    for line in bad:
        print(line)
    print(f"check-layers: {checked} includes checked, {len(bad)} point up or across the layer order")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
