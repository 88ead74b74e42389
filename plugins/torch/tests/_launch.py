"""Runs a scenario of workers.py as N processes (env:// rendezvous) and
collects what each rank reports."""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "workers.py")
SOURCE_DIR = os.environ.get("NODUS_TORCH_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "..", "..", "..")))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shm_files():
    return set(glob.glob("/dev/shm/nodus-*"))


class Result:
    def __init__(self, codes, outputs, reports, elapsed, pids):
        self.codes, self.outputs, self.reports, self.elapsed, self.pids = codes, outputs, reports, elapsed, pids

    def describe(self):
        return "\n".join(f"--- rank {r} (exit {'killed: timed out' if c is None else c}) ---\n{o[-3000:]}"
                         for r, (c, o) in enumerate(zip(self.codes, self.outputs)))


def run(scenario, nprocs, timeout=150, env=None, args=()):
    """Starts `nprocs` ranks of `workers.py scenario`, waits (killing them all
    after `timeout` seconds) and returns their exit codes, output and reports."""
    port = free_port()
    outdir = tempfile.mkdtemp(prefix="nodus-torch-test-")
    procs, logs = [], []
    for rank in range(nprocs):
        e = dict(os.environ)
        e.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_WORLD_SIZE=str(nprocs),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        e.update(env or {})
        log = tempfile.TemporaryFile(mode="w+", dir=outdir)
        report = os.path.join(outdir, f"rank{rank}.json")
        procs.append(subprocess.Popen([sys.executable, WORKER, scenario, report, *args], env=e,
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        logs.append(log)
    start = time.monotonic()
    deadline = start + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append(None)
    elapsed = time.monotonic() - start
    for p in procs:  # the ones that hung, with anything they started
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    outputs, reports = [], []
    for rank, log in enumerate(logs):
        log.seek(0)
        outputs.append(log.read())
        log.close()
        path = os.path.join(outdir, f"rank{rank}.json")
        reports.append(json.load(open(path)) if os.path.exists(path) else None)
        if os.path.exists(path):
            os.unlink(path)
    os.rmdir(outdir)
    return Result(codes, outputs, reports, elapsed, [p.pid for p in procs])


def check_clean(before, result):
    """No nodus shared-memory file left behind (a few tries: another job's
    files live only while it initialises) and nothing the workers started
    still running (each worker leads its own process group)."""
    for _ in range(10):
        left = shm_files() - before
        if not left:
            break
        time.sleep(0.2)
    assert not left, f"shared memory left behind: {sorted(left)}"
    for pid in result.pids:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"processes of worker {pid} still running")
