"""`ferrylm run` (pipeline.run_all) as a user types it: every stage in order on the tiny Qwen2, each
finding its inputs in the previous stage's record, one line at the end naming the report."""

import json
import subprocess
import sys

import pytest

from ferrylm.manifest import read_record, sha256_file
from tests.conftest import tiny_overrides


@pytest.mark.slow
def test_ferrylm_run_chains_every_stage_through_its_records(tmp_path, tiny_qwen2_dir, tiny_corpus):
    run = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferrylm",
            "run",
            "--config",
            "default",
            *tiny_overrides(run, tiny_qwen2_dir, tiny_corpus),
            "train.max_steps=2",
            "eval.local=true",
            "eval.compare_base=false",
            "eval.humaneval_limit=2",
            "eval.bleu_limit=2",
            "eval.max_new_tokens=8",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == (
        f"ferrylm: report at {run}/eval/report.md (also {run}/eval/report.html and {run}/eval/report.json)"
    )
    data, train, export, evaluated = (read_record(run / s) for s in ("data", "train", "export", "eval"))
    assert train["inputs"]["train.arrow"] == sha256_file(data["outputs"]["train"])  # train read data's record
    assert export["inputs"]["adapter_sha256"] == train["metrics"]["adapter_sha256"]  # export read train's
    assert train["metrics"]["steps"] == 2 and train["metrics"]["method"] == "lora"
    report = json.loads((run / "eval" / "report.json").read_text())
    assert report["models"]["fine-tuned"]["loss"] == train["metrics"]["eval_loss"]  # eval read train's
    assert [s["tasks"] for s in report["details"]["fine-tuned"]["benchmarks"]] == [2]
    assert evaluated["outputs"]["md"] == f"{run}/eval/report.md"


def test_a_stage_leaves_its_process_group_before_python_exits(tmp_path):
    """Left to the interpreter's exit, gloo's worker threads now and then abort a rank that had finished."""
    import torch.distributed as dist

    from ferrylm import cli

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    assert dist.is_initialized()
    cli._leave_process_group()
    assert not dist.is_initialized()
    cli._leave_process_group()  # a stage that never joined one: nothing to leave
