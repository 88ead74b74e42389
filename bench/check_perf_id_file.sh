#!/usr/bin/env bash
# nodus-perf's launcher-less mode (--rank/--nranks/--id-file): three
# processes started by hand, the last ones first (they wait for rank 0's id),
# run -a all with every result checked; rank 0's table must show the three
# processes and no wrong value, and the id file must be gone afterwards. A
# stale id file is refused.
#   bench/check_perf_id_file.sh NODUS-PERF
set -u
perf=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
id=$dir/id
pids=()
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
exit $status
