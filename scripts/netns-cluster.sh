#!/usr/bin/env bash
# A cluster of "hosts" on this machine: one network namespace per host, its
# eth0 a veth into a bridge that lives in a namespace of its own (nothing is
# added, addressed or routed in the namespace this script starts in), and a
# UTS namespace per host (its own hostname, so nodus sees another machine:
# tcp between hosts, shm between ranks of one host). Ranks find each other
# with the unique-id bootstrap (rank 0 writes the id to a file the others
# read). Everything is torn down on exit, whatever happens (trap).
#
#   sudo scripts/netns-cluster.sh [-H HOSTS] [-r RANKS_PER_HOST] [-m MODE] [-s] [-c COUNT] [-R RATE] [-k]
#                                 [-- NODUS-PERF OPTIONS]
#     -H  hosts (default 2)     -r  ranks per host (default 1)
#     -m  what the ranks run:
#         allreduce  examples/uid_allreduce.c: checked AllReduce calls of
#                    COUNT floats and their busbw (the default)
#         matrix     every collective x type x op x placement x count of the
#                    core tests, checked (tests/cluster_rank.cc)
#         kill       checked AllReduce calls until the script kills every
#                    rank of the last host (SIGKILL, once all ranks are
#                    running); every other rank must fail within
#                    NODUS_TIMEOUT_MS (default here 10000) and 3 s to spare
#         cut        the same, but the last host's link goes down instead
#                    (no reset reaches anyone: only the timeout can tell);
#                    every rank, that host's included, must fail in time
#         perf       nodus-perf, each rank started on its host without a
#                    launcher (--rank/--nranks/--id-file), with the options
#                    after `--` (default: allreduce and allgather, 1 MiB to
#                    4 x COUNT bytes, x4, checked); rank 0's table, and with
#                    -R every size's busbw as a fraction of RATE
#     -s  a stranger: one more namespace on the bridge that, while the job
#         starts and runs, connects to every TCP port any host listens on
#         and sends garbage, or nothing, or hangs up at once; the job must
#         still be right and some rank must have logged a refusal
#     -c  floats per AllReduce (default 1M)
#     -R  shape each host's link, both directions, to RATE (tc units: 1gbit,
#         500mbit) with HTB and a short pfifo (this kernel has no netem, and
#         tbf would queue ACKs behind data); each rank's line then also gives
#         its busbw as a fraction of RATE
#     -k  keep going: do not tear down until Enter is pressed (to look around
#         with `ip netns exec`)
#   Extra environment (NODUS_DEBUG=INFO, NODUS_NSOCKS...) is passed to every
#   rank; NODUS_BUILD_DIR names the build (default build/), NODUS_PERF the
#   nodus-perf binary (default: the build's bench/nodus-perf). Exit status 77:
#   namespaces cannot be made here (not root, or a container without them).
set -euo pipefail
cd "$(dirname "$0")/.."

hosts=2 rpn=1 count=$((1 << 20)) keep=0 rate="" mode=allreduce stranger=0
while getopts "H:r:m:sc:R:kh" opt; do
  case $opt in
    H) hosts=$OPTARG ;;
    r) rpn=$OPTARG ;;
    m) mode=$OPTARG ;;
    s) stranger=1 ;;
    c) count=$OPTARG ;;
    R) rate=$OPTARG ;;
    k) keep=1 ;;
    *) sed -n "2,44p" "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
perf_args=("$@")
case $mode in
  allreduce | matrix | kill | cut | perf) ;;
  *) echo "netns-cluster: unknown mode '$mode' (allreduce, matrix, kill, cut, perf)" >&2; exit 2 ;;
