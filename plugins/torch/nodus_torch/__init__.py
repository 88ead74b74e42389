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


def nodus_version():
    """The version of the nodus library loaded, as (major, minor, patch)."""
    v = _C.version()
    return (v // 10000, v // 100 % 100, v % 100)


__all__ = ["ProcessGroupNodus", "create_process_group", "nodus_version"]
