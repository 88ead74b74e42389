#!/usr/bin/env bash
# Runs two builds' nodus-perf alternately and prints per-size paired ratios
# (old time / new time: > 1 means NEW is faster) with their geometric mean per
# collective: the way to say what a change did to speed on a shared, noisy
# machine.
#
#   bench/compare_builds.sh OLD_BUILD NEW_BUILD [-n PAIRS] [-o OUTDIR] -- NODUS_PERF_ARGS...
#
# OLD_BUILD and NEW_BUILD are build directories (each with bench/nodus-perf).
# PAIRS (default 4) pairs of runs, the first of each pair alternating between
# the builds. LAUNCH, when set, prefixes every run (e.g. LAUNCH="mpirun -np 2
# --bind-to none"); without it the arguments must start their own ranks
# (-t N). Each run's CSV and output are kept in OUTDIR (default a fresh
# directory under /tmp), with the table as OUTDIR/compare.csv.
set -euo pipefail
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
old=$1 new=$2
shift 2
pairs=4 outdir=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    -n) pairs=$2; shift 2 ;;
    -o) outdir=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "compare_builds: unknown option $1" >&2; usage ;;
  esac
done
[ "${1:-}" = "--" ] || usage
shift
[[ $pairs =~ ^[1-9][0-9]*$ ]] || { echo "compare_builds: -n takes a whole number" >&2; exit 2; }
for b in "$old" "$new"; do
  [ -x "$b/bench/nodus-perf" ] || { echo "compare_builds: $b/bench/nodus-perf is not there (build it first)" >&2; exit 2; }
done
[ -n "$outdir" ] || outdir=$(mktemp -d /tmp/nodus-compare.XXXXXX)
mkdir -p "$outdir"
here=$(cd "$(dirname "$0")" && pwd)
read -r -a launch <<< "${LAUNCH:-}"

run() {  # run WHICH BUILD DIR NODUS_PERF_ARGS...
  local which=$1 build=$2 dir=$3
  shift 3
  if ! "${launch[@]}" "$build/bench/nodus-perf" "$@" --csv "$dir/$which.csv" > "$dir/$which.out" 2>&1; then
    echo "compare_builds: the $which build failed (pair $(basename "$dir")); its output:" >&2
    tail -20 "$dir/$which.out" >&2
    exit 1
  fi
}

dirs=()
for ((i = 1; i <= pairs; i++)); do
  d="$outdir/pair$i"
  mkdir -p "$d"
  if ((i % 2)); then order=(old new); else order=(new old); fi
  for which in "${order[@]}"; do
    if [ "$which" = old ]; then b=$old; else b=$new; fi
    printf 'compare_builds: pair %d/%d, %s build (%s)\n' "$i" "$pairs" "$which" "$b" >&2
    run "$which" "$b" "$d" "$@"
  done
  dirs+=("$d")
done
python3 "$here/compare_builds.py" "$outdir/compare.csv" "${dirs[@]}"
echo "(runs and compare.csv in $outdir)"
