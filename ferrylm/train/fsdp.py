"""FSDP2 (train.fsdp) where the Trainer's plugin falls short: on a CPU process group (gloo, the tests) Accelerate
shards only accelerators' processes, and torch's full state dict there leaves the shards as DTensors."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import FerryError


class OtherWorld(FerryError, RuntimeError):
    """An FSDP2 checkpoint resumed on another number of processes than wrote it."""


def check_world(checkpoint: Path) -> None:
    """FSDP2's sharded checkpoints resume on the number of processes that wrote them (one RNG state file each)."""
    wrote = len(list(checkpoint.glob("rng_state_*.pth"))) or 1
    now = int(os.environ.get("WORLD_SIZE", "1"))
    if wrote != now:
        raise OtherWorld(
            f"train.fsdp: {checkpoint} was written by {wrote} process(es), this run has {now}: resume with "
            f"`ferrylm launch --nproc {wrote}`, or set train.resume=false to start again"
        )


class ShardedOnCpu:
    """A Trainer mixin: the FSDP2 plugin applied on CPU processes too, so gloo runs the sharding a GPU run does."""

    def create_accelerator_and_postprocess(self):
        from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

        super().create_accelerator_and_postprocess()
        state = self.accelerator.state
        if self.args.fsdp_plugin_args and state.distributed_type == DistributedType.MULTI_CPU:
            state.distributed_type = DistributedType.FSDP
            state.fsdp_plugin = FullyShardedDataParallelPlugin(**self.args.fsdp_plugin_args)
            self.is_fsdp_enabled = True


def whole(state: dict) -> dict:
    """Every tensor whole (every rank gathers them alike, in the same order); a no-op where they already are."""
    from torch.distributed.tensor import DTensor

    return {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in state.items()}
