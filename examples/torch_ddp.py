"""A small model trained with DistributedDataParallel on the nodus backend.

    torchrun --standalone --nproc_per_node=4 examples/torch_ddp.py

(With nodus built but not installed: PYTHONPATH=build/plugins/torch/python.)
Going from gloo to nodus is the import below plus one word in
init_process_group; `--backend gloo` runs the same thing on gloo.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import nodus_torch  # noqa: F401  registers the "nodus" backend


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="nodus")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64, help="samples per process and step")
    args = ap.parse_args()

    dist.init_process_group(args.backend)  # env://: torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"backend {args.backend}, {world} processes", flush=True)

    # A synthetic task: which of 10 fixed centres is a point nearest to.
    centres = torch.randn(10, 32, generator=torch.Generator().manual_seed(1))
    samples = torch.Generator().manual_seed(100 + rank)  # each process its own data

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    ddp = DDP(model)  # broadcasts rank 0's parameters, then averages gradients every step
    opt = torch.optim.Adam(ddp.parameters(), lr=2e-3)

    for step in range(1, args.steps + 1):
        x = 1.5 * torch.randn(args.batch, 32, generator=samples)
        y = torch.cdist(x, centres).argmin(1)
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)  # the loss over every process's batch
        if rank == 0 and (step % 50 == 0 or step == 1):
            print(f"step {step:4d}  loss {mean.item():.4f}", flush=True)
    if rank == 0:
        print(f"final loss {mean.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
