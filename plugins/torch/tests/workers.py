"""One rank of a test scenario: `workers.py SCENARIO REPORT.json`, launched by
_launch.run() with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (env://). Writes a
JSON report; the pytest side asserts on it."""
import datetime
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

import nodus_torch  # noqa: F401  registers "nodus"

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool]
R = dist.ReduceOp


def report(path, **fields):
    with open(path + ".tmp", "w") as f:
        json.dump(fields, f)
    os.replace(path + ".tmp", path)


# ---- Inputs every rank can compute for every other rank ----------------------------

def data(rank, shape, dtype, salt=0):
    """Small integer values, exact in every dtype: sums and products of up to
    four ranks fit int8 (values -3..3) and uint8 (values 1..4)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = 1
    for s in shape:
        n *= s
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        v = (i + rank + salt) % 3 == 0
    elif dtype == torch.uint8:
        v = (i * (rank + 1) + rank + salt) % 4 + 1
    else:
        v = (i * (rank + 2) + rank + salt) % 7 - 3
    return v.to(dtype).reshape(shape)


def reference(tensors, op, dtype):
    """torch's own computation of the reduction."""
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    st = torch.stack([t.to(wide) for t in tensors])
    if op == R.SUM:
        out = st.sum(0)
    elif op == R.PRODUCT:
        out = st.prod(0)
    elif op == R.MIN:
        out = st.min(0).values
    elif op == R.MAX:
        out = st.max(0).values
    elif op == R.AVG:
        out = st.mean(0)
    else:
        raise ValueError(op)
    return out.to(dtype)  # bool: nonzero is True, so SUM is "any" and PRODUCT "all"


def close(got, want, exact=True):
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if exact or not got.dtype.is_floating_point:
        return torch.equal(got, want)
    tol = {torch.float16: 2e-3, torch.bfloat16: 1e-2}.get(got.dtype, 1e-6)
    return torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)


# ---- Every collective and dtype against torch's computation ----------------------------

class Checker:
    def __init__(self, rank, size):
        self.rank, self.size = rank, size
        self.failures, self.count = [], 0

    def __call__(self, name, fn):
        self.count += 1
        print(name, flush=True)  # where it stopped, if it hangs
        try:
            fn()
        except Exception:
            self.failures.append(f"rank {self.rank} {name}: {traceback.format_exc(limit=4)}")

    def expect(self, what, got, want, exact=True):
        if not close(got, want, exact):
            raise AssertionError(f"{what}: got {got.flatten()[:8].tolist()}... want {want.flatten()[:8].tolist()}...")


def reduce_ops(dtype):
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    if dtype.is_floating_point:
        ops.append(R.AVG)
    return ops


