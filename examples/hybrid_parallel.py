"""A small model trained with data x tensor x pipeline parallelism on nodus.

    torchrun --standalone --nproc_per_node=8 examples/hybrid_parallel.py

(With nodus built but not installed: PYTHONPATH=build/plugins/torch/python;
torch 1.13 under Python 3.11 also needs --redirects 3 --tee 3 --log_dir DIR,
see the README.) 8 processes: 2-way data, 2-way tensor and 2-way pipeline
parallel groups from nodus_torch.hybrid_groups. The model is two stages (one
per pipeline rank) of a Megatron-style tensor-parallel MLP block each: a
column-parallel linear, tanh, a row-parallel linear whose partial outputs the
tensor group sums. Stage 0 sends its activations to stage 1 and receives
their gradients back; each data-parallel replica trains on its own half of
the batch and the replicas average their gradients. Rank 0 also trains the
same model, unsharded, on the whole batch in one process, and the losses
must match step for step (exit status 1 if they do not).
"""
import argparse
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

import nodus_torch

D, H = 16, 32  # model width, hidden width (split over the tensor group)


class CopyToTensorGroup(torch.autograd.Function):
    """Identity forward; the tensor group's partial input gradients summed backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class SumOverTensorGroup(torch.autograd.Function):
    """The row-parallel partial outputs summed forward; identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def full_parameters():
    """Both stages' weights, unsharded: every process makes the same."""
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(D, H, generator=g) / D ** 0.5, torch.randn(H, D if s == 0 else 1, generator=g) / H ** 0.5)
            for s in range(2)]


def batch(step, n):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(n, D, generator=g)
    y = torch.sin(x[:, :4].sum(1, keepdim=True))
    return x, y


def block(x, w_in, w_out, group):
    """Column-parallel w_in, tanh, row-parallel w_out, summed over `group` (None: unsharded)."""
    if group is not None:
        x = CopyToTensorGroup.apply(x, group)
    z = torch.tanh(x @ w_in) @ w_out
    return SumOverTensorGroup.apply(z, group) if group is not None else z


def reference(steps, n, lr):
    params = [w.clone().requires_grad_() for pair in full_parameters() for w in pair]
    losses = []
    for step in range(steps):
        x, y = batch(step, n)
        h = torch.tanh(block(x, params[0], params[1], None))
        loss = F.mse_loss(block(h, params[2], params[3], None), y)
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
        losses.append(loss.item())
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32, help="samples per step, over all data-parallel replicas")
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()

    dist.init_process_group("nodus")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 8:
        sys.exit(f"hybrid_parallel.py runs on 8 processes (2 x 2 x 2), not {world}")
    grid = nodus_torch.hybrid_groups(dp=2, tp=2, pp=2)
    dp, tp, pp = grid.coords
    if rank == 0:
        print(f"8 processes as dp=2 x tp=2 x pp=2, order {grid.order}", flush=True)

    # This rank's shard: its stage's block, its tensor rank's columns of
    # w_in and rows of w_out.
    w_in, w_out = full_parameters()[pp]
    cols = slice(tp * H // 2, (tp + 1) * H // 2)
    params = [w_in[:, cols].clone().requires_grad_(), w_out[cols, :].clone().requires_grad_()]
    # The pipeline peer: same data and tensor coordinates, the other stage.
    global_rank = getattr(dist.distributed_c10d, "get_global_rank", None) or dist.distributed_c10d._get_global_rank
    pp_ranks = [global_rank(grid.pp, i) for i in range(2)]
    peer = pp_ranks[1 - pp]

    half = args.batch // 2
    losses = []
    for step in range(args.steps):
        x, y = batch(step, args.batch)
        x, y = x[dp * half:(dp + 1) * half], y[dp * half:(dp + 1) * half]
        for p in params:
            p.grad = None
        if pp == 0:
            h = torch.tanh(block(x, params[0], params[1], grid.tp))
            dist.send(h.detach().contiguous(), peer)
            grad = torch.empty_like(h)
            dist.recv(grad, peer)
            h.backward(grad)
        else:
            h = torch.empty(half, D)
            dist.recv(h, peer)
            h.requires_grad_()
            loss = F.mse_loss(block(h, params[0], params[1], grid.tp), y)
            loss.backward()
            dist.send(h.grad.contiguous(), peer)
            # The step's loss over the whole batch: the replicas' mean.
            total = loss.detach().clone()
            dist.all_reduce(total, group=grid.dp)
            losses.append(total.item() / 2)
        with torch.no_grad():
            for p in params:
                dist.all_reduce(p.grad, group=grid.dp)  # data parallel: average the replicas' gradients
                p -= args.lr * p.grad / 2

    # The last stage's losses reach rank 0, which compares them with one process.
    got = torch.tensor(losses if pp == 1 else [0.0] * args.steps)
    if rank == 0:
        src = next(r for r in range(world) if nodus_torch._grid_coords(r, (2, 2, 2), _axes(grid.order))[2] == 1)
        dist.recv(got, src)
    elif pp == 1 and dp == 0 and tp == 0:
        dist.send(got, 0)
    ok = True
    if rank == 0:
        want = reference(args.steps, args.batch, args.lr)
        print(f"{'step':>5} {'hybrid loss':>14} {'one process':>14} {'rel. diff':>10}")
        for step, (a, b) in enumerate(zip(got.tolist(), want)):
            rel = abs(a - b) / max(abs(b), 1e-12)
            ok &= rel < 1e-4
            print(f"{step:>5} {a:>14.8f} {b:>14.8f} {rel:>10.2e}")
        print("losses match the single-process run" if ok else "LOSSES DIFFER from the single-process run", flush=True)
    flag = torch.tensor([1 if ok else 0])
    dist.broadcast(flag, 0)
    dist.destroy_process_group()
    sys.exit(0 if flag.item() == 1 else 1)


def _axes(order):
    return [{"dp": 0, "tp": 1, "pp": 2}[a] for a in order.split("-")]


if __name__ == "__main__":
    main()
