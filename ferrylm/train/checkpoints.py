"""Checkpoints that resume can trust.

The HF Trainer writes a checkpoint folder piece by piece (weights, optimizer, scheduler, RNG,
state). A run killed half-way leaves a folder that looks like a checkpoint but is not one. We mark
a checkpoint complete only after every rank has finished writing it, and resume only from marked
ones; unmarked leftovers are removed before training starts again.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from transformers import TrainerCallback

from ..log import get_logger

log = get_logger("train")
MARKER = "COMPLETE"
_STEP = re.compile(r"^checkpoint-(\d+)$")


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


class MarkComplete(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        _barrier()  # every rank's shard is on disk before the folder is declared whole
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                (folder / MARKER).write_text(f"{state.global_step}\n")
        return control


def checkpoints(folder: Path) -> list[tuple[int, Path]]:
    found = []
    if folder.is_dir():
        for p in folder.iterdir():
            m = _STEP.match(p.name)
            if m and p.is_dir():
                found.append((int(m.group(1)), p))
    return sorted(found)


def latest_complete(folder: Path, clean: bool = False) -> Path | None:
    """The newest marked checkpoint; with clean=True, delete unmarked ones (half-written saves)."""
    best = None
    for step, path in checkpoints(folder):
        if (path / MARKER).is_file():
            best = path
        elif clean:
            log.warning("removing incomplete checkpoint %s (the run was killed while saving it)", path)
            shutil.rmtree(path, ignore_errors=True)
    return best
