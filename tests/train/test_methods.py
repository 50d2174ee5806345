"""The other training methods on the tiny Qwen2, for real: a full fine-tune (then exported), QLoRA
on a 4-bit base (bitsandbytes' CPU kernels), and refusals for what this machine cannot do."""

import json

import pytest
import torch
from safetensors.torch import load_file

from ferrylm.export import run_export
from ferrylm.manifest import read_record
from ferrylm.train import run_train
from ferrylm.train.build import TrainSetupError


def test_full_fine_tune_trains_every_weight_and_exports(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    run = copy_run()
    cfg = make_config(run, tiny_qwen2_dir, tiny_corpus, "train.method=full", "train.learning_rate=1e-3")
    m = run_train(cfg).metrics
    assert m["method"] == "full" and m["steps"] == 8
    assert m["eval_loss"] < m["base_eval_loss"] - 0.05
    model_dir = run / "train" / "model"
    assert not (run / "train" / "adapter").exists()
    trained, base = load_file(model_dir / "model.safetensors"), load_file(tiny_qwen2_dir / "model.safetensors")
    assert trained.keys() == base.keys()
    changed = [k for k in base if not torch.equal(trained[k], base[k])]
    assert len(changed) > 0.9 * len(base), "a full fine-tune must move (nearly) every tensor"
    # Export: nothing to merge; the artifact is the trained model, held to itself.
    rec = run_export(cfg)
    manifest = json.loads((run / "export" / "merged" / "manifest.json").read_text())
    assert manifest["parity"]["reference"] == "the fine-tuned model (PyTorch)"
    assert manifest["parity"]["greedy_tokens_equal"] == manifest["parity"]["prompts"]
    assert manifest["merge"]["weights_merged"] == 0 and "trained_model_sha256" in manifest["inputs"]
    assert rec.metrics["parity"]["max_abs_logit_diff"] < 1e-4


def test_qlora_trains_adapters_on_a_4bit_base_and_exports(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    pytest.importorskip("bitsandbytes")
    run = copy_run()
    cfg = make_config(run, tiny_qwen2_dir, tiny_corpus, "train.method=qlora", "train.lora_r=8")
    m = run_train(cfg).metrics
    assert m["method"] == "qlora"
    # The 4-bit base's own held-out loss is the step-0 eval; the adapters lower it.
    assert m["eval_loss"] < m["base_eval_loss"] - 0.05
    adapter = load_file(run / "train" / "adapter" / "adapter_model.safetensors")
    assert any("lora_B" in k and v.abs().sum() > 0 for k, v in adapter.items())
    # The adapter is merged into the full-precision base, as QLoRA adapters are shipped.
    rec = run_export(cfg)
    assert rec.metrics["parity"]["greedy_tokens_equal"] == rec.metrics["parity"]["prompts"]
    assert read_record(run / "export")["outputs"]["merged"]


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.precision=fp16", "train.precision: fp16 training (with loss scaling) needs a CUDA GPU"),
        ("train.liger=true", "train.liger: Liger's kernels are Triton kernels and need a CUDA GPU"),
        ("train.attention=flash_attention_2", "train.attention: flash_attention_2 needs a CUDA GPU"),
    ],
)
def test_what_a_cpu_cannot_do_is_refused_before_loading(
    override, message, copy_run, tiny_qwen2_dir, tiny_corpus, make_config
):
    import re

    run = copy_run()
    with pytest.raises(TrainSetupError, match=re.escape(message)):
        run_train(make_config(run, tiny_qwen2_dir, tiny_corpus, override))
    assert not (run / "train").exists()


@pytest.mark.slow
def test_one_process_zero2_with_optimizer_offload(copy_run, tiny_qwen2_dir, tiny_corpus):
    """The a800-80g shape on CPU: a single process (no launcher) under ZeRO-2 with the optimizer
    states offloaded, full fine-tune. In a subprocess: DeepSpeed's process group outlives a run."""
    import subprocess
    import sys

    run = copy_run()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferrylm",
            "train",
            f"run_dir={run}",
            f"model.path={tiny_qwen2_dir}",
            "train.method=full",
            "train.deepspeed=zero2",
            "train.offload_optimizer=true",
            "train.max_steps=3",
            "train.save_steps=0",
            "train.per_device_batch_size=2",
            "train.eval_batches=2",
            "train.logging_steps=1",
            "train.learning_rate=1e-3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((run / "train" / "record.json").read_text())["metrics"]
    assert (m["method"], m["deepspeed"], m["offload"], m["world_size"]) == ("full", "zero2", ["optimizer"], 1)
    assert m["eval_loss"] < m["base_eval_loss"]
    assert not (run / "train" / "checkpoints").exists() or not any((run / "train" / "checkpoints").iterdir())
    assert (run / "train" / "model" / "model.safetensors").is_file()


@pytest.mark.integration
def test_cli_refusal_is_one_line(copy_run, tiny_qwen2_dir):
    """A shipped GPU preset on this CPU: the CLI answers with one line naming the key, exit 2
    (on a run whose data stage is done, so the missing-input check passes first)."""
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferrylm",
            "train",
            "--config",
            "4gpu-zero3-offload",
            f"run_dir={copy_run()}",
            f"model.path={tiny_qwen2_dir}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("ferrylm: error: train.precision: fp16")
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_compiled_layers_train_the_same_numbers(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    """train.compile=layers (each decoder layer through torch.compile) is a speed setting, not a
    different model: in fp32 on this CPU its losses equal the eager run's."""
    import shutil

    losses = {}
    for mode in ("none", "layers"):
        run = copy_run()
        m = run_train(
            make_config(
                run, tiny_qwen2_dir, tiny_corpus, f"train.compile={mode}", "train.max_steps=4", "train.save_steps=0"
            )
        ).metrics
        assert m["compile"] == mode
        history = [json.loads(line) for line in (run / "train" / "log_history.jsonl").read_text().splitlines()]
        losses[mode] = [h["loss"] for h in history if "loss" in h] + [m["eval_loss"]]
        shutil.rmtree(run)
    assert len(losses["none"]) == 5
    assert losses["layers"] == pytest.approx(losses["none"], abs=1e-4)
    assert losses["none"][-1] < losses["none"][0]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["train.compile=model", "train.liger=true"], "train.compile: model-wide compilation breaks Liger's kernels"),
        (["train.compile=layers", "train.deepspeed=zero3"], "train.compile: not with qlora or zero3"),
    ],
)
def test_compile_combinations_that_cannot_work_are_refused(overrides, message, tmp_path):
    from ferrylm.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=message):
        load_config("default", [f"run_dir={tmp_path}", *overrides])