esac
if [ "$mode" != perf ] && [ ${#perf_args[@]} -gt 0 ]; then echo "netns-cluster: options after -- are for -m perf" >&2; exit 2; fi
for v in "$hosts" "$rpn" "$count"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "netns-cluster: -H, -r and -c take a whole number above 0, not '$v'" >&2; exit 2; }
done
fails=0; [ "$mode" = kill ] || [ "$mode" = cut ] && fails=1  # the ranks must fail
if [ "$fails" -eq 1 ] && [ "$hosts" -lt 2 ]; then echo "netns-cluster: -m $mode needs 2 hosts or more" >&2; exit 2; fi
# 77: cannot run here (the test driver counts it as skipped).
[ "$(id -u)" -eq 0 ] || { echo "netns-cluster: needs root (network and UTS namespaces)" >&2; exit 77; }
probe="ndprobe$$"
if ! ip netns add "$probe" 2>/dev/null; then echo "netns-cluster: cannot make network namespaces here" >&2; exit 77; fi
ip netns del "$probe"
unshare --uts true 2>/dev/null || { echo "netns-cluster: cannot make UTS namespaces here" >&2; exit 77; }
build=${NODUS_BUILD_DIR:-build}
[ -f "$build/libnodus.so" ] || { echo "netns-cluster: build first ($build/libnodus.so)" >&2; exit 2; }

tag="nd$$"                      # unique per run: parallel runs do not collide
switch="${tag}sw"
work=$(mktemp -d "/tmp/nodus-netns-XXXXXX")
made_ns=() mounted=() pids=()

cleanup() {
  local rc=$?
  set +e
  for p in "${pids[@]}" ${stranger_pid:-}; do kill -9 "$p" 2>/dev/null; done
  for m in "${mounted[@]}"; do umount "$m" 2>/dev/null; done
  umount "$work" 2>/dev/null
  for ns in "${made_ns[@]}"; do ip netns del "$ns" 2>/dev/null; done  # takes its veth ends along
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT INT TERM HUP

build=$(cd "$build" && pwd)
# The build's own copy (built with its flags, sanitizers included) when it has one.
if [ "$mode" = perf ]; then
  perf=${NODUS_PERF:-$build/bench/nodus-perf}
  unset NODUS_PERF  # ours, not the ranks' (nodus would warn of an unknown NODUS_ variable)
  [ -x "$perf" ] || { echo "netns-cluster: -m perf needs nodus-perf ($perf; the benchmarks' build)" >&2; exit 2; }
  cp "$perf" "$work/nodus-perf"
  [ ${#perf_args[@]} -gt 0 ] || perf_args=(--coll allreduce,allgather -b 1M -e $((4 * count)) -f 4 -n 10 -w 2 -c 1)
elif [ "$mode" != allreduce ]; then
  [ -x "$build/tests/cluster_rank" ] || { echo "netns-cluster: -m $mode needs $build/tests/cluster_rank (the tests' build)" >&2; exit 2; }
  cp "$build/tests/cluster_rank" "$work/cluster_rank"
elif [ -x "$build/tests/uid_allreduce" ]; then
  cp "$build/tests/uid_allreduce" "$work/uid_allreduce"
else
  cc -O2 -I include examples/uid_allreduce.c -L "$build" -lnodus -Wl,-rpath,"$build" -o "$work/uid_allreduce"
fi

# HTB at RATE on a device's egress, each class with a short pfifo. Small
# packets (IP length < 128: pure ACKs) get a class of their own served first,
# so that a direction full of data does not hold back the ACKs of the other
# and halve TCP's throughput (one FIFO would queue them behind ~64 data
# packets: tbf's problem again).
shape() {
  local ns=$1 dev=$2 bits
  bits=$(rate_bits "$rate")
  ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: htb default 20
  ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:1 htb rate "${bits}bit" burst 64k quantum 65536
  ip netns exec "$ns" tc class add dev "$dev" parent 1:1 classid 1:10 htb rate "$((bits / 20))bit" ceil "${bits}bit" \
    prio 0 quantum 1514
  ip netns exec "$ns" tc class add dev "$dev" parent 1:1 classid 1:20 htb rate "$((bits - bits / 20))bit" \
    ceil "${bits}bit" prio 1 burst 64k quantum 65536
  ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:10 handle 10: pfifo limit 64
  ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:20 handle 20: pfifo limit 64
  ip netns exec "$ns" tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 match u16 0x0000 0xff80 at 2 flowid 1:10
}
# A tc rate (1gbit, 500mbit, 100mbps...) in bits per second.
rate_bits() {
  awk -v r="$1" 'BEGIN { n = r + 0; u = tolower(substr(r, length(n "") + 1));
    m = u ~ /^gbit/ ? 1e9 : u ~ /^mbit/ ? 1e6 : u ~ /^kbit/ ? 1e3 : u ~ /^gbps/ ? 8e9 : u ~ /^mbps/ ? 8e6 : u ~ /^kbps/ ? 8e3 : 1;
    printf "%.0f", n * m }'
}
# ... and in GB/s (10^9 bytes), for the busbw fraction.
rate_gbs() { awk -v b="$(rate_bits "$1")" 'BEGIN { printf "%.6f", b / 8e9 }'; }

# unshare --uts=FILE keeps a namespace alive by bind-mounting it on FILE,
# which must sit on a private mount.
mount --bind "$work" "$work"
mount --make-private "$work"

ip netns add "$switch"; made_ns+=("$switch")
ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up
for ((h = 0; h < hosts; ++h)); do
  ns="${tag}h$h"
  ip netns add "$ns"; made_ns+=("$ns")
  # Both ends are created inside the switch namespace, then one moves to the host.
  ip -n "$switch" link add "p$h" type veth peer name "eth0h$h"
  ip -n "$switch" link set "eth0h$h" netns "$ns"
  ip -n "$switch" link set "p$h" master br0 up
  ip -n "$ns" link set "eth0h$h" name eth0
  ip -n "$ns" addr add "10.77.0.$((h + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  if [ -n "$rate" ]; then
    shape "$ns" eth0        # host -> switch
    shape "$switch" "p$h"   # switch -> host
  fi
  touch "$work/uts$h"
  unshare --uts="$work/uts$h" hostname "nodus-host$h"; mounted+=("$work/uts$h")
done

# The stranger's namespace: one more port on the bridge.
if [ "$stranger" -eq 1 ]; then
  ns="${tag}x"
  ip netns add "$ns"; made_ns+=("$ns")
  ip -n "$switch" link add px type veth peer name eth0x
  ip -n "$switch" link set eth0x netns "$ns"
  ip -n "$switch" link set px master br0 up
  ip -n "$ns" link set eth0x name eth0
  ip -n "$ns" addr add 10.77.0.250/24 dev eth0
  ip -n "$ns" link set eth0 up
fi
# Until $work/stop exists: every TCP port a host listens on gets, from the
# stranger's namespace, 256 random bytes, a connection that says nothing for
# a second, and one closed at once. Counts its connections in $work/probes.
probe_listeners() {
  set +e  # a refused or silent connection is what it is after
  local h ip port n=0
  while [ ! -e "$work/stop" ]; do
    for ((h = 0; h < hosts; ++h)); do
      ip=10.77.0.$((h + 1))
      for port in $(ip netns exec "${tag}h$h" ss -ltnH 2>/dev/null | awk '{ sub(/.*:/, "", $4); print $4 }'); do
        ip netns exec "${tag}x" timeout 2 bash -c "exec 3<>/dev/tcp/$ip/$port && head -c 256 /dev/urandom >&3" 2>/dev/null &&
          n=$((n + 1))
        ip netns exec "${tag}x" timeout 1 bash -c "exec 3<>/dev/tcp/$ip/$port && sleep 1" 2>/dev/null
        [ $? -eq 124 ] && n=$((n + 1))
        ip netns exec "${tag}x" timeout 2 bash -c "exec 3<>/dev/tcp/$ip/$port" 2>/dev/null && n=$((n + 1))
        echo "$n" > "$work/probes"
      done
    done
    sleep 0.02
  done
}

nranks=$((hosts * rpn))
# Under AddressSanitizer (scripts/test.sh's build-asan), LeakSanitizer's exit
# check crashes in these namespaces on some kernels ("Tracer caught signal
# 11", seen on kernel 6.18 on 2026-12-04, at commits before and after that
# day's changes alike, while the same binary over tcp outside a namespace and
# a small threaded program inside one pass): the ranks run with address
# checks but without the leak check here; the tcp tests outside namespaces
# check the same code for leaks.
if [ -n "${ASAN_OPTIONS:-}" ]; then export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"; fi
# TCP's congestion control in the hosts: a new namespace takes the kernel's
# default (bbr on this project's machines, where sysctl refuses to set cubic
# inside a namespace); shaped-link figures depend on it.
cc=$(ip netns exec "${tag}h0" sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null || echo unknown)
echo "netns-cluster: $hosts host(s) x $rpn rank(s), 10.77.0.1-$hosts on a bridge in namespace $switch${rate:+, links shaped to $rate} (tcp $cc), running $mode$( [ "$stranger" -eq 1 ] && echo ", with a stranger")"
[ "$stranger" -eq 1 ] && { echo 0 > "$work/probes"; probe_listeners & stranger_pid=$!; }
[ "$fails" -eq 1 ] && export NODUS_TIMEOUT_MS=${NODUS_TIMEOUT_MS:-10000}
[ "$mode" = perf ] && export NODUS_TIMEOUT_MS=${NODUS_TIMEOUT_MS:-60000}  # a lost rank ends the run in a minute
for ((r = 0; r < nranks; ++r)); do
  h=$((r / rpn))
  case $mode in
    allreduce) cmd=("$work/uid_allreduce" "$r" "$nranks" "$work/id" "$count") ;;
    matrix) cmd=("$work/cluster_rank" "$r" "$nranks" "$work/id" matrix) ;;
    kill | cut) cmd=("$work/cluster_rank" "$r" "$nranks" "$work/id" survive "$work") ;;
    perf)
      cmd=("$work/nodus-perf" --rank "$r" --nranks "$nranks" --id-file "$work/id" "${perf_args[@]}")
      [ "$r" -eq 0 ] && cmd+=(--csv "$work/perf.csv")
      ;;
  esac
  NODUS_SOCKET_IFNAME=eth0 ip netns exec "${tag}h$h" nsenter --uts="$work/uts$h" "${cmd[@]}" > "$work/rank$r.out" 2>&1 &
  pids+=($!)
  if [ "$r" -eq 0 ] && [ "$stranger" -eq 1 ]; then
    # The others join once the stranger has been at rank 0's bootstrap
    # listener (the job's listeners are open only while it starts).
    for ((waited = 0; waited < 300 && $(cat "$work/probes") < 6; ++waited)); do sleep 0.1; done
  fi
