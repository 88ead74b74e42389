#!/usr/bin/env bash
# nodus-perf's launcher-less mode (--rank/--nranks/--id-file): three
# processes started by hand, the last ones first (they wait for rank 0's id),
# run -a all with every result checked; rank 0's table must show the three
# processes and no wrong value, and the id file must be gone afterwards. A
# stale id file is refused; a rank 0 terminated while it waits for the
# others removes its id file.
#   bench/check_perf_id_file.sh NODUS-PERF
set -u
perf=$1
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$dir"' EXIT
export NODUS_TIMEOUT_MS=${NODUS_TIMEOUT_MS:-60000}
id=$dir/id
for r in 2 1 0; do
  "$perf" --rank "$r" --nranks 3 --id-file "$id" -a all --coll allreduce,allgather,broadcast \
    -b 8 -e 64K -f 8 -n 2 -w 1 -c 1 > "$dir/rank$r.out" 2>&1 &
  pids[$r]=$!
  [ "$r" -ne 0 ] && sleep 0.3
done
status=0
for r in 0 1 2; do
  wait "${pids[$r]}" || { echo "rank $r exited $?"; status=1; }
done
cat "$dir/rank0.out"
for r in 1 2; do
  [ -s "$dir/rank$r.out" ] && { echo "rank $r printed:"; cat "$dir/rank$r.out"; }
done
grep -q '3 ranks (processes started without a launcher)' "$dir/rank0.out" || { echo "no 3-process header"; status=1; }
[ "$(grep -c '^#  Rank ' "$dir/rank0.out")" -eq 3 ] || { echo "not three rank lines"; status=1; }
grep -q 'Wrong values, all collectives: 0 OK' "$dir/rank0.out" || { echo "wrong values, or no summary"; status=1; }
[ -e "$id" ] && { echo "the id file was left behind"; status=1; }
# An id file that is already there (an earlier run's): refused, not used.
touch "$id"
if "$perf" --rank 0 --nranks 2 --id-file "$id" > "$dir/stale.out" 2>&1; then
  echo "a stale id file was accepted"; status=1
fi
grep -q 'exists already' "$dir/stale.out" || { echo "no word on the stale id file:"; cat "$dir/stale.out"; status=1; }
rm -f "$id"
# Rank 0 alone, terminated while it waits for rank 1: its id file goes with it.
"$perf" --rank 0 --nranks 2 --id-file "$id" > "$dir/term.out" 2>&1 &
pids[3]=$!
for _ in $(seq 100); do [ -e "$id" ] && break; sleep 0.1; done
if [ ! -e "$id" ]; then
  echo "rank 0 published no id file:"; cat "$dir/term.out"; status=1
else
  kill -TERM "${pids[3]}"
  wait "${pids[3]}" 2>/dev/null
  [ -e "$id" ] && { echo "a terminated rank 0 left its id file behind"; status=1; }
fi
exit $status
