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

from ..diskspace import enough_room
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


def saved_world_size(checkpoint: Path) -> int | None:
    """How many data-parallel ranks wrote this DeepSpeed checkpoint (None: not a DeepSpeed one)."""
    tag_file = checkpoint / "latest"
    if not tag_file.is_file():
        return None
    ranks = {
        m.group(1)
        for f in (checkpoint / tag_file.read_text().strip()).glob("zero_pp_rank_*")
        if (m := re.match(r"zero_pp_rank_(\d+)_", f.name))
    }
    return len(ranks) or None


def make_universal(checkpoint: Path, rank0: bool, timeout_s: float = 3600) -> None:
    """Convert a DeepSpeed checkpoint to DeepSpeed's universal format (every tensor whole, by name),
    which loads on any number of GPUs. Rank 0 converts; the others wait for `latest_universal`,
    which it writes last. Before the process group exists, so the wait is on the file."""
    import subprocess
    import sys
    import time

    done = checkpoint / "latest_universal"
    if rank0 and not done.is_file():
        tag = (checkpoint / "latest").read_text().strip()
        out = checkpoint / f"{tag}_universal"
        shutil.rmtree(out, ignore_errors=True)
        log.info("resharding %s for a different number of processes (DeepSpeed universal checkpoint)", checkpoint)
        # --inject_missing_state: the HF Trainer does not store the layout hints Megatron does;
        # the converter derives them from the ZeRO files.
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "deepspeed.checkpoint.ds_to_universal",
                "--input_folder",
                str(checkpoint / tag),
                "--output_folder",
                str(out),
                "--num_extract_workers",
                "1",
                "--num_merge_workers",
                "1",
                "--inject_missing_state",
            ],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{checkpoint}: converting to a universal checkpoint failed: {proc.stderr[-1500:]}")
        (checkpoint / ".latest_universal.tmp").write_text(out.name)
        (checkpoint / ".latest_universal.tmp").replace(done)
    deadline = time.time() + timeout_s
    while not done.is_file():
        if time.time() > deadline:
            raise TimeoutError(f"{checkpoint}: rank 0 did not finish the universal checkpoint in {timeout_s:.0f} s")
        time.sleep(1)


def writing(folder: Path) -> Path:
    """The checkpoint being written when a save failed: the newest one without its mark."""
    unmarked = [p for _, p in checkpoints(folder) if not (p / MARKER).is_file()]
    return unmarked[-1] if unmarked else folder


def drop_partial(folder: Path) -> None:
    """A failed save's half-written checkpoint goes at once; the last complete one stays."""
    import os

    if int(os.environ.get("RANK", "0")) == 0:
        latest_complete(folder, clean=True)


def check_room(cfg, out: Path, model) -> None:
    """Warn, with the numbers, when run_dir's disk cannot hold the checkpoints this config keeps."""
    from ..diskspace import disk_need_bytes
    from .build import parameter_count

    trainable, params = parameter_count(model)  # ZeRO-3 shards and 4-bit weights counted whole
    if warning := enough_room(disk_need_bytes(cfg, params, trainable), out):
        log.warning(
            "disk: %s (train.save_total_limit=%d checkpoints); free space, point run_dir elsewhere or keep "
            "fewer checkpoints",
            warning,
            cfg.train.save_total_limit,
        )
