"""nodus against gloo, through torch.distributed, on the same tensors in the
same run: all_reduce and all_gather from 8 B and 1 KiB to 256 MiB.

    PYTHONPATH=build/plugins/torch/python /usr/bin/python3 bench/torch_vs_gloo.py          # 2 and 4 processes
    /usr/bin/python3 bench/torch_vs_gloo.py -np 2 --max-bytes 64M --coll all_reduce

Each process group is created once (nodus as the default group, gloo as a
second group over the same processes); every size is timed on both,
alternately, on the same tensors. A time is the best of --reps repetitions of
the average over enough iterations to fill about --min-ms; it is the slowest
rank's. Bus bandwidth as nccl-tests reports it: all_reduce size/t * 2(p-1)/p,
all_gather (p * size)/t * (p-1)/p, size being one rank's input. "gloo/nodus" is
gloo's time over nodus's: how many times faster nodus is. nodus binds each
process to its share of the cores when there is a core per process
(NODUS_BIND=auto), so gloo, in the same processes, runs bound alike;
NODUS_BIND=none compares them unbound.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import nodus_torch  # noqa: F401  registers "nodus"


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def show_size(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def sizes(args):
    out = [8] if args.min_bytes > 8 else []
    n = args.min_bytes
    while n <= args.max_bytes:
        out.append(n)
        n *= args.factor
    return out


def timed(fn, iters, gloo):
    """Seconds per call on the slowest rank."""
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=gloo)
    return elapsed.item()


def run(rank, world, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("nodus", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    groups = {"gloo": gloo, "nodus": None}
    # Warm up both backends before the first row (threads started, code and
    # buffers paged in).
    w = torch.ones(2)
    for _ in range(args.warmup):  # a count, not a time: every process must make the same calls
        for g in groups.values():
            dist.all_reduce(w, group=g)
    dist.barrier(group=gloo)
    rows = []
    for coll in args.coll:
        for size in sizes(args):
            if coll == "all_gather" and size > args.gather_max_bytes:
                continue
            n = max(1, size // 4)
            x = torch.ones(n, dtype=torch.float32)
            outs = None
            if coll == "all_gather":
                outs = [torch.empty(n, dtype=torch.float32) for _ in range(world)]
                call = {b: (lambda g=g: dist.all_gather(outs, x, group=g)) for b, g in groups.items()}
            else:
                call = {b: (lambda g=g: dist.all_reduce(x, group=g)) for b, g in groups.items()}
            for b in groups:
                call[b]()  # warm up (connections, staging buffers, page faults)
            best = {}
            for b in groups:  # iterations to fill about min_ms, from one timed call
                one = timed(call[b], 1, gloo)
                best[b] = [float("inf"), max(1, min(args.max_iters, int(args.min_ms / 1000 / max(one, 1e-7))))]
            for _ in range(args.reps):
                for b in groups:
                    best[b][0] = min(best[b][0], timed(call[b], best[b][1], gloo))
            factor = 2 * (world - 1) / world if coll == "all_reduce" else (world - 1)
            row = {"coll": coll, "nprocs": world, "bytes": size}
            for b in groups:
                row[f"{b}_us"] = best[b][0] * 1e6
                row[f"{b}_busbw"] = size * factor / best[b][0] / 1e9
            row["ratio"] = best["gloo"][0] / best["nodus"][0]
            rows.append(row)
            if rank == 0:
                print_row(row, flush=True)
            x = outs = None  # free this size's tensors before the next
    dist.destroy_process_group()
    if rank == 0 and args.json:
        with open(f"{args.json}.np{world}", "w") as f:
            json.dump(rows, f, indent=1)


HEADER = f"{'collective':<11} {'np':>2} {'size':>9} | {'gloo time':>11} {'busbw':>9} | {'nodus time':>11} {'busbw':>9} | {'gloo/nodus':>10}"


def print_row(row, flush=False):
    def t(us):
        return f"{us:9.1f} us" if us < 1e4 else f"{us / 1e3:9.2f} ms"
    print(f"{row['coll']:<11} {row['nprocs']:>2} {show_size(row['bytes']):>9} | {t(row['gloo_us']):>11} "
          f"{row['gloo_busbw']:6.3f} GB/s | {t(row['nodus_us']):>11} {row['nodus_busbw']:6.3f} GB/s | "
          f"{row['ratio']:9.1f}x", flush=flush)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-np", "--nprocs", type=int, nargs="+", default=[2, 4], help="process counts (default 2 4)")
    ap.add_argument("--coll", nargs="+", default=["all_reduce", "all_gather"], choices=["all_reduce", "all_gather"])
    ap.add_argument("-b", "--min-bytes", type=parse_size, default=1 << 10, help="smallest size after 8 B (1K)")
    ap.add_argument("-e", "--max-bytes", type=parse_size, default=256 << 20, help="largest size (256M)")
    ap.add_argument("--gather-max-bytes", type=parse_size, default=256 << 20,
                    help="largest all_gather input (its output is nprocs times that, on every process)")
    ap.add_argument("-f", "--factor", type=int, default=4, help="size step factor (4)")
    ap.add_argument("-r", "--reps", type=int, default=5, help="repetitions, best kept (5)")
    ap.add_argument("--min-ms", type=float, default=100, help="time to fill per repetition (100 ms)")
    ap.add_argument("--max-iters", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=500, help="small calls on both before timing (500)")
    ap.add_argument("--json", help="also write the rows to JSON.npN")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(HEADER, flush=True)
    for world in args.nprocs:
        mp.spawn(run, args=(world, args, free_port()), nprocs=world, join=True)


if __name__ == "__main__":
    sys.exit(main())
