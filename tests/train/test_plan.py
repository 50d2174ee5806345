"""The memory planner against Qwen2.5-7B's real parameter count and against peaks measured on an H200."""
import json
from pathlib import Path

import pytest

from ferrylm.cli import main
from ferrylm.config import ConfigError
from ferrylm.train.plan import QWEN25_7B, Setup, estimate, load_setup

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def test_qwen25_7b_parameter_counts():
    assert QWEN25_7B.params() == 7_615_616_512
    assert QWEN25_7B.lora_params(16) == 40_370_176  # all seven linear projections, 28 layers


@pytest.mark.parametrize("name", ["peaks_h200.json", "peaks_h200_heldout.json", "peaks_h200_heldout2.json"])
def test_planner_matches_measured_peaks(name):
    data = json.loads((RESULTS / name).read_text())
    keys = ("method", "lora_r", "gradient_checkpointing", "seq_len", "micro_batch", "lora_dropout", "optimizer_precision")
    for row in data["rows"]:
        setup = Setup(**{k: row[k] for k in keys if k in row}, gpu_memory_gib=139.8)
        planned = estimate(setup).total_gib - setup.reserve_gib  # torch's allocated peak excludes the reserve
        assert planned == pytest.approx(row["allocated_peak_gib"], rel=0.05), row


def test_seed_a40_plan_is_refuted_with_a_fix(capsys):
    setup, notes = load_setup("a40x2")
    plan = estimate(setup)
    assert not plan.fits and plan.total_gib > 60  # the seed's "43 GB per card" cannot hold
    assert plan.advice == "offload_optimizer=true"
    assert main(["plan", "a40x2"]) == 0
    out = capsys.readouterr().out
    assert "does NOT fit" in out and "the seed document claims 40 GiB per GPU" in out


def test_checkpointing_and_sharding_move_the_peak():
    base = estimate(Setup(gradient_checkpointing=False)).total_gib
    assert estimate(Setup(gradient_checkpointing=True)).total_gib < base / 2
    full = [estimate(Setup(method="full", gpus=4, zero_stage=z, gpu_memory_gib=80)).total_gib for z in (1, 2, 3)]
    assert full[0] > full[1] > full[2]


def test_bad_plan_input(capsys):
    with pytest.raises(ConfigError, match="plan.sequ: unknown key"):
        load_setup("a40x2", ["sequ=3"])
    assert main(["plan", "nope"]) == 2
    assert "neither a file nor a set-up" in capsys.readouterr().err