done
status=0
first_victim=$(((hosts - 1) * rpn))
if [ "$fails" -eq 1 ]; then
  # Once every rank has had a call right, the last host goes away.
  for ((waited = 0; waited < 600; ++waited)); do
    running=$(find "$work" -maxdepth 1 -name 'running.*' | wc -l)
    [ "$running" -eq "$nranks" ] && break
    sleep 0.1
  done
  [ "$running" -eq "$nranks" ] || { echo "netns-cluster: only $running of $nranks ranks got going" >&2; status=1; }
  sleep 0.3
  killed_at=$(date +%s%3N)
  if [ "$mode" = kill ]; then
    for ((r = first_victim; r < nranks; ++r)); do kill -9 "${pids[$r]}"; done
    echo "netns-cluster: killed the ranks of nodus-host$((hosts - 1)) (ranks $first_victim-$((nranks - 1)))"
  else
    ip -n "${tag}h$((hosts - 1))" link set eth0 down
    echo "netns-cluster: cut the link of nodus-host$((hosts - 1)) (ranks $first_victim-$((nranks - 1)))"
  fi
fi
for ((r = 0; r < nranks; ++r)); do
  if [ "$fails" -eq 1 ]; then
    rc=0
    { wait "${pids[$r]}"; } 2>/dev/null || rc=$?  # no "Killed" line from bash for the victims
    cat "$work/rank$r.out"
    if [ "$mode" = kill ] && ((r >= first_victim)); then continue; fi
    at=$(sed -n 's/^rank [0-9]* failed at \([0-9]*\):.*/\1/p' "$work/rank$r.out")
    if [ "$rc" -ne 1 ] || [ -z "$at" ]; then
      echo "netns-cluster: rank $r did not fail as it should (exit $rc)" >&2; status=1
    elif ((at - killed_at > NODUS_TIMEOUT_MS + 3000)); then
      echo "netns-cluster: rank $r failed $((at - killed_at)) ms after the $mode (NODUS_TIMEOUT_MS=$NODUS_TIMEOUT_MS)" >&2; status=1
    else
      echo "  rank $r failed $((at - killed_at)) ms after the $mode"
    fi
    continue
  fi
  wait "${pids[$r]}" || status=1
  if [ "$mode" = perf ]; then
    cat "$work/rank$r.out"
    if [ "$r" -eq 0 ] && [ -n "$rate" ] && [ -s "$work/perf.csv" ]; then
      # busbw per collective, size and placement, as a fraction of the link.
      awk -F, -v l="$(rate_gbs "$rate")" -v rate="$rate" '
        NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
        { printf "  %-14s %12s B %-6s busbw %.3f GB/s = %3.0f%% of the %s link\n", $col["collective"],
            $col["size_bytes"], $col["placement"], $col["busbw_gbps"], 100 * $col["busbw_gbps"] / l, rate }' "$work/perf.csv"
    fi
  elif [ -n "$rate" ]; then
    link=$(rate_gbs "$rate")
    while IFS= read -r line; do
      echo "$line"
      if [[ $line =~ \(([0-9.]+)\ GB/s\ busbw\) ]]; then
        awk -v b="${BASH_REMATCH[1]}" -v l="$link" 'BEGIN { printf "  busbw %.3f GB/s = %.0f%% of the %.3f GB/s link\n", b, 100 * b / l, l }'
      fi
    done < "$work/rank$r.out"
  else
    cat "$work/rank$r.out"
  fi
done
pids=()
if [ "$stranger" -eq 1 ]; then
  touch "$work/stop"
  wait "$stranger_pid" 2>/dev/null || true
  stranger_pid=""
  probes=$(cat "$work/probes")
  refused=$(cat "$work"/rank*.out | grep -c "refused" || true)
  echo "netns-cluster: the stranger made $probes connection(s); the ranks logged $refused refusal(s)"
  if [ "$probes" -eq 0 ] || [ "$refused" -eq 0 ]; then
    echo "netns-cluster: the stranger never reached a listener, or no rank noticed it" >&2; status=1
  fi
fi
[ "$keep" -eq 1 ] && read -r -p "namespaces ${tag}* kept; Enter tears them down " _
if [ "$fails" -eq 1 ]; then
  [ "$status" -eq 0 ] && echo "netns-cluster: every rank that should fail failed in time" || echo "netns-cluster: some rank did not fail in time" >&2
else
  [ "$status" -eq 0 ] && echo "netns-cluster: every rank right" || echo "netns-cluster: some rank failed" >&2
fi
exit $status
