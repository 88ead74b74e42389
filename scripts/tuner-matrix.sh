#!/bin/bash
# Prints nodus-topo's choice and every estimate (JSON) for a matrix of fabrics,
# rank layouts and settings: run it on two builds and cmp the outputs to show
# that a change leaves the tuner's picks and prices alone.
#   scripts/tuner-matrix.sh NODUS_TOPO_BIN OUT
set -u
[ $# -eq 2 ] || { sed -n '2,5p' "$0"; exit 2; }
bin=$1; out=$2; : > "$out"
# run [VAR=value ...] [nodus-topo options]: the settings go into the environment.
run() {
  local vars=()
  while [ $# -gt 0 ] && [[ $1 == *=* ]]; do vars+=("$1"); shift; done
  echo "== ${vars[*]} $*" >> "$out"
  env NODUS_TOPO_FILE= NODUS_FATTREE= NODUS_TORUS_DIMS= NODUS_ALGO= "${vars[@]}" "$bin" "$@" -b 8 -e 1G --json 2>&1 |
    sed -n '/"choices"/,$p' >> "$out"
}
for l in 1 2 3 4 8; do run --ranks-per-host $l; done
for h in 2 4 8; do for l in 1 2 4; do run --hosts $h --ranks-per-host $l; done; done
for d in 2x2 2x3 4x4 4x4x4 8x8x8; do for l in 1 2; do run NODUS_TORUS_DIMS=$d --ranks-per-host $l; done; done
for f in 2x2 4x4 8x8; do for l in 1 4; do run NODUS_FATTREE=$f --ranks-per-host $l; done; done
run NODUS_SLICE_BYTES=32K --hosts 4 --ranks-per-host 2
run NODUS_CHANNELS=2 --hosts 4 --ranks-per-host 1
run NODUS_ROUND_SLICES=1 NODUS_TORUS_DIMS=4x4x4 --ranks-per-host 1
