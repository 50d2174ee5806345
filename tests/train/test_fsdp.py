"""FSDP2 (train.fsdp), two processes on CPU (gloo) through `ferrylm launch`: the numbers of the unsharded run on the
same processes, checkpoints written sharded, and a killed run that resumes to the same weights."""

import json
import signal
import subprocess
import time

import psutil
import pytest
import torch
from safetensors.torch import load_file

from tests.pinning import pinned
from tests.train.two_processes import launch, overrides

STEPS = 12  # a kill at the first checkpoint leaves most of the run to resume


def _launch(run, tiny_qwen2_dir, tiny_corpus, *extra, wait: bool = True):
    cmd = launch(*overrides(run, tiny_qwen2_dir, tiny_corpus, STEPS, 2, *extra))
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((run / "train" / "record.json").read_text())["metrics"]


def _losses(run) -> dict[int, float]:
    history = [json.loads(line) for line in (run / "train" / "log_history.jsonl").read_text().splitlines()]
    return {h["step"]: h["loss"] for h in history if "loss" in h and "eval_loss" not in h}


def _adapter(run) -> dict[str, torch.Tensor]:
    return load_file(run / "train" / "adapter" / "adapter_model.safetensors")


@pytest.mark.slow
def test_fsdp2_trains_as_the_unsharded_run_and_a_killed_run_resumes_to_the_same_weights(
    copy_run, tiny_qwen2_dir, tiny_corpus
):
    plain, sharded, killed = copy_run("plain"), copy_run("sharded"), copy_run("killed")
    _launch(plain, tiny_qwen2_dir, tiny_corpus)
    m = _launch(sharded, tiny_qwen2_dir, tiny_corpus, "train.fsdp=full_shard")
    assert (m["fsdp"], m["world_size"], m["steps"]) == ("full_shard", 2, STEPS)
    # sharded state through torch.distributed.checkpoint: the FSDP2 path really ran
    ckpt = sharded / "train" / "checkpoints" / f"checkpoint-{STEPS}"
    assert list((ckpt / "pytorch_model_fsdp_0").glob("*.distcp")) and list((ckpt / "optimizer_0").glob("*.distcp"))
    # the same steps on the same processes: sharding changes where the numbers live, not what they are
    assert _losses(sharded) == pytest.approx(_losses(plain), abs=1e-4)
    whole, parts = _adapter(plain), _adapter(sharded)
    assert sorted(parts) == sorted(whole)
    assert all(torch.allclose(parts[k], whole[k], atol=1e-5) for k in whole)
    assert all(torch.count_nonzero(v) for k, v in parts.items() if "lora_B" in k)  # gathered, not empty shards

    proc = _launch(killed, tiny_qwen2_dir, tiny_corpus, "train.fsdp=full_shard", wait=False)
    marker = killed / "train" / "checkpoints" / "checkpoint-2" / "COMPLETE"
    deadline = time.monotonic() + 300
    while not marker.is_file() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
        p.send_signal(signal.SIGKILL)  # torchrun and both workers at once (the workers have sessions of their own)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (killed / "train" / "adapter").exists()
    m = _launch(killed, tiny_qwen2_dir, tiny_corpus, "train.fsdp=full_shard")
    assert 2 <= int(m["resumed_from"].rsplit("-", 1)[1]) < STEPS and m["steps"] == STEPS
    assert _losses(killed) == pytest.approx(_losses(sharded), abs=1e-4)
    again = _adapter(killed)
    assert all(torch.allclose(again[k], parts[k], atol=1e-5) for k in parts)


@pytest.mark.slow
def test_a_full_fine_tune_under_fsdp2_trains_the_zero3_numbers_and_exports(
    copy_run, tiny_qwen2_dir, tiny_corpus, make_config
):
    """shard_grad_op with the parameters offloaded, method=full: the loss curve pinned for ZeRO-3's full fine-tune of
    the same run (tests/train/test_deepspeed.py), and the model gathered whole for the export."""
    run = copy_run()
    proc = subprocess.run(
        launch(*overrides(run, tiny_qwen2_dir, tiny_corpus, 6, 3, "train.method=full", *FULL)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((run / "train" / "record.json").read_text())["metrics"]
    assert (m["fsdp"], m["world_size"], m["steps"]) == ("shard_grad_op", 2, 6)
    history = [json.loads(line) for line in (run / "train" / "log_history.jsonl").read_text().splitlines()]
    losses = [h["loss"] for h in history if "loss" in h]
    pinned("fsdp2 full curve", "zero3-loss", losses, [10.81078, 10.71552, 10.59749, 10.43636, 10.43157, 10.42395])
    from ferrylm.export import run_export

    rec = run_export(make_config(run, tiny_qwen2_dir, tiny_corpus, "train.method=full", *FULL))
    assert rec.metrics["parity"]["greedy_tokens_equal"] == rec.metrics["parity"]["prompts"]


FULL = ("train.fsdp=shard_grad_op", "train.offload_params=true")


def test_an_fsdp2_checkpoint_resumed_on_another_world_size_is_one_line(tmp_path, monkeypatch):
    from ferrylm.train.fsdp import OtherWorld, check_world

    ckpt = tmp_path / "checkpoint-4"
    ckpt.mkdir()
    for rank in (0, 1):
        (ckpt / f"rng_state_{rank}.pth").write_bytes(b"")
    monkeypatch.setenv("WORLD_SIZE", "2")
    check_world(ckpt)
    monkeypatch.setenv("WORLD_SIZE", "1")
    with pytest.raises(OtherWorld) as e:
        check_world(ckpt)
    assert str(e.value) == (
        f"train.fsdp: {ckpt} was written by 2 process(es), this run has 1: resume with `ferrylm launch --nproc 2`, "
        "or set train.resume=false to start again"
    )
