"""A full disk while training: one line naming what was being written, where and the room left,
exit 2, the half-written checkpoint removed at once and the last complete one kept; resumed on a
disk with room, the run ends where an uninterrupted one does. On a real small file system (tmpfs,
where this machine lets the suite mount one)."""

import json
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from ferrylm.train.checkpoints import MARKER


@contextmanager
def small_fs(where: Path, size: int):
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(
            f"cannot mount a small file system here ({r.stderr.strip() or 'mount failed'}); "
            "tests/test_diskspace.py injects ENOSPC instead"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _train(run: Path, model: Path, corpus: Path, *extra) -> subprocess.CompletedProcess:
    overrides = [
        f"run_dir={run}",
        f"model.path={model}",
        f"data.sources=[{corpus}]",
        "data.max_pairs=200",
        "data.eval_fraction=0.3",
        "data.max_seq_len=256",
        "train.max_steps=8",
        "train.save_steps=4",
        "train.per_device_batch_size=2",
        "train.logging_steps=1",
        "train.learning_rate=3e-3",
        "train.lora_dropout=0",
        "train.warmup_steps=0",
        "train.eval_batches=4",
        "train.report_to=[]",
        *extra,
    ]
    return subprocess.run(
        [sys.executable, "-m", "ferrylm", "train", *overrides], capture_output=True, text=True, timeout=600
    )


# slow: two training runs in subprocesses (~50 s on 2 cores)
@pytest.mark.slow
@pytest.mark.integration
def test_a_disk_that_fills_at_the_second_checkpoint(copy_run, tiny_qwen2_dir, tiny_corpus, tmp_path):
    reference = copy_run()
    done = _train(reference, tiny_qwen2_dir, tiny_corpus)
    assert done.returncode == 0, done.stderr[-2000:]
    ckpt = _du(reference / "train" / "checkpoints" / "checkpoint-4")
    before = _du(reference / "data") + ckpt  # what is on the disk when the second save starts
    # room for the data and the first checkpoint, and half of the second
    with small_fs(tmp_path / "small", before + ckpt // 2) as small:
        run = small / "run"
        shutil.copytree(reference / "data", run / "data")
        r = _train(run, tiny_qwen2_dir, tiny_corpus)
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("ferrylm: error")]
        assert r.returncode == 2, r.stderr[-3000:]
        assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
        assert lines[0].startswith(
            f"ferrylm: error: out of disk space writing a checkpoint to {run}/train/checkpoints/checkpoint-8: "
        )
        assert "free there after removing the partial output" in lines[0]
        kept = sorted(p.name for p in (run / "train" / "checkpoints").iterdir())
        assert kept == ["checkpoint-4"] and (run / "train" / "checkpoints" / "checkpoint-4" / MARKER).is_file()
        # resumed where there is room: the same held-out loss as the run that never stopped
        moved = tmp_path / "moved"
        shutil.copytree(run, moved)
    resumed = _train(moved, tiny_qwen2_dir, tiny_corpus)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    got, want = (json.loads((r / "train" / "record.json").read_text())["metrics"] for r in (moved, reference))
    assert got["resumed_from"].endswith("checkpoint-4")
    assert round(got["eval_loss"], 4) == round(want["eval_loss"], 4)
