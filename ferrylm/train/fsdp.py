"""FSDP2 (train.fsdp) where the Trainer's plugin falls short: on a CPU process group (gloo, the tests) Accelerate
shards only accelerators' processes, and torch's full state dict there leaves the shards as DTensors."""

from __future__ import annotations


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
