#!/usr/bin/env python3
"""Paired ratios of two builds' nodus-perf CSVs (bench/compare_builds.sh).

Usage: compare_builds.py OUT.csv PAIR_DIR...
Each PAIR_DIR holds old.csv and new.csv of one pair of runs. For every
(collective, size, placement, algorithm) the ratio old time / new time is
taken per pair (> 1: the new build is faster); the table gives the median,
min and max over pairs, and per collective the geometric mean of the
per-size medians.
"""
import csv
import math
import statistics
import sys


def load(path):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = (r["collective"], int(r["size_bytes"]), r["placement"], r.get("algo", ""))
            rows[key] = float(r["time_us"])
    return rows


def main():
    out, dirs = sys.argv[1], sys.argv[2:]
    ratios = {}
    for d in dirs:
        old, new = load(f"{d}/old.csv"), load(f"{d}/new.csv")
        for key in old.keys() & new.keys():
            if new[key] > 0 and old[key] > 0:
                ratios.setdefault(key, []).append(old[key] / new[key])
    if not ratios:
        print("compare_builds: no rows in common between the two builds' CSVs")
        return 1
    algos = {k[3] for k in ratios}
    show_algo = len(algos) > 1
    header = f"{'collective':<14}{'size (B)':>12}  {'placement':<13}" + (f"{'algo':<18}" if show_algo else "") + \
             f"{'old/new median':>15}{'min':>8}{'max':>8}{'pairs':>7}"
    print(header)
    print("-" * len(header))
    per_coll = {}
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["collective", "size_bytes", "placement", "algo", "median_ratio", "min_ratio", "max_ratio", "pairs"])
        for key in sorted(ratios, key=lambda k: (k[0], k[3], k[2], k[1])):
            rs = ratios[key]
            med = statistics.median(rs)
            per_coll.setdefault(key[0], []).append(med)
            flag = "  <0.90" if med < 0.90 else ""
            print(f"{key[0]:<14}{key[1]:>12}  {key[2]:<13}" + (f"{key[3]:<18}" if show_algo else "") +
                  f"{med:>15.3f}{min(rs):>8.3f}{max(rs):>8.3f}{len(rs):>7}{flag}")
            w.writerow([key[0], key[1], key[2], key[3], f"{med:.4f}", f"{min(rs):.4f}", f"{max(rs):.4f}", len(rs)])
    print()
    print("geometric mean of the per-size medians (old time / new time; > 1: new is faster)")
    for coll, meds in sorted(per_coll.items()):
        g = math.exp(sum(math.log(m) for m in meds) / len(meds))
        print(f"  {coll:<14} {g:.3f}  over {len(meds)} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
