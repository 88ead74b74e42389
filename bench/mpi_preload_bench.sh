#!/usr/bin/env bash
# Times an unmodified MPI collective benchmark (mpi-coll-bench) with the MPI
# library alone and with libnodus_mpi preloaded, and prints both tables and
# their ratio per size.
#
#   bench/mpi_preload_bench.sh [options] [-- mpi-coll-bench options]
#
#   -n NP        ranks (default 2)
#   -B DIR       build directory (default: build)
#   -r ROUNDS    plain and preloaded runs alternate this many times; each size
#                keeps its best median over the rounds, and the median of
#                the rounds' own ratios (default 2)
#   -a           also a preloaded run with NODUS_MPI_MIN_BYTES=0 (nodus at
#                every size), to see where the threshold belongs
#   -c           control: a second plain MPI run each round, and its paired
#                ratio against the first (column A/A): how far from 1.00 a
#                ratio strays when both sides run the same library
#   -o DIR       keep the CSV files there (default: a temporary directory);
#                runs accumulate, and the table takes the best over all of them
#   -R           no new runs: print the table of what DIR already holds
#
# The benchmark's own defaults: AllReduce and AllGather, 8 B to 64 MiB, x2,
# out of place; e.g. `-- -p both -c all -e 16M` changes them. ratio = MPI
# time / preloaded time (above 1: the preload is faster).
set -euo pipefail
cd "$(dirname "$0")/.."

np=2 build=build rounds=2 all=0 control=0 out="" reportOnly=0
while getopts "n:B:r:aco:Rh" opt; do
  case $opt in
    n) np=$OPTARG ;;
    B) build=$OPTARG ;;
    r) rounds=$OPTARG ;;
    a) all=1 ;;
    c) control=1 ;;
    o) out=$OPTARG ;;
    R) reportOnly=1 ;;
    h) sed -n '2,24p' "$0"; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift

bench=$build/bench/mpi-coll-bench
lib=$build/plugins/mpi/libnodus_mpi.so
for f in "$bench" "$lib"; do
  [ -e "$f" ] || { echo "mpi_preload_bench.sh: $f not found (build first: cmake --build $build)" >&2; exit 1; }
done
lib=$(readlink -f "$lib")
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

# The flags users never type: root in containers, more ranks than cores.
# mpirun's own binding (a core per rank while there are enough) for both
# runs: nodus keeps a launcher's binding, so the ratio compares the
# libraries, not one bound run with one unbound (unbound, Open MPI's 8 B
# Allgather here takes 0.5 us, bound 0.2 us).
launch=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$np")

run() {  # name, then extra mpirun arguments
  local name=$1
  shift
  echo "== $name (round $r of $rounds)"
  "${launch[@]}" "$@" "$bench" --csv "$out/$name.$$-$r.csv" "${benchArgs[@]}"
}

benchArgs=("$@")
if [ "$reportOnly" = 0 ]; then
  for r in $(seq 1 "$rounds"); do
    run mpi
    # The control runs as close to the plain run as the preloaded one does
    # (alternating which goes first), so its ratio sees the same drift.
    if [ "$control" = 1 ] && [ $((r % 2)) = 0 ]; then run mpi-again; fi
    run nodus -x LD_PRELOAD="$lib" -x NODUS_MPI_VERBOSE=1
    if [ "$control" = 1 ] && [ $((r % 2)) = 1 ]; then run mpi-again; fi
    if [ "$all" = 1 ]; then run nodus-all -x LD_PRELOAD="$lib" -x NODUS_MPI_MIN_BYTES=0; fi
  done
fi
ls "$out"/nodus-all.*.csv >/dev/null 2>&1 && all=1
ls "$out"/mpi-again.*.csv >/dev/null 2>&1 && control=1

