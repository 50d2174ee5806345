"""Real LoRA training of a tiny random Qwen2 through the HF Trainer: loss falls, resume is exact."""

import json
import math
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from ferrylm.manifest import read_record
from ferrylm.train import run_train
from ferrylm.train.arguments import optimizer_steps
from ferrylm.train.checkpoints import MARKER
from ferrylm.train.dataset import examples
from tests.pinning import pinned

# The tiny recipe's training losses by step (make_config's defaults: 8 steps of LoRA on the fp32 base).
LORA_CURVE = {1: 10.7934, 2: 10.8041, 3: 10.7472, 4: 10.7674, 5: 10.7289, 6: 10.7453, 7: 10.7192, 8: 10.6593}


def _history(run_dir):
    rows = [json.loads(line) for line in open(run_dir / "train" / "log_history.jsonl")]
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


def test_lora_training_lowers_loss_and_writes_adapter(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    run = copy_run()
    rec = run_train(make_config(run, tiny_qwen2_dir, tiny_corpus))
    m = rec.metrics
    assert m["steps"] == 8
    assert m["eval_loss"] < m["base_eval_loss"] - 0.05
    assert m["final_train_loss"] < m["first_train_loss"]
    assert (run / "train" / "adapter" / "adapter_model.safetensors").is_file()
    ckpts = sorted(p.name for p in (run / "train" / "checkpoints").iterdir())
    assert ckpts == ["checkpoint-4", "checkpoint-8"]
    assert all((run / "train" / "checkpoints" / c / MARKER).is_file() for c in ckpts)
    assert read_record(run / "train")["metrics"]["adapter_sha256"] == m["adapter_sha256"]
    # The recipe's numbers pinned (torchtune pins its recipes' losses): a silent change to the recipe,
    # the data or the seed fails here; the tolerance is the CPUs' measured spread (tests/pinning.py).
    pinned("lora curve", "train-loss", _history(run), LORA_CURVE)
    pinned("lora eval losses", "train-loss", [m["base_eval_loss"], m["eval_loss"]], [10.7993, 10.7277])


def test_epochs_set_the_steps_by_the_rows_so_a_corpus_of_any_size_is_passed_over_as_often(
    copy_run, tiny_qwen2_dir, tiny_corpus, make_config
):
    run = copy_run()
    rows = len(examples(run / "data" / "train.arrow"))
    cfg = make_config(run, tiny_qwen2_dir, tiny_corpus, "train.epochs=0.1", "train.gradient_accumulation_steps=2")
    m = run_train(cfg).metrics
    assert m["steps"] == math.ceil(0.1 * rows / 4) != 8  # batch 2 × 2 accumulated; train.max_steps=8 not read
    assert m["epochs"] == pytest.approx(m["steps"] * 4 / rows, abs=0.01)


def test_epochs_count_every_process_s_rows_and_max_steps_stands_without_them():
    t = SimpleNamespace(epochs=1.0, max_steps=5, per_device_batch_size=2, gradient_accumulation_steps=2)
    assert optimizer_steps(t, rows=100, world=1) == 25
    assert optimizer_steps(t, rows=100, world=2) == 13  # two processes take twice the rows a step
    assert optimizer_steps(SimpleNamespace(**{**vars(t), "epochs": 0.001}), rows=100, world=1) == 1
    assert optimizer_steps(SimpleNamespace(**{**vars(t), "epochs": None}), rows=100, world=2) == 5


@pytest.mark.slow
def test_killed_run_resumes_from_last_complete_checkpoint_and_matches(
    copy_run, tiny_qwen2_dir, tiny_corpus, tmp_path, make_config
):
    """SIGKILL mid-run, plant a half-written checkpoint, resume: the loss curve equals an uninterrupted run."""
    steps = ["train.max_steps=40", "train.save_steps=4"]
    ref = tmp_path / "reference"
    import shutil

    shutil.copytree(copy_run(), ref)
    reference = run_train(make_config(ref, tiny_qwen2_dir, tiny_corpus, *steps))

    run = tmp_path / "killed"
    shutil.copytree(ref, run, ignore=shutil.ignore_patterns("train"))
    overrides = [
        f"run_dir={run}",
        f"model.path={tiny_qwen2_dir}",
        f"data.sources=[{tiny_corpus}]",
        "data.max_pairs=200",
        "data.eval_fraction=0.2",
        "data.max_seq_len=256",
        "train.per_device_batch_size=2",
        "train.logging_steps=1",
        "train.learning_rate=3e-3",
        "train.lora_dropout=0",
        "train.warmup_steps=0",
        "train.eval_batches=4",
        *steps,
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ferrylm", "train", *overrides], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    marker = run / "train" / "checkpoints" / "checkpoint-12" / MARKER
    deadline = time.time() + 300
    while not marker.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (run / "train" / "adapter").exists()
    # A save that was killed half-way: a newer folder without the completion marker.
    half = run / "train" / "checkpoints" / "checkpoint-99"
    half.mkdir()
    (half / "adapter_model.safetensors").write_bytes(b"truncated")

    resumed = run_train(make_config(run, tiny_qwen2_dir, tiny_corpus, *steps))
    assert not half.exists()
    resumed_from = int(resumed.metrics["resumed_from"].rsplit("-", 1)[1])
    assert 12 <= resumed_from < 40
    assert resumed.metrics["steps"] == 40
    a, b = _history(ref), _history(run)
    assert sorted(a) == sorted(b) == list(range(1, 41))
    for step in a:
        assert b[step] == pytest.approx(a[step], abs=1e-4), step
    assert resumed.metrics["eval_loss"] == pytest.approx(reference.metrics["eval_loss"], abs=1e-4)
