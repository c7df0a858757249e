"""Data parallelism through torchrun / torch.distributed.

``lvsearch train-supernet`` (and later training jobs) run unchanged on one process or under
``torchrun --nproc_per_node N``: :func:`init_distributed` reads torchrun's environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``), joins the process group (NCCL
on CUDA, gloo on CPU) and picks the device. Gradients are averaged by
``torch.nn.parallel.DistributedDataParallel``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    """This process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str = "auto") -> DistInfo:
    """Join the torchrun process group if there is one; choose the device.

    Args:
        device: ``auto`` (``cuda:LOCAL_RANK`` when CUDA is available, else CPU), ``cpu`` or ``cuda``.

    Raises:
        LvsearchError: a device torch cannot use here (:func:`lvsearch.device.check_device`).

    Under torchrun on CPU, each process gets ``cpu_count // LOCAL_WORLD_SIZE`` intra-op threads so
    that processes do not oversubscribe the cores.
    """
    from lvsearch.device import check_device

    check_device(device)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() if device == "auto" else device.startswith("cuda")
    dev = torch.device(f"cuda:{local_rank}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    if world > 1:
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if use_cuda else "gloo")
        if not use_cuda:
            local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    return DistInfo(rank, world, local_rank, dev)


def all_reduce_sum(t: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Sum ``t`` over all processes (in place; a no-op on one process)."""
    if info.enabled:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