def check_dtype(c, dtype, group=None, ranks=None):
    """All collectives of `group` (default: the world) for one dtype."""
    ranks = ranks if ranks is not None else list(range(dist.get_world_size()))
    me = ranks.index(dist.get_rank())
    p = len(ranks)
    n = 37
    tag = f"[{dtype} p={p}]"
    exact_avg = False

    for op in reduce_ops(dtype):
        def allreduce(op=op):
            t = data(me, n, dtype)
            dist.all_reduce(t, op=op, group=group)
            c.expect(f"all_reduce {op}", t, reference([data(r, n, dtype) for r in range(p)], op, dtype),
                     exact=op != R.AVG or exact_avg)
        c(f"all_reduce {op} {tag}", allreduce)

    def allreduce_async():
        t = data(me, (5, 7), dtype)
        w = dist.all_reduce(t, group=group, async_op=True)
        fut = w.get_future()
        assert w.wait() is True
        assert w.is_completed()
        value = fut.wait()
        assert isinstance(value, list) and len(value) == 1 and value[0] is not None
        want = reference([data(r, (5, 7), dtype) for r in range(p)], R.SUM, dtype)
        c.expect("async all_reduce", t, want)
        c.expect("async all_reduce future", value[0], want)
    c(f"all_reduce async {tag}", allreduce_async)

    def allreduce_strided():
        base = data(me, (n, 3), dtype, salt=5)
        keep = base.clone()
        view = base[:, 1]  # not contiguous
        dist.all_reduce(view, op=R.MAX, group=group)
        want = reference([data(r, (n, 3), dtype, salt=5)[:, 1] for r in range(p)], R.MAX, dtype)
        c.expect("strided all_reduce", base[:, 1], want)
        c.expect("strided all_reduce leaves the rest", base[:, 0::2], keep[:, 0::2])
    c(f"all_reduce non-contiguous {tag}", allreduce_strided)

    if dtype.is_floating_point:
        def premul():
            t = data(me, n, dtype)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5), group=group)
            want = (reference([data(r, n, dtype) for r in range(p)], R.SUM, torch.float64) * 0.5).to(dtype)
            c.expect("premul_sum", t, want, exact=False)
        c(f"all_reduce PREMUL_SUM {tag}", premul)

    def coalesced():
        ts = [data(me, 11, dtype, salt=1), data(me, (3, 4), dtype, salt=2).t()]
        dist.all_reduce_coalesced(ts, group=group)
        c.expect("coalesced[0]", ts[0], reference([data(r, 11, dtype, salt=1) for r in range(p)], R.SUM, dtype))
        c.expect("coalesced[1]", ts[1],
                 reference([data(r, (3, 4), dtype, salt=2).t() for r in range(p)], R.SUM, dtype))
    c(f"all_reduce_coalesced {tag}", coalesced)

    root = p - 1

    def broadcast():
        t = data(me, n, dtype, salt=3)
        dist.broadcast(t, src=ranks[root], group=group)
        c.expect("broadcast", t, data(root, n, dtype, salt=3))
        base = data(me, (4, n), dtype, salt=4)
        view = base.t()
        dist.broadcast(view, src=ranks[root], group=group)
        c.expect("strided broadcast", base, data(root, (4, n), dtype, salt=4))
    c(f"broadcast {tag}", broadcast)

    for op in (R.SUM, R.MAX):
        def reduce(op=op):
            dst = 1 % p
            t = data(me, n, dtype, salt=6)
            dist.reduce(t, dst=ranks[dst], op=op, group=group)
            if me == dst:
                c.expect("reduce", t, reference([data(r, n, dtype, salt=6) for r in range(p)], op, dtype))
            else:
                c.expect("reduce leaves non-roots", t, data(me, n, dtype, salt=6))
        c(f"reduce {op} {tag}", reduce)

    def all_gather():
        t = data(me, (3, 5), dtype, salt=7)
        outs = [torch.empty((3, 5), dtype=dtype) for _ in range(p)]
        dist.all_gather(outs, t, group=group)
        for r in range(p):
            c.expect(f"all_gather[{r}]", outs[r], data(r, (3, 5), dtype, salt=7))
        # Outputs that are one buffer (no staging), then in place.
        flat = torch.empty(p * 15, dtype=dtype)
        views = list(flat.view(p, 3, 5).unbind(0))
        dist.all_gather(views, t, group=group)
        c.expect("all_gather into one buffer", flat, torch.cat([data(r, 15, dtype, salt=7) for r in range(p)]))
        flat.zero_()
        views[me].copy_(t)
        dist.all_gather(views, views[me], group=group)
        c.expect("all_gather in place", flat, torch.cat([data(r, 15, dtype, salt=7) for r in range(p)]))
        # Separate outputs, this rank's also its input (in place), one of them
        # a non-contiguous view (staged), the others straight from nodus.
        outs = [torch.zeros((3, 5), dtype=dtype) for _ in range(p)]
        wide = torch.zeros((5, 3), dtype=dtype)
        other = (me + 1) % p
        outs[other] = wide.t()
        outs[me].copy_(t)
        dist.all_gather(outs, outs[me], group=group)
        for r in range(p):
            c.expect(f"all_gather separate, in place [{r}]", outs[r], data(r, (3, 5), dtype, salt=7))
    c(f"all_gather {tag}", all_gather)

    def all_gather_into_tensor():
        t = data(me, n, dtype, salt=8)
        out = torch.empty(p * n, dtype=dtype)
        dist.all_gather_into_tensor(out, t, group=group)
        c.expect("all_gather_into_tensor", out, torch.cat([data(r, n, dtype, salt=8) for r in range(p)]))
        stacked = torch.empty((p, n), dtype=dtype)
        dist._all_gather_base(stacked, t, group=group)
        c.expect("_all_gather_base", stacked, torch.stack([data(r, n, dtype, salt=8) for r in range(p)]))
    c(f"all_gather_into_tensor {tag}", all_gather_into_tensor)

    for op in (R.SUM, R.MIN):
        def reduce_scatter(op=op):
            ins = [data(me, 9, dtype, salt=10 + q) for q in range(p)]
            out = torch.empty(9, dtype=dtype)
            dist.reduce_scatter(out, ins, op=op, group=group)
            c.expect("reduce_scatter", out, reference([data(r, 9, dtype, salt=10 + me) for r in range(p)], op, dtype))
        c(f"reduce_scatter {op} {tag}", reduce_scatter)

    def reduce_scatter_tensor():
        src = data(me, p * 6, dtype, salt=20)
        out = torch.empty(6, dtype=dtype)
        dist.reduce_scatter_tensor(out, src, group=group)
        want = reference([data(r, p * 6, dtype, salt=20) for r in range(p)], R.SUM, dtype)[me * 6:(me + 1) * 6]
        c.expect("reduce_scatter_tensor", out, want)
    c(f"reduce_scatter_tensor {tag}", reduce_scatter_tensor)

    def all_to_all_single():
        # Equal splits: block q of rank r goes to rank q.
        src = torch.cat([data(me, (2, 3), dtype, salt=30 + q) for q in range(p)])
        out = torch.empty_like(src)
        dist.all_to_all_single(out, src, group=group)
        c.expect("all_to_all_single", out, torch.cat([data(r, (2, 3), dtype, salt=30 + me) for r in range(p)]))
        # Uneven splits (some empty): rank s sends rows(s, d) rows to rank d.
        rows = lambda s, d: (s + 2 * d) % 3  # noqa: E731
        src = torch.cat([data(me, (rows(me, q), 2), dtype, salt=40 + q) for q in range(p)])
        out = torch.empty((sum(rows(q, me) for q in range(p)), 2), dtype=dtype)
        dist.all_to_all_single(out, src, output_split_sizes=[rows(q, me) for q in range(p)],
                               input_split_sizes=[rows(me, q) for q in range(p)], group=group)
        c.expect("all_to_all_single uneven", out,
                 torch.cat([data(q, (rows(q, me), 2), dtype, salt=40 + me) for q in range(p)]))
    c(f"all_to_all_single {tag}", all_to_all_single)

    def all_to_all():
        size = lambda s, d: (s + d) % 2 + 1  # noqa: E731
        ins = [data(me, (size(me, q), 4), dtype, salt=50 + q).t() for q in range(p)]  # non-contiguous
        outs = [torch.empty((size(q, me), 4), dtype=dtype).t() for q in range(p)]
        dist.all_to_all(outs, ins, group=group)
        for q in range(p):
            c.expect(f"all_to_all[{q}]", outs[q], data(q, (size(q, me), 4), dtype, salt=50 + me).t())
    c(f"all_to_all {tag}", all_to_all)

    def gather_scatter():
        dst = 0
        t = data(me, n, dtype, salt=60)
        outs = [torch.empty(n, dtype=dtype) for _ in range(p)] if me == dst else None
        dist.gather(t, outs, dst=ranks[dst], group=group)
        if me == dst:
            for r in range(p):
                c.expect(f"gather[{r}]", outs[r], data(r, n, dtype, salt=60))
        src = p - 1
        out = torch.empty(n, dtype=dtype)
        ins = [data(src, n, dtype, salt=70 + q) for q in range(p)] if me == src else None
        dist.scatter(out, ins, src=ranks[src], group=group)
        c.expect("scatter", out, data(src, n, dtype, salt=70 + me))
    c(f"gather/scatter {tag}", gather_scatter)

    if p >= 2:
        def send_recv():
            nxt, prv = (me + 1) % p, (me - 1) % p
            t = data(me, n, dtype, salt=80)
            got = torch.empty(n, dtype=dtype)
            if me % 2 == 0:
                dist.send(t, ranks[nxt], group=group)
                dist.recv(got, ranks[prv], group=group)
            else:
                dist.recv(got, ranks[prv], group=group)
                dist.send(t, ranks[nxt], group=group)
            c.expect("send/recv ring", got, data(prv, n, dtype, salt=80))
            # A ring of messages larger than a connection's buffering, all
            # posted at once: batch_isend_irecv runs them as one group (torch
            # 1.x; torch 2 issues CPU batches as separate calls, so nodus runs
            # them in order and only what the connections buffer fits).
            big = 300_000 if torch.__version__ < "2" else 1000
            t = data(me, big, dtype, salt=81)
            got = torch.empty(big, dtype=dtype)
            ops = [dist.P2POp(dist.isend, t, ranks[nxt], group), dist.P2POp(dist.irecv, got, ranks[prv], group)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            c.expect("batch_isend_irecv ring", got, data(prv, big, dtype, salt=81))
        c(f"send/recv {tag}", send_recv)

    c(f"barrier {tag}", lambda: dist.barrier(group=group))


def scenario_collectives(path):
    dist.init_process_group("nodus")
    rank, size = dist.get_rank(), dist.get_world_size()
    c = Checker(rank, size)
    for dtype in DTYPES:
        check_dtype(c, dtype)

    def large():
        for n in (1 << 20, 3 * 131072 + 17):
            t = data(rank, n, torch.float32)
            dist.all_reduce(t)
            c.expect("large all_reduce", t, reference([data(r, n, torch.float32) for r in range(size)], R.SUM,
                                                        torch.float32))
            outs = [torch.empty(n) for _ in range(size)]
            dist.all_gather(outs, data(rank, n, torch.float32, salt=1))
            for r in range(size):
                c.expect("large all_gather", outs[r], data(r, n, torch.float32, salt=1))
    c("large tensors", large)

    def empty_and_objects():
        t = torch.empty(0)
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        outs = [torch.empty(0) for _ in range(size)]
        dist.all_gather(outs, t)
        objs = [None] * size
        dist.all_gather_object(objs, {"rank": rank, "name": f"r{rank}"})
        assert objs == [{"rank": r, "name": f"r{r}"} for r in range(size)], objs
        box = [f"from {size - 1}" if rank == size - 1 else None]
        dist.broadcast_object_list(box, src=size - 1)
        assert box == [f"from {size - 1}"], box
    c("empty tensors and objects", empty_and_objects)

    def uneven_all_gather():
        # Rank r contributes r + 1 rows (nodusAllGatherV), one rank none at 3+.
        rows = lambda r: 0 if r == 2 else r + 1
        t = data(rank, (rows(rank), 3), torch.float32, salt=90)
        outs = [torch.full((rows(r), 3), -7.0) for r in range(size)]
        dist.all_gather(outs, t)
        for r in range(size):
            c.expect(f"uneven all_gather[{r}]", outs[r], data(r, (rows(r), 3), torch.float32, salt=90))
        # Gather and scatter into one buffer's adjacent views (no staging).
        flat = torch.empty(size * 6)
        views = list(flat.split(6))
        dist.gather(data(rank, 6, torch.float32, salt=91), views if rank == 0 else None, dst=0)
        if rank == 0:
            c.expect("gather into adjacent views", flat, torch.cat([data(r, 6, torch.float32, salt=91) for r in range(size)]))
        out = torch.empty(6)
        src = torch.cat([data(q, 6, torch.float32, salt=92) for q in range(size)]) if rank == size - 1 else None
        dist.scatter(out, list(src.split(6)) if src is not None else None, src=size - 1)
        c.expect("scatter from adjacent views", out, data(rank, 6, torch.float32, salt=92))
    c("uneven all_gather, adjacent gather/scatter", uneven_all_gather)

    # Groups: a subset and a second group over everyone, both created (and
    # rendezvoused) through the same default store.
    sub_ranks = [0, size - 1] if size > 1 else [0]
    sub = dist.new_group(sub_ranks)
    again = dist.new_group(list(range(size)))
    # Both made from the default group's communicator (nodusCommCreateGroup),
    # not from new ids; group and global ranks map as torch says.
    assert not dist.distributed_c10d._get_default_group().made_from_parent
    assert again.made_from_parent
    if rank in sub_ranks:
        assert sub.made_from_parent
        assert dist.get_rank(sub) == sub_ranks.index(rank), (dist.get_rank(sub), sub_ranks)
        # broadcast's src is a global rank: the last member's data reaches everyone.
        t = torch.tensor([float(rank)])
        dist.broadcast(t, src=sub_ranks[-1], group=sub)
        assert t.item() == float(sub_ranks[-1]), (t.item(), sub_ranks)
    if rank in sub_ranks:
        for dtype in (torch.float32, torch.int64):
            def sub_all_reduce(dtype=dtype):
                me = sub_ranks.index(rank)
                t = data(me, 10, dtype)
                dist.all_reduce(t, group=sub)
                c.expect("subgroup all_reduce", t,
                         reference([data(r, 10, dtype) for r in range(len(sub_ranks))], R.SUM, dtype))
            c(f"subgroup {sub_ranks} all_reduce {dtype}", sub_all_reduce)
    check_dtype(c, torch.float32, group=again)

    # Group sizes and async ordering: many operations in flight, then waited.
    def in_flight():
        ts = [data(rank, 100 + i, torch.float32) for i in range(50)]
        works = [dist.all_reduce(t, async_op=True) for t in ts]
        for w in reversed(works):
            w.wait()
        for i, t in enumerate(ts):
            c.expect("in flight", t, reference([data(r, 100 + i, torch.float32) for r in range(size)], R.SUM,
                                               torch.float32))
    c("50 operations in flight", in_flight)

    dist.destroy_process_group()
    report(path, checks=c.count, failures=c.failures)


# ---- Errors that must be clear, on a group of one process -------------------------------

def scenario_errors(path):
    dist.init_process_group("nodus")
    errors = {}

    def expect_error(name, fn):
        try:
            fn()
            errors[name] = None
        except RuntimeError as e:
            errors[name] = str(e)
        except Exception as e:  # the wrong kind of exception
            errors[name] = f"{type(e).__name__}: {e}"

    expect_error("avg_int", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=R.AVG))
    expect_error("avg_bool", lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool), op=R.AVG))
    expect_error("band", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=R.BAND))
    expect_error("int16", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)))
    expect_error("sparse", lambda: dist.all_reduce(torch.ones(3).to_sparse()))
    expect_error("gather_size", lambda: dist.all_gather([torch.empty(4)], torch.ones(3)))
    expect_error("split_sum", lambda: dist.all_to_all_single(torch.empty(4), torch.ones(4), [3], [4]))
    expect_error("recv_any", lambda: dist.recv(torch.empty(3)))
    expect_error("coalesced_types", lambda: dist.all_reduce_coalesced([torch.ones(2), torch.ones(2, dtype=torch.int64)]))
    dist.destroy_process_group()
    report(path, errors=errors)


