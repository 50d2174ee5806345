"""The general-coding canary: executed at every evaluation, it chooses the checkpoint kept by held-out
loss among those within the forgetting budget; a checkpoint past the budget is never kept; the eval
leaves its tasks out of HumanEval(-X) and names them."""

import json
import math
from types import SimpleNamespace

import pytest

from ferrylm.config import load_config
from ferrylm.eval.report.render import subset_note
from ferrylm.eval.stage import without_canary
from ferrylm.eval.tasks import humaneval
from ferrylm.eval.tasks.benchmark import Track
from ferrylm.models import load_model, load_tokenizer
from ferrylm.train import run_train
from ferrylm.train.canary import GUARDED, Canary, problems
from tests.conftest import tiny_config


def test_the_canary_is_a_fixed_seeded_draw():
    ids = [p["task_id"] for p in problems(12)]
    assert ids == [p["task_id"] for p in problems(12)] and len(set(ids)) == 12
    assert ids != [p["task_id"] for p in humaneval.load_problems()[:12]]  # a draw, not the first tasks


@pytest.mark.slow
def test_a_run_with_the_canary_records_it_and_keeps_the_best_within_budget(copy_run, tiny_qwen2_dir, tiny_corpus):
    run = copy_run()
    cfg = tiny_config(
        run,
        tiny_qwen2_dir,
        tiny_corpus,
        "train.max_steps=4",
        "train.save_steps=2",
        "train.keep_best=true",
        "train.canary_tasks=3",
        "train.canary_max_new_tokens=8",
    )
    c = run_train(cfg).metrics["canary"]
    assert c["tasks"] == [p["task_id"] for p in problems(3)]
    assert [e["step"] for e in c["per_eval"]] == [0, 2, 4]
    assert c["base_pass_at_1"] == c["per_eval"][0]["pass_at_1"]
    history = [json.loads(ln) for ln in open(run / "train" / "log_history.jsonl")]
    losses = {h["step"]: h["eval_loss"] for h in history if "eval_loss" in h}
    # a random tiny model passes nothing before or after: every checkpoint is within the budget
    assert all(e["within_budget"] for e in c["per_eval"]) and not c["over_budget"]
    assert c["kept_step"] == min((2, 4), key=losses.get)


def test_a_checkpoint_past_the_budget_is_never_kept(tiny_qwen2_dir, tmp_path):
    tok = load_tokenizer(tiny_qwen2_dir)
    model = load_model(tiny_qwen2_dir).eval()
    state = SimpleNamespace(global_step=2, is_world_process_zero=True)
    for budget, guarded in ((3.0, math.inf), (100.0, 1.25)):
        canary = Canary(2, tok, budget, tmp_path / "history.jsonl", max_new_tokens=4)
        canary.base = 1.0  # as if the base had passed both tasks; the random model passes neither
        metrics = {"eval_loss": 1.25}
        canary.on_evaluate(None, state, None, model=model, metrics=metrics)
        assert metrics["eval_canary_pass_at_1"] == 0.0 and metrics[GUARDED] == guarded


def test_the_config_says_what_the_canary_needs():
    with pytest.raises(ValueError, match="train.canary_tasks: .*set train.keep_best=true"):
        load_config("default", ["train.canary_tasks=8"])
    with pytest.raises(ValueError, match="not with train.deepspeed"):
        load_config("default", ["train.canary_tasks=8", "train.keep_best=true", "train.deepspeed=zero2"])


def test_the_eval_leaves_the_canary_out_in_every_language_and_names_it():
    every = humaneval.load_problems()
    he = Track("humaneval", "python", "HumanEval (Python)", "pass_at_1", list(every), 164)
    cpp = [{"task_id": p["task_id"].replace("HumanEval", "CPP")} for p in every]
    hx = Track("humaneval-x", "cpp", "HumanEval-X cpp", "pass_at_1_cpp", cpp, 164)
    own = Track("own-heldout", "python", "Own", "k", [{"task_id": "HumanEval/3"}], 1)
    canary = {"tasks": ["HumanEval/12", "HumanEval/3"]}
    he, hx, own = without_canary([he, hx, own], canary)
    assert len(he.problems) == len(hx.problems) == 162 and len(own.problems) == 1
    assert {"HumanEval/3", "HumanEval/12"}.isdisjoint(p["task_id"] for p in he.problems)
    assert "CPP/3" not in {p["task_id"] for p in hx.problems}
    details = {
        "base": {"benchmarks": [{"title": he.title, "tasks": 162, "subset_of": 164, "canary_left_out": he.canary}]}
    }
    assert subset_note(details) == (
        "Subsets (seeded, the same for every model): HumanEval (Python): 162 of 164 tasks. Left out of "
        "HumanEval(-X): the 2 tasks the training's canary chose its checkpoint on (HumanEval/3, HumanEval/12)."
    )
