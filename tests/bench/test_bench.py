"""`ferrylm bench` on the tiny Qwen2: one row per strategy from real short training runs, each in its
own process; a strategy that cannot run here is a row with its reason and the others complete; the
loss column is the loss a plain training run of the same config reaches. (SmolLM2's rows, with
decoding of its exported artifacts, are a step of tests/test_pipeline_e2e.py.)"""

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ferrylm.bench import run_bench
from ferrylm.bench.rows import synthetic
from ferrylm.bench.strategies import TRAINING, plan
from ferrylm.bench.trials import failure_reason, run_process, trial_config
from ferrylm.cli import main
from ferrylm.data.encode import load_rows
from ferrylm.train import run_train

pytestmark = pytest.mark.slow


def test_auto_runs_what_applies_here_and_names_why_the_rest_does_not():
    run, skipped = plan("auto", has_cuda=False, gpus=1)
    assert [s.name for s in run] == [n for n, s in TRAINING.items() if s.needs is None]
    assert skipped == {
        "full-fp16": "needs a CUDA GPU",
        "lora-bf16-liger": "needs a CUDA GPU",
        "qlora-bf16-ckpt": "needs a CUDA GPU",
        "lora-fp8base": "needs a CUDA GPU",
        "lora-fp8base-compiled": "needs a CUDA GPU",
        **{n: "ZeRO shards over several GPUs; this machine has none" for n in TRAINING if n.startswith("zero")},
    }
    run, skipped = plan("auto", has_cuda=True, gpus=2)
    assert len(run) == len(TRAINING) and not skipped
    run, _ = plan("auto", has_cuda=True, gpus=1)
    assert not any(s.needs == "gpus" for s in run)
    # Named strategies run whatever the machine: the train stage's own refusal becomes the row.
    assert [s.name for s in plan(["lora-bf16-liger"], False, 1)[0]] == ["lora-bf16-liger"]