# ---- DDP on nodus against the same run on gloo --------------------------------------------

def scenario_ddp(path):
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("nodus")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    steps = int(os.environ.get("DDP_STEPS", "6"))

    def train(pg):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
        # Small buckets: several allreduces (futures) per step.
        ddp = DDP(model, process_group=pg, bucket_cap_mb=0.002)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        gen = torch.Generator().manual_seed(1000 + rank)
        losses = []
        for _ in range(steps):
            x = torch.randn(16, 12, generator=gen)
            y = torch.sin(x.sum(1, keepdim=True))
            opt.zero_grad()
            loss = F.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, torch.cat([p.detach().flatten() for p in model.parameters()])

    nodus_losses, nodus_params = train(None)
    gloo_losses, gloo_params = train(gloo)
    # Every rank's parameters, gathered over gloo, to compare across ranks.
    everyone = [torch.empty_like(nodus_params) for _ in range(size)]
    dist.all_gather(everyone, nodus_params, group=gloo)
    same_everywhere = all(torch.equal(everyone[0], p) for p in everyone)
    max_param_diff = (nodus_params - gloo_params).abs().max().item()
    dist.destroy_process_group()
    report(path, nodus_losses=nodus_losses, gloo_losses=gloo_losses, same_everywhere=same_everywhere,
           max_param_diff=max_param_diff)


