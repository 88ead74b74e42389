#!/usr/bin/env bash
# The opt-in sweep behind the issue's tables (minutes to hours, not for CI):
#   torus-*     8x8x8 and 16x16x16 tori at 256 MiB: ring vs torus vs the bound,
#               as the executor runs the plans today and with the proposed fixes
#   small-*     small-message latency: torus vs the double binary tree
#   fattree-*   512-host 2-level and 4096-host 3-level fat-trees, 8 B to 1 GiB:
#               every algorithm, the tuner's pick vs the best, the tuner's error
#   *-fixed, *-r4  the same with the proposed plan / executor changes (README)
#
#   sim/sweep.sh [NAME...]        all tables, or the named ones
#
# Environment: BUILD (build directory, default build), OUT (results, default
# sim-sweep), JOBS (simulations at once, default: the CPU count), TIMEOUT
# (seconds per simulation, default 1800), BIG_SLICE (pipelining slice for the
# 4096-rank runs at 256 MiB and up, default 1M: 128K there means tens of
# millions of simulated messages), FLAT_RING_4096=1 to include the flat ring
# on 4096 ranks (2 x 4095 steps per rank: very slow).
# Progress goes to stderr; each table to $OUT/NAME.txt (RESULT lines and the
# tables), and $OUT/summary.txt collects the tables.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$here/build}
OUT=${OUT:-sim-sweep}
JOBS=${JOBS:-$(nproc)}
TIMEOUT=${TIMEOUT:-1800}
BIG_SLICE=${BIG_SLICE:-1M}
SIM=$BUILD/sim/nodus-sim
[ -x "$SIM" ] || { echo "sweep: $SIM not found (build the nodus-sim target; needs libsimgrid-dev)" >&2; exit 1; }
mkdir -p "$OUT"
# The fabric comes from --fabric; the runtime's variables must not override it.
unset NODUS_TOPO_FILE NODUS_TORUS_DIMS NODUS_FATTREE NODUS_ALGO || true

selected=("$@")
is_selected() {
  [ ${#selected[@]} -eq 0 ] && return 0
  local n
  for n in "${selected[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

run() {
  local name=$1
  shift
  is_selected "$name" || return 0
  echo "== $name: nodus-sim $*" >&2
  local start=$SECONDS
  "$SIM" --sweep -j "$JOBS" --timeout "$TIMEOUT" "$@" > "$OUT/$name.txt" || true
  echo "== $name done in $((SECONDS - start)) s" >&2
  { echo "### $name: nodus-sim $*"; grep -v '^RESULT' "$OUT/$name.txt"; echo; } >> "$OUT/summary.txt"
}

: > "$OUT/summary.txt"

# Tori at 256 MiB. "streams" interleaves the torus plan's stream steps;
# --round-slices C lets the cursor take C slices of a step per round (both
# proposals; see sim/README.md).
run torus-8x8x8 --fabric torus:8x8x8 -b 256M -a ring,torus
run torus-8x8x8-streams --fabric torus:8x8x8 -b 256M -a torus --reorder streams
run torus-8x8x8-streams-r4 --fabric torus:8x8x8 -b 256M -a torus --reorder streams --round-slices 4
run torus-8x8x8-1M --fabric torus:8x8x8 -b 256M -a ring,torus --reorder streams --slice-bytes 1M
run torus-16x16x16 --fabric torus:16x16x16 -b 256M -a torus --slice-bytes "$BIG_SLICE"
run torus-16x16x16-streams --fabric torus:16x16x16 -b 256M -a torus --reorder streams --slice-bytes "$BIG_SLICE"
if [ "${FLAT_RING_4096:-0}" = 1 ]; then
  run torus-16x16x16-ring --fabric torus:16x16x16 -b 256M -a ring --slice-bytes "$BIG_SLICE"
fi

# Small messages: torus (as run today and interleaved) vs tree.
run small-8x8x8 --fabric torus:8x8x8 -b 8 -e 64K -f 8 -a tree,halving-doubling,torus
run small-8x8x8-streams --fabric torus:8x8x8 -b 8 -e 64K -f 8 -a torus --reorder streams
run small-16x16x16 --fabric torus:16x16x16 -b 8 -e 64K -f 8 -a tree,halving-doubling,torus
run small-16x16x16-streams --fabric torus:16x16x16 -b 8 -e 64K -f 8 -a torus --reorder streams

# Fat-trees, 8 B to 1 GiB: every algorithm that runs there (the sweep adds
# the tuner's pick). 4096 ranks: the flat ring only with FLAT_RING_4096=1.
run fattree-512 --fabric fattree:16x32 -b 8 -e 1G -f 8 -a all
ft4096=tree,halving-doubling
[ "${FLAT_RING_4096:-0}" = 1 ] && ft4096=all
run fattree-4096 --fabric fattree:16x16x16 -b 8 -e 64M -f 8 -a "$ft4096"
run fattree-4096-big --fabric fattree:16x16x16 -b 256M -e 1G -f 4 -a "$ft4096" --slice-bytes "$BIG_SLICE"

# The same with the proposed fixes: the tree as four lanes (each tree's up
# and down), the torus streams interleaved; and the cursor taking 4 slices a
# round (an executor change) for the bandwidth-bound algorithms.
run fattree-512-fixed --fabric fattree:16x32 -b 8 -e 1G -f 8 -a all --reorder all
run fattree-512-r4 --fabric fattree:16x32 -b 2M -e 1G -f 8 -a ring,halving-doubling --round-slices 4
run fattree-4096-fixed --fabric fattree:16x16x16 -b 8 -e 64M -f 8 -a "$ft4096" --reorder all

echo "sweep: tables in $OUT/summary.txt" >&2
