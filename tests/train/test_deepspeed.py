"""The same train stage under DeepSpeed ZeRO-2 and ZeRO-3, two processes on CPU (gloo), launched by
`ferrylm launch`."""

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from tests.pinning import pinned
from tests.train.two_processes import overrides


def _overrides(run, tiny_qwen2_dir, tiny_corpus) -> list[str]:
    return overrides(run, tiny_qwen2_dir, tiny_corpus, 6, 3)


def _launch(run, tiny_qwen2_dir, tiny_corpus, *extra):
    overrides = [*_overrides(run, tiny_qwen2_dir, tiny_corpus), *extra]
    # Through our launcher: `ferrylm launch --nproc 2` execs torchrun (standalone rendezvous).
    proc = subprocess.run(
        [sys.executable, "-m", "ferrylm", "launch", "--nproc", "2", *overrides],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _resume_on_one_process(run, tiny_qwen2_dir, tiny_corpus, *extra):
    """Go on to step 9 in one process from the two-process checkpoint of step 6. ZeRO's optimizer
    shards are laid out per rank, so the train stage converts the checkpoint to DeepSpeed's universal
    format first."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferrylm",
            "train",
            *_overrides(run, tiny_qwen2_dir, tiny_corpus),
            *extra,
            "train.max_steps=9",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((run / "train" / "record.json").read_text())["metrics"]
    assert (m["resumed_from_world_size"], m["world_size"], m["steps"]) == (2, 1, 9)
    history = [json.loads(line) for line in (run / "train" / "log_history.jsonl").read_text().splitlines()]
    evals = {h["step"]: h["eval_loss"] for h in history if "eval_loss" in h}
    assert evals[9] < evals[6] < evals[0]  # the loss goes on from where it was


@pytest.mark.slow
def test_zero2_two_processes_then_resumed_on_one(copy_run, tiny_qwen2_dir, tiny_corpus):
    run = copy_run()
    _launch(run, tiny_qwen2_dir, tiny_corpus, "train.deepspeed=zero2")
    m = json.loads((run / "train" / "record.json").read_text())["metrics"]
    assert m["deepspeed"] == "zero2" and m["world_size"] == 2 and m["steps"] == 6
    assert m["eval_loss"] < m["base_eval_loss"]
    # DeepSpeed wrote its own sharded engine state: the ZeRO path really ran.
    ckpt = run / "train" / "checkpoints" / "checkpoint-6"
    assert (ckpt / "COMPLETE").is_file()
    assert list(ckpt.glob("global_step6/*optim_states.pt"))
    assert (run / "train" / "adapter" / "adapter_model.safetensors").is_file()

    _resume_on_one_process(run, tiny_qwen2_dir, tiny_corpus, "train.deepspeed=zero2")
    universal = ckpt / "global_step6_universal" / "zero"
    adapter6 = load_file(ckpt / "adapter_model.safetensors")
    for key, saved in adapter6.items():  # the universal checkpoint holds the trained weights, whole
        name = key.replace(".weight", ".default.weight")
        assert torch.equal(torch.load(universal / name / "fp32.pt", weights_only=False)["param"], saved), key
        assert (universal / name / "exp_avg.pt").is_file()


ZERO3_OFFLOAD = ("train.deepspeed=zero3", "train.offload_optimizer=true", "train.offload_params=true")


@pytest.mark.slow
def test_zero3_with_offload_saves_a_whole_adapter(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    """ZeRO-3 shards every weight, LoRA's too; a save that does not gather them writes empty tensors
    (a failure known from other toolkits). Parameters and optimizer states offloaded to CPU RAM.
    Then the two-process checkpoint resumes on one process (universal checkpoint, as under ZeRO-2)."""
    run = copy_run()
    _launch(run, tiny_qwen2_dir, tiny_corpus, *ZERO3_OFFLOAD)
    m = json.loads((run / "train" / "record.json").read_text())["metrics"]
    assert m["deepspeed"] == "zero3" and m["offload"] == ["optimizer", "params"] and m["world_size"] == 2
    assert m["eval_loss"] < m["base_eval_loss"]
    adapter = load_file(run / "train" / "adapter" / "adapter_model.safetensors")
    cfg = json.loads((tiny_qwen2_dir / "config.json").read_text())
    a = [v for k, v in adapter.items() if "q_proj.lora_A" in k]
    assert len(a) == cfg["num_hidden_layers"] and all(v.shape == (8, cfg["hidden_size"]) for v in a)
    # LoRA B starts at zero: non-zero B matrices of full shape are the trained, gathered values.
    assert all(torch.count_nonzero(v) > 0 for k, v in adapter.items() if "lora_B" in k)
    # And the rest of the pipeline takes it.
    from ferrylm.export import run_export

    rec = run_export(make_config(run, tiny_qwen2_dir, tiny_corpus))
    assert rec.metrics["parity"]["greedy_tokens_equal"] == rec.metrics["parity"]["prompts"]

    _resume_on_one_process(run, tiny_qwen2_dir, tiny_corpus, *ZERO3_OFFLOAD)
    assert (run / "train" / "checkpoints" / "checkpoint-6" / "latest_universal").is_file()


def test_launch_commands_and_slurm_script(tmp_path):
    from ferrylm.train.launch import sbatch_script, torchrun_command

    one = torchrun_command(4, "run.yaml", ["train.deepspeed=zero2"], python="py")
    assert one == [
        "py",
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=4",
        "--standalone",
        "-m",
        "ferrylm",
        "train",
        "--config",
        "run.yaml",
        "train.deepspeed=zero2",
    ]
    multi = torchrun_command(8, None, [], nnodes=4, node_rank=2, rdzv="node0:29500", python="py")
    assert multi[3:9] == [
        "--nproc_per_node=8",
        "--nnodes=4",
        "--node_rank=2",
        "--rdzv_backend=c10d",
        "--rdzv_endpoint=node0:29500",
        "--rdzv_id=ferrylm",
    ]
    script = sbatch_script(8, 4, "run.yaml", ["train.max_steps=100"], workdir="/src/proj", python="py")
    assert "#SBATCH --nodes=4" in script and "#SBATCH --gpus-per-node=8" in script
    assert '"--rdzv_endpoint=$HEAD:29500"' in script and '"--rdzv_id=$SLURM_JOB_ID"' in script
    assert "--node_rank" not in script and "train.max_steps=100" in script
    cpu = sbatch_script(2, 1, None, [], cpus_per_task=2, gpus=False, python="py")  # ferrylm launch --cpu
    assert "--gpus-per-node" not in cpu and "#SBATCH --cpus-per-task=2" in cpu and "--standalone" in cpu
    path = tmp_path / "t.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0  # valid shell
    out = subprocess.run(
        [sys.executable, "-m", "ferrylm", "launch", "--nproc", "2", "--dry-run", "train.max_steps=3"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and "--nproc_per_node=2 --standalone -m ferrylm train train.max_steps=3" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "ferrylm", "launch", "--nproc", "2", "train.max_stepz=3"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "train.max_stepz" in bad.stderr


@pytest.mark.slow
def test_zero3_full_fine_tune_with_leaf_layers_trains_the_same_numbers(copy_run, tiny_qwen2_dir, tiny_corpus):
    """A full fine-tune under ZeRO-3 gathers each decoder layer whole by default; the losses are those
    of the same run gathering per module (train.zero3_leaf_layers=false, measured once and pinned:
    only the order of the collectives differs)."""
    run = copy_run()
    _launch(run, tiny_qwen2_dir, tiny_corpus, "train.deepspeed=zero3", "train.method=full")
    assert "ZeRO-3 gathers each of" in (run / "ferrylm.log").read_text()
    history = [json.loads(line) for line in (run / "train" / "log_history.jsonl").read_text().splitlines()]
    losses = [h["loss"] for h in history if "loss" in h]
    evals = [h["eval_loss"] for h in history if "eval_loss" in h]
    pinned("zero3 curve", "zero3-loss", losses, [10.81078, 10.71552, 10.59749, 10.43636, 10.43157, 10.42395])
    pinned("zero3 eval losses", "zero3-loss", evals, [10.79327, 10.33004])


def test_zero3_leaf_layers_mark_each_decoder_layer(tiny_qwen2_dir, caplog):
    """The default under ZeRO-3: each decoder layer is one leaf (gathered whole), nothing else is; a
    model without decoder layers keeps per-module gathering and says so."""
    from transformers import AutoModelForCausalLM

    from ferrylm.train.build import zero3_leaf_layers

    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir)
    zero3_leaf_layers(model)
    leaves = [name for name, m in model.named_modules() if getattr(m, "_z3_leaf", False)]
    assert leaves == [f"model.layers.{i}" for i in range(model.config.num_hidden_layers)]
    zero3_leaf_layers(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    assert "no module named *DecoderLayer" in caplog.text