# ---- Failures -------------------------------------------------------------------------------

def scenario_dead_peer(path):
    """The last rank dies between two collectives; the others must raise."""
    dist.init_process_group("nodus")
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.ones(1 << 16)
    for _ in range(3):
        dist.all_reduce(t)
    dist.barrier()
    if rank == size - 1:
        os._exit(17)  # no goodbye: as if killed
    time.sleep(0.2)
    out = {}
    start = time.monotonic()
    w = fut = None
    try:
        w = dist.all_reduce(t, async_op=True)
        fut = w.get_future()
        w.wait()
        out["raised"] = False
    except RuntimeError as e:
        out["raised"], out["message"] = True, str(e)
    out["elapsed"] = time.monotonic() - start
    out["completed"] = w is not None and w.is_completed()
    try:
        fut.wait()
        out["future_raised"] = False
    except RuntimeError:
        out["future_raised"] = True
    # Later calls fail at once.
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        out["later_raised"] = False
    except RuntimeError as e:
        out["later_raised"], out["later_message"] = True, str(e)
    out["later_elapsed"] = time.monotonic() - start
    report(path, **out)
    dist.destroy_process_group()


def scenario_wait_timeout(path):
    """wait(timeout) returns or raises on time; isCompleted/isSuccess follow
    the request; the operation still completes afterwards."""
    dist.init_process_group("nodus", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    out = {}
    t = torch.full((1000,), float(rank + 1))
    if rank == 0:
        w = dist.all_reduce(t, async_op=True)
        out["completed_early"] = w.is_completed()
        out["success_early"] = w.is_success()
        start = time.monotonic()
        try:
            w.wait(timeout=datetime.timedelta(milliseconds=300))
            out["raised"] = False
        except RuntimeError as e:
            out["raised"], out["message"] = True, str(e)
        out["elapsed"] = time.monotonic() - start
        store.set("go", "1")
        out["wait"] = w.wait()
        out["completed"] = w.is_completed()
        out["success"] = w.is_success()
        out["value"] = t[0].item()
    else:
        store.wait(["go"])
        dist.all_reduce(t)
        out["value"] = t[0].item()
    dist.barrier()
    dist.destroy_process_group()
    report(path, **out)


# ---- Launchers ------------------------------------------------------------------------------

def _spawned(index, port, world, path):
    dist.init_process_group("nodus", init_method=f"tcp://127.0.0.1:{port}", rank=index, world_size=world)
    t = torch.full((4,), float(index + 1))
    dist.all_reduce(t)
    report(f"{path}.{index}", value=t[0].item(), rank=dist.get_rank())
    dist.destroy_process_group()


def scenario_spawn(path):
    """torch.multiprocessing.spawn from one process (launched as a single rank)."""
    import torch.multiprocessing as mp
    port = int(os.environ["MASTER_PORT"])
    world = 2
    mp.spawn(_spawned, args=(port, world, path), nprocs=world, join=True)
    values = [json.load(open(f"{path}.{i}"))["value"] for i in range(world)]
    for i in range(world):
        os.unlink(f"{path}.{i}")
    report(path, values=values)


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in globals().items() if name.startswith("scenario_")}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](sys.argv[2])
