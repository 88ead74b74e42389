#!/usr/bin/env bash
# nodus-topo end to end: the table, JSON that parses and says what the
# fabric file says, a picture, and a clear failure for a bad file.
set -euo pipefail
topo=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$work/torus.yaml" <<'YAML'
fabric: torus
dims: [3, 3, 3]
link: {bandwidth: 25GB/s, latency: 1us}
YAML
NODUS_TOPO_FILE=$work/torus.yaml "$topo" -e 256M > "$work/table.txt"
grep -q "fabric: torus 3x3x3" "$work/table.txt" || fail "no fabric line"
grep -q "27 rank(s) on 27 host(s)" "$work/table.txt" || fail "no placement"
grep -Eq "AllReduce +134217728 +torus" "$work/table.txt" || fail "torus is not the pick for 128 MiB AllReduce on a torus"

NODUS_TOPO_FILE=$work/torus.yaml "$topo" --json -e 1M > "$work/out.json"
python3 - "$work/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["fabric"]["kind"] == "torus", d["fabric"]
assert len(d["hosts"]) == 27 and d["hosts"][13]["coord"] == [1, 1, 1], d["hosts"][13]
assert sorted(d["ring"]) == list(range(27))
picks = {(c["collective"], c["bytes"]): c for c in d["choices"]}
c = picks[("AllReduce", 8)]
assert c["algorithm"] in c["estimates_us"] and min(c["estimates_us"].values()) == c["estimates_us"][c["algorithm"]], c
PY

NODUS_TORUS_DIMS=2x2 NODUS_ALGO=ring "$topo" -b 1M -e 1M | grep -Eq "AllReduce +1048576 +ring \(forced\)" || fail "NODUS_ALGO not honoured"

NODUS_FATTREE=4x2:4x1 "$topo" --ranks-per-host 2 --dot "$work/f.dot" --svg "$work/f.svg" > /dev/null
grep -q "leaf1 -- spine0" "$work/f.dot" || fail "fat-tree graph lacks its switches"
grep -q "<svg" "$work/f.svg" || fail "no SVG drawn"

# More ranks than the node's logical CPUs: priced as the job would run
# (no polling, ranks sharing cores), where the ring takes large AllGathers.
here=$(cd "$(dirname "$0")/.." && pwd)
NODUS_HWLOC_XML=$here/topo/one-core-vm.xml "$topo" --ranks-per-host 4 -b 1M -e 1M > "$work/over.txt"
grep -q "4 per logical CPU (oversubscribed" "$work/over.txt" || fail "4 ranks on a 1-core node not oversubscribed: $(cat "$work/over.txt")"
grep -Eq "AllGather +1048576 +ring" "$work/over.txt" || fail "oversubscribed 1 MiB AllGather not on the ring"

# --grid: 2 hosts of 4 ranks, tp = 4: every tensor group on one host, every
# rank in one group of each axis, and the picture.
"$topo" --hostnames a,b --hosts 2 --ranks-per-host 4 --grid dp=2,tp=4,pp=1 --dot "$work/grid.dot" > "$work/grid.txt"
grep -q "order chosen tp-pp-dp" "$work/grid.txt" || fail "grid order: $(head -1 "$work/grid.txt")"
grep -q "^  \[0 1 2 3\] | a | 0 |" "$work/grid.txt" || fail "tensor group 0 not on host a: $(cat "$work/grid.txt")"
grep -q "^  \[0 4\] | a,b |" "$work/grid.txt" || fail "data group 0 not across the hosts: $(cat "$work/grid.txt")"
grep -q "cluster_h1" "$work/grid.dot" || fail "grid graph lacks its hosts"
if "$topo" --ranks-per-host 4 --grid dp=3,tp=2 > /dev/null 2> "$work/err.txt"; then fail "a grid of the wrong size was accepted"; fi
grep -q "is 6 ranks; the job has 4" "$work/err.txt" || fail "unclear grid error: $(cat "$work/err.txt")"

printf 'fabric: torus\ndims: [2, 0]\n' > "$work/bad.yaml"
if NODUS_TOPO_FILE=$work/bad.yaml "$topo" > /dev/null 2> "$work/err.txt"; then fail "a bad file was accepted"; fi
grep -q "bad.yaml:2: field 'dims': must be at least 1" "$work/err.txt" || fail "unclear error: $(cat "$work/err.txt")"
echo "nodus-topo: ok"
