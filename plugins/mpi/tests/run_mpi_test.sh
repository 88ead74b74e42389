#!/usr/bin/env bash
# Runs one of the plugin's test programs under mpirun (ctest calls this).
#
#   run_mpi_test.sh --mode preload|plain|compare --np N --lib libnodus_mpi.so
#                   [--env K=V]... [--expect REGEX] -- mpirun [flags] prog [args]
#
#   preload  with LD_PRELOAD=lib; the program must pass (and REGEX, if given,
#            must appear in its output)
#   plain    without it; the program must pass
#   compare  both; both must pass and print the same result digest
#
# Every run is bounded by `timeout` so a hang cannot outlive the test.
set -u

mode="" np="" lib="" expect=""
envs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) mode=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "run_mpi_test.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "run_mpi_test.sh: no command after --" >&2; exit 2; }
launcher=$1
shift

# One run; its output goes to stdout and to the file $2.
run() {
  local preload=$1 out=$2
  shift 2
  local xs=()
  for e in "${envs[@]}"; do xs+=(-x "$e"); done
  if [ "$preload" = 1 ]; then
    xs+=(-x "LD_PRELOAD=$lib" -x NODUS_MPI_TEST_EXPECT_PRELOAD=1)
  else
    xs+=(-x NODUS_MPI_TEST_EXPECT_PRELOAD=0)
  fi
  echo "== $( [ "$preload" = 1 ] && echo preloaded || echo plain ): $launcher ${xs[*]} $*"
  timeout -k 10 240 "$launcher" "${xs[@]}" "$@" >"$out" 2>&1
  local rc=$?
  cat "$out"
  if [ $rc -ne 0 ]; then echo "== exit status $rc"; return 1; fi
  if ! grep -q "ALL OK" "$out"; then echo "== the program did not report ALL OK"; return 1; fi
  return 0
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
case "$mode" in
  preload|plain)
    run "$([ "$mode" = preload ] && echo 1 || echo 0)" "$tmp/out" "$@" || status=1
    if [ -n "$expect" ] && ! grep -Eq "$expect" "$tmp/out"; then
      echo "== expected output matching: $expect"
      status=1
    fi
    ;;
  compare)
    run 0 "$tmp/plain" "$@" || status=1
    run 1 "$tmp/preload" "$@" || status=1
    a=$(grep '^digest:' "$tmp/plain") b=$(grep '^digest:' "$tmp/preload")
    if [ -z "$a" ] || [ "$a" != "$b" ]; then
      echo "== results differ with and without the preload: plain '$a', preloaded '$b'"
      status=1
    else
      echo "== identical results with and without the preload ($a)"
    fi
    ;;
  *) echo "run_mpi_test.sh: --mode must be preload, plain or compare" >&2; exit 2 ;;
esac
exit $status