def test_a_strategy_sets_every_knob_that_tells_strategies_apart(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    # A config that turns on checkpointing and compilation must not leak them into a plain row.
    cfg = make_config(
        copy_run(),
        tiny_qwen2_dir,
        tiny_corpus,
        "train.gradient_checkpointing=true",
        "train.compile=layers",
        "train.method=full",
    )
    t = trial_config(cfg, TRAINING["lora-bf16"], cfg.stage_dir("bench") / "t").train
    assert (t.method, t.precision, t.gradient_checkpointing, t.compile, t.deepspeed) == (
        "lora",
        "bf16",
        False,
        "none",
        None,
    )
    t = trial_config(cfg, TRAINING["lora-bf16-ckpt-half"], cfg.stage_dir("bench") / "t").train
    assert (t.gradient_checkpointing, t.checkpoint_fraction, t.max_steps, t.save_steps) == (True, 0.5, 4, 0)


def test_synthetic_rows_are_seeded_and_of_the_set_length(tiny_qwen2_dir, tmp_path, make_config):
    cfg = make_config(tmp_path / "run", tiny_qwen2_dir, tmp_path)
    a = synthetic(cfg, tmp_path / "a", rows=5, seq_len=40)
    b = synthetic(cfg, tmp_path / "b", rows=5, seq_len=40)
    rows_a, rows_b = load_rows(a["train"]), load_rows(b["train"])
    assert len(rows_a) == 5 and all(len(r) == 40 for r in rows_a["input_ids"])
    assert rows_a["input_ids"] == rows_b["input_ids"] == rows_a["labels"]
    assert len(set(np.array(rows_a["input_ids"]).ravel())) > 100  # random ids over the vocabulary


def test_failure_reasons_are_one_line(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert failure_reason(log, False, 60) == "does not fit: CUDA out of memory. Tried to allocate 2.00 GiB"
    log.write_text("INFO loading\nferrylm: error: train.method: qlora needs bitsandbytes\n")
    assert failure_reason(log, False, 60) == "train.method: qlora needs bitsandbytes"
    assert failure_reason(log, True, 60) == "stopped after bench.trial_timeout_s=60 s"
    # Under a launcher: the rank's exception, not the launcher's trailer after it.
    log.write_text(
        "[rank0]: RuntimeError: Error(s) in loading state_dict for Qwen2ForCausalLM:\n"
        'File "torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367\n'
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    )
    assert (
        failure_reason(log, False, 60) == "[rank0]: RuntimeError: Error(s) in loading state_dict for Qwen2ForCausalLM:"
    )


def test_bench_measures_each_strategy_and_its_loss_is_a_plain_runs(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    run_dir = copy_run()
    bench = ["bench.strategies=[full-fp32,lora-bf16-ckpt,lora-bf16-liger]", "bench.warmup_steps=1", "bench.steps=2"]
    cfg = make_config(run_dir, tiny_qwen2_dir, tiny_corpus, *bench)
    record = run_bench(cfg)
    results = json.loads((run_dir / "bench" / "bench.json").read_text())
    rows = {r["strategy"]: r for r in results["training"]}
    assert list(rows) == ["full-fp32", "lora-bf16-ckpt", "lora-bf16-liger"]
    assert results["rows"]["kind"] == "data"  # the data stage had run: its rows, not random ones
    for name in ("full-fp32", "lora-bf16-ckpt"):
        r = rows[name]
        assert r["status"] == "ok" and r["steps_timed"] == 2 and r["tokens_per_s"] > 0
        assert 0.1 < r["host_rss_gib"] < 8 and math.isfinite(r["loss"])
        assert r["precision"] == ("fp32" if name == "full-fp32" else "bf16")
    assert rows["lora-bf16-liger"]["status"] == "failed"
    assert rows["lora-bf16-liger"]["reason"] == "train.liger: Liger's kernels are Triton kernels and need a CUDA GPU"
    assert record.metrics["failed"] == ["lora-bf16-liger"]
    assert results["decode_skipped"] == {"every artifact": "no export record in this run: run `ferrylm export` first"}
    md = (run_dir / "bench" / "bench.md").read_text()
    assert "| lora-bf16-liger |" in md and "failed: train.liger" in md
    assert (run_dir / "bench" / "bench.html").read_text().count("data:image/png;base64,") == 1  # no decoding: one plot
    assert not (run_dir / "bench" / "trials" / "full-fp32" / "train" / "model").exists()  # trials keep numbers only

    # The same strategy as a plain training run of its own: the same loss after the same steps.
    plain = trial_config(cfg, TRAINING["lora-bf16-ckpt"], run_dir / "plain")
    (run_dir / "plain").mkdir()
    (run_dir / "plain" / "data").symlink_to(run_dir / "data")
    assert run_train(plain).metrics["final_train_loss"] == pytest.approx(rows["lora-bf16-ckpt"]["loss"], rel=1e-5)


def test_a_trial_past_its_time_limit_is_stopped_and_reported(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    run_dir = copy_run()
    cfg = make_config(run_dir, tiny_qwen2_dir, tiny_corpus, "bench.strategies=[lora-bf16]", "bench.trial_timeout_s=2")
    run_bench(cfg)
    row = json.loads((run_dir / "bench" / "bench.json").read_text())["training"][0]
    assert (row["status"], row["reason"]) == ("failed", "stopped after bench.trial_timeout_s=2 s")


def test_a_stopped_trial_leaves_no_process_behind(tmp_path):
    """A launcher's ranks run in sessions of their own (torchrun's do): stopping the trial's process
    group alone left one holding a GPU. The trial's whole process tree goes."""
    pidfile = tmp_path / "pid"
    script = (
        "import subprocess, time; p = subprocess.Popen(['sleep', '120'], start_new_session=True); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(120)"
    )
    out = run_process([sys.executable, "-c", script], tmp_path / "log.txt", timeout_s=3)
    assert out["timed_out"]
    stat = Path("/proc", pidfile.read_text(), "stat")
    for _ in range(50):  # reaped by init, or a zombie until then
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the trial's grandchild in its own session is still running")


def test_an_unknown_strategy_is_one_line_naming_the_key(capsys):
    assert main(["bench", "bench.strategies=[lora-bf16,fast]"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("ferrylm: error: bench.strategies: unknown strategy fast (known: full-fp32,") and "\n" not in err
    )


def test_the_config_knows_every_strategy_the_bench_runs():
    from ferrylm.config.bench import STRATEGIES

    assert tuple(TRAINING) == STRATEGIES  # the config validates names without importing the stage
