"""The memory planner against Qwen2.5-7B's real parameter count and against peaks measured on an H200."""

import json
from pathlib import Path

import pytest

from ferrylm.cli import main
from ferrylm.config import ConfigError
from ferrylm.train.plan import QWEN25_7B, Setup, estimate, load_setup

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_qwen25_7b_parameter_counts():
    assert QWEN25_7B.params() == 7_615_616_512
    assert QWEN25_7B.lora_params(16) == 40_370_176  # all seven linear projections, 28 layers


@pytest.mark.parametrize("name", ["peaks_h200.json", "peaks_h200_heldout.json", "peaks_h200_heldout2.json"])
def test_planner_matches_measured_peaks(name):
    data = json.loads((RESULTS / name).read_text())
    keys = (
        "method",
        "lora_r",
        "gradient_checkpointing",
        "seq_len",
        "micro_batch",
        "lora_dropout",
        "optimizer_precision",
    )
    for row in data["rows"]:
        setup = Setup(**{k: row[k] for k in keys if k in row}, gpu_memory_gib=139.8)
        planned = estimate(setup).total_gib - setup.reserve_gib  # torch's allocated peak excludes the reserve
        assert planned == pytest.approx(row["allocated_peak_gib"], rel=0.05), row


def test_seed_a40_plan_is_refuted_with_a_fix(capsys):
    setup, notes = load_setup("a40x2")
    plan = estimate(setup)
    assert not plan.fits and plan.total_gib > 60  # the seed's "43 GB per card" cannot hold
    assert plan.advice == "train.offload_optimizer=true"
    assert main(["plan", "a40x2"]) == 0
    out = capsys.readouterr().out
    assert "does NOT fit" in out and "the seed document claims 40 GiB per GPU" in out


def test_checkpointing_and_sharding_move_the_peak():
    base = estimate(Setup(gradient_checkpointing=False)).total_gib
    assert estimate(Setup(gradient_checkpointing=True)).total_gib < base / 2
    full = [estimate(Setup(method="full", gpus=4, zero_stage=z, gpu_memory_gib=80)).total_gib for z in (1, 2, 3)]
    assert full[0] > full[1] > full[2]


def test_bad_plan_input(capsys):
    with pytest.raises(ConfigError, match="train.sequ: unknown key"):
        load_setup("a40x2", ["train.sequ=3"])
    assert main(["plan", "nope"]) == 2
    assert "neither a file nor a preset" in capsys.readouterr().err


def test_every_hardware_preset_is_a_valid_run_config_and_plans():
    from ferrylm.config import load_config, preset_names
    from ferrylm.train.plan import setup_from_config

    names = set(preset_names()) - {"default", "demo-gpu"}  # the demos: SmolLM2 and Qwen2.5-Coder-1.5B, not Qwen2.5-7B
    assert names >= {
        "a40x2",
        "a800-80g",
        "a800-80g-aggressive",
        "a6000x2-qlora",
        "4gpu-zero3-offload",
        "6x32g-zero3",
        "h100-80g",
        "h200-141g",
    }
    for name in names:
        cfg = load_config(name)
        setup = setup_from_config(cfg)
        assert setup.gpus == cfg.hardware.gpus and setup.seq_len == cfg.data.max_seq_len
        # Every shipped preset but the seed's own A40 full fine-tune (kept to be refuted) fits its hardware.
        assert estimate(setup).fits == (name != "a40x2"), name
    zero3 = setup_from_config(load_config("4gpu-zero3-offload"))
    assert (zero3.zero_stage, zero3.offload_params, zero3.method) == (3, True, "full")
    assert load_config("4gpu-zero3-offload").train.precision == "fp16"


def test_selective_checkpointing_is_between_none_and_all():
    peaks = [estimate(Setup(checkpoint_fraction=f)).total_gib for f in (1.0, 0.5, 0.0)]
    assert peaks[0] < peaks[1] < peaks[2]
    assert estimate(Setup(gradient_checkpointing=False)).total_gib == pytest.approx(peaks[2])


def test_planner_matches_ferrylm_train_under_zero_on_two_h200():
    """Rows measured by benchmarks/train_zero.py (ferrylm launch, DeepSpeed ZeRO-2/3, 2 x H200): each row's
    run config goes through the same setup_from_config that `ferrylm plan` uses. Liger rows are left
    out (the planner models HF kernels), and rows the results mark invalid."""
    checked = 0
    for run in "bcd":
        for row in json.loads((RESULTS / f"train_zero_h200x2_run_{run}.json").read_text())["rows"]:
            if "invalid" in row or "train.liger=true" in row["overrides"]:
                continue
            assert _planned_allocated(row) == pytest.approx(row["peak_allocated_gib_rank0"], rel=0.05), row["variant"]
            checked += 1
    assert checked == 4


