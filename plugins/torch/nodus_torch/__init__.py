"""nodus as a torch.distributed backend.

Importing this package registers the backend "nodus"; then

    import nodus_torch
    torch.distributed.init_process_group("nodus")   # instead of "gloo"

Every collective, point-to-point call and barrier of such a group runs on
nodus (CPU tensors). Rendezvous goes through the store torch hands the
backend, so torchrun, torch.multiprocessing.spawn and env:// work unchanged.
"""
import torch.distributed  # noqa: F401  (first: the extension derives from its classes)

from . import _C

ProcessGroupNodus = _C.ProcessGroupNodus
create_process_group = _C.create_process_group


class HybridGroups:
    """What hybrid_groups returns: this rank's groups and coordinates."""

    def __init__(self, dp, tp, pp, coords, order):
        self.dp, self.tp, self.pp = dp, tp, pp  # torch process groups
        self.coords = coords                     # (dp, tp, pp) coordinates of this rank
        self.order = order                       # axes fastest first, e.g. "tp-pp-dp"

    def __repr__(self):
        return f"HybridGroups(coords={self.coords}, order={self.order!r})"


def _grid_coords(rank, sizes, axes):
    coords = [0, 0, 0]
    for axis in axes:
        coords[axis] = rank % sizes[axis]
        rank //= sizes[axis]
    return coords


def hybrid_groups(dp=1, tp=1, pp=1, order=None):
    """Data x tensor x pipeline parallel groups over the default group.

    `order` names the axes from the fastest-varying, as Megatron-LM does
    ("tp-pp-dp": ranks 0..tp-1 form a tensor group, rank = tp + TP*(pp + PP*dp)).
    With order=None and nodus as the default backend, nodus chooses the order
    that puts tensor groups on the fastest links the topology knows (one
    host, then torus neighbours), then pipeline groups (nodusCommSplitGrid's
    choice); with another default backend, "tp-pp-dp". Every rank must call
    it (each group is made with dist.new_group, i.e. nodusCommCreateGroup
    from the default group's communicator). Returns a HybridGroups with the
    torch groups .dp, .tp, .pp, this rank's .coords (dp, tp, pp) and .order.
    """
    import torch.distributed as dist

    world, rank = dist.get_world_size(), dist.get_rank()
    sizes = (int(dp), int(tp), int(pp))
    if min(sizes) < 1 or sizes[0] * sizes[1] * sizes[2] != world:
        raise ValueError(f"hybrid_groups: dp={dp} x tp={tp} x pp={pp} is not the world size {world}")
    if order is None:
        default = dist.distributed_c10d._get_default_group()
        order = _C.grid_order(default, *sizes) if isinstance(default, ProcessGroupNodus) else "tp-pp-dp"
    names = {"dp": 0, "tp": 1, "pp": 2}
    parts = order.split("-")
    if len(parts) != 3 or sorted(parts) != ["dp", "pp", "tp"]:
        raise ValueError(f"hybrid_groups: order {order!r} is not dp, tp and pp joined by '-' (e.g. 'tp-pp-dp')")
    axes = [names[a] for a in parts]
    coords = [_grid_coords(r, sizes, axes) for r in range(world)]
    mine = [None, None, None]
    for axis in (1, 2, 0):  # every rank creates every group, in one order
        seen = set()
        for r in range(world):
            key = tuple(c for i, c in enumerate(coords[r]) if i != axis)
            if key in seen:
                continue
            seen.add(key)
            members = sorted((q for q in range(world) if tuple(c for i, c in enumerate(coords[q]) if i != axis) == key),
                             key=lambda q: coords[q][axis])
            group = dist.new_group(members)
            if rank in members:
                mine[axis] = group
    return HybridGroups(mine[0], mine[1], mine[2], tuple(coords[rank]), order)


def nodus_version():
    """The version of the nodus library loaded, as (major, minor, patch)."""
    v = _C.version()
    return (v // 10000, v // 100 % 100, v % 100)


__all__ = ["ProcessGroupNodus", "create_process_group", "hybrid_groups", "HybridGroups", "nodus_version"]