# Best median per (collective, placement, size) over the rounds, then the ratio.
best() {  # name -> "coll,place,size time busbw wrong" lines
  cat "$out/$1".*.csv | awk -F, 'NF == 12 && $1 != "collective" {
      k = $1 "," $4 "," $5
      if (!(k in t) || $8 < t[k]) { t[k] = $8; bw[k] = $11 }
      if ($12 + 0 != 0) wrong[k] = 1
    } END { for (k in t) printf "%s %s %s %d\n", k, t[k], bw[k], (k in wrong) }' | sort -t, -k1,1 -k2,2 -k3,3n
}
# The median over rounds of each round's own ratio: a plain run and the
# preloaded run after it see the same state of the machine (this one flips
# between a fast and a slow mode within minutes: the host runs the two vCPUs
# on one CCD or on two, 0.17 or 0.5 us core to core), which the best times
# of either side, taken from different rounds, do not. Separate processes
# can still sit in different modes: nodus-perf --baseline mpi times both
# libraries in one process.
paired() {  # name -> "coll,place,size median-ratio" lines
  awk -F, -v name="$1" 'FNR == 1 {
      f = FILENAME; sub(/.*\//, "", f); side = f; sub(/\..*/, "", side); round = substr(f, length(side) + 2)
    }
    NF == 12 && $1 != "collective" { t[side, round, $1 "," $4 "," $5] = $8; keys[$1 "," $4 "," $5] = 1; rounds[round] = 1 }
    END {
      for (k in keys) {
        n = 0
        for (r in rounds)
          if (("mpi", r, k) in t && (name, r, k) in t && t[name, r, k] > 0) v[++n] = t["mpi", r, k] / t[name, r, k]
        for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
        if (n > 0) printf "%s %.4f\n", k, n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      }
    }' "$out"/mpi.*.csv "$out/$1".*.csv | sort -t, -k1,1 -k2,2 -k3,3n
}
best mpi >"$out/mpi.best"
best nodus >"$out/nodus.best"
[ "$all" = 1 ] && best nodus-all >"$out/nodus-all.best"
paired nodus >"$out/nodus.paired"
[ "$all" = 1 ] && paired nodus-all >"$out/nodus-all.paired"
[ "$control" = 1 ] && paired mpi-again >"$out/mpi-again.paired"

echo
echo "# $np ranks; time = best median over $(ls "$out"/mpi.*.csv | wc -l) run(s) of mpi-coll-bench; ratio = MPI time / preloaded time"
echo "# best = of the best times; paired = median over rounds of each round's own ratio (the one to trust on a noisy machine)"
printf "# %-21s %6s %12s %12s %12s %12s %12s %8s %8s" collective place "size(B)" "MPI(us)" "MPI busbw" "nodus(us)" "nodus busbw" best paired
[ "$all" = 1 ] && printf " %12s %8s %8s" "all(us)" "best" "paired"
[ "$control" = 1 ] && printf " %8s" "A/A"
echo
join -j1 <(sed 's/ /|/' "$out/mpi.best" | sort -t'|' -k1,1) <(sed 's/ /|/' "$out/nodus.best" | sort -t'|' -k1,1) -t'|' |
  { if [ "$all" = 1 ]; then join -j1 -t'|' - <(sed 's/ /|/' "$out/nodus-all.best" | sort -t'|' -k1,1); else cat; fi; } |
  tr '|' ' ' | tr ',' ' ' | sort -k1,1 -k2,2 -k3,3n |
  awk -v all="$all" -v control="$control" -v pn="$out/nodus.paired" -v pa="$out/nodus-all.paired" \
      -v pc="$out/mpi-again.paired" 'BEGIN {
      while ((getline l < pn) > 0) { split(l, f, " "); paired[f[1]] = f[2] }
      if (all == 1) while ((getline l < pa) > 0) { split(l, f, " "); pairedAll[f[1]] = f[2] }
      if (control == 1) while ((getline l < pc) > 0) { split(l, f, " "); pairedAA[f[1]] = f[2] }
    } {
      # coll place size  mpi_t mpi_bw mpi_wrong  nodus_t nodus_bw nodus_wrong  [all_t all_bw all_wrong]
      k = $1 "," $2 "," $3
      ratio = $7 > 0 ? $4 / $7 : 0
      printf "  %-21s %6s %12d %12.2f %12.3f %12.2f %12.3f %8.2f %8.2f", $1, $2, $3, $4, $5, $7, $8, ratio, paired[k]
      if (all == 1) printf " %12.2f %8.2f %8.2f", $10, ($10 > 0 ? $4 / $10 : 0), pairedAll[k]
      if (control == 1) { if (k in pairedAA) printf " %8.2f", pairedAA[k]; else printf " %8s", "-" }
      if ($6 || $9 || (all == 1 && $12)) { printf "  WRONG"; bad = 1 }
      printf "\n"
    } END { exit bad }'
echo "# CSV files: $out"
