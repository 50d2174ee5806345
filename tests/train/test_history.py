"""The training's log history: what a resumed run keeps, and what the record sums up."""

from __future__ import annotations

import json

from ferrylm.train.history import summarise, truncate_history


def test_truncate_drops_what_came_after_the_checkpoint(tmp_path):
    path = tmp_path / "log_history.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in (10, 20, 30)) + "\n")
    truncate_history(path, 20)
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [10, 20]
    truncate_history(tmp_path / "absent.jsonl", 20)  # a run killed before its first log line
    assert not (tmp_path / "absent.jsonl").exists()


def test_summarise_reads_train_lines_not_eval_lines():
    history = [
        {"step": 10, "loss": 2.0, "grad_norm": 3.0},
        {"step": 10, "eval_loss": 1.5},
        {"step": 20, "loss": 1.0, "grad_norm": 0.5},
        {"step": 20, "loss": 0.9},
    ]
    assert summarise(history) == {
        "first_train_loss": 2.0,
        "final_train_loss": 0.9,
        "final_grad_norm": 0.5,
        "max_grad_norm_seen": 3.0,
    }
    assert summarise([])["first_train_loss"] is None