def _planned_allocated(row: dict) -> float:
    """The plan, less its reserve (torch's allocated peak holds no CUDA context), for a benchmarks/train_zero.py row."""
    import importlib.util

    from ferrylm.config import load_config
    from ferrylm.train.plan import setup_from_config

    spec = importlib.util.spec_from_file_location("train_zero", RESULTS.parent / "train_zero.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # measured before train.fused_head existed: the loss over every position's logits
    overrides = [*bench.COMMON, *row["overrides"], f"hardware.gpus={row['gpus']}", "train.fused_head=false"]
    setup = setup_from_config(load_config("default", overrides))
    return estimate(setup).total_gib - setup.reserve_gib


@pytest.mark.parametrize(
    "results",
    [
        "train_zero_h100_run_a.json",
        "train_zero_h100_run_d.json",
        "train_zero_h200x2_run_b.json",
        "train_zero_h100_planner_heldout.json",
    ],
)
def test_planner_models_liger_and_compiled_layers(results):
    """Rows with Liger's kernels or compiled layers (measured through `ferrylm train` on an H100 and
    2 x H200) within 10 %: the planner models what those kernels keep, not HF's eager kernels."""
    checked = 0
    for row in json.loads((RESULTS / results).read_text())["rows"]:
        fused = [
            o for o in row["overrides"] if o in ("train.liger=true", "train.compile=layers", "train.compile=model")
        ]
        if "invalid" in row or not fused or not row.get("peak_allocated_gib_rank0"):
            continue
        assert _planned_allocated(row) == pytest.approx(row["peak_allocated_gib_rank0"], rel=0.10), row["variant"]
        checked += 1
    assert checked >= 1


def test_the_fp8_base_plans_the_same_weights_and_one_products_transient():
    """train.base_precision=fp8 keeps two e4m3 layouts (as many bytes as bf16) and briefly an fp32 and an
    e4m3 copy of one product's input: the plan moves by that alone, and says FP8 base."""
    from ferrylm.config import load_config
    from ferrylm.train.plan import report, setup_from_config

    base = setup_from_config(load_config("h100-80g"))
    fp8 = setup_from_config(load_config("h100-80g", ["train.base_precision=fp8"]))
    a, b = estimate(base), estimate(fp8)
    assert b.weights_gib == a.weights_gib and b.optimizer_gib == a.optimizer_gib
    transient = base.seq_len * base.micro_batch * base.shape.intermediate * 5 / 2**30
    assert b.activations_gib - a.activations_gib == pytest.approx(transient)
    assert ", FP8 base" in report("x", fp8, {}) and ", FP8 base" not in report("x", base, {})


def test_fsdp2_is_planned_as_the_zero_stage_it_shards_like():
    """full_shard shards as ZeRO-3, shard_grad_op as ZeRO-2; FSDP2's offload takes the optimizer step too."""
    from ferrylm.config import load_config
    from ferrylm.train.plan import setup_from_config

    def planned(*overrides):
        return setup_from_config(load_config("4gpu-zero3-offload", ["train.deepspeed=null", *overrides]))

    zero3 = setup_from_config(load_config("4gpu-zero3-offload"))
    full = planned("train.fsdp=full_shard", "train.offload_optimizer=false")
    assert (full.zero_stage, full.offload_params, full.offload_optimizer) == (3, True, True)
    assert estimate(full).total_gib == pytest.approx(estimate(zero3).total_gib)
    grad_op = planned("train.fsdp=shard_grad_op", "train.offload_params=false", "train.offload_optimizer=false")
    assert (grad_op.zero_stage, grad_op.offload_params, grad_op.offload_optimizer) == (2, False, False)
    assert (
        estimate(grad_op).total_gib
        > estimate(
            planned("train.fsdp=full_shard", "train.offload_params=false", "train.offload_optimizer=false")
        ).total_gib
    )


def test_the_drift_penalty_is_planned():
    """The team-mix run (Qwen2.5-Coder-1.5B, demo-gpu: LoRA, micro-batch 8 × 1,024, train.drift_penalty=1.0, one H200;
    its repository-file rows fill the whole length) peaked at 58.80 GiB (torch's allocator; the planner's figure less its
    reserve), where the plan without the penalty's tensors said 45.41."""
    from dataclasses import replace

    from ferrylm.config import load_config
    from ferrylm.shapes import QWEN25_CODER_1_5B
    from ferrylm.train.plan import ModelShape, setup_from_config

    fused = setup_from_config(load_config("demo-gpu"), ModelShape.from_hf_config(QWEN25_CODER_1_5B))
    s = replace(fused, fused_head=False)  # as that run computed its loss
    assert fused.fused_head and s.drift_penalty and (s.micro_batch, s.seq_len) == (8, 1024)
    planned = estimate(s).total_gib - s.reserve_gib
    assert planned == pytest.approx(58.80, rel=0.05)
    assert estimate(replace(s, drift_penalty=False)).total_gib - s.reserve_gib == pytest.approx(45.41, abs=0.01)
    # the fused output layer holds one chunk's vocabulary tensors, not every position's: 20 GiB less planned
    assert estimate(fused).logits_gib < estimate(s).logits_gib / 5


def test_the_7b_shape_under_a40x2_lora_with_the_drift_penalty_is_planned():
    """The 7B shape (random weights) under a40x2-lora's train section with train.drift_penalty=1.0, 4,096 × 1, one
    H100 (benchmarks/bench_7b.sh lora-bf16-ckpt): torch's allocated peak against the plan of the preset's two cards,
    whose ZeRO-2 shards only the adapters' gradients and optimizer states (0.3 GiB whole)."""
    row = json.loads((RESULTS / "ferrylm_bench_h100_7b_drift.json").read_text())["training"][0]
    setup, _ = load_setup("a40x2-lora", ["train.drift_penalty=1.0"])
    assert setup.drift_penalty and (setup.micro_batch, setup.seq_len, setup.lora_dropout) == (1, 4096, 0.05)
    plan = estimate(setup)
    assert plan.total_gib - setup.reserve_gib == pytest.approx(row["peak_allocated_gib"], rel=0.10)
    assert plan.fits and row["peak_reserved_gib"] < setup.gpu_memory_gib  # 23.9 GiB reserved of an A40's 45
