"""A run reports its metrics to TensorBoard and log_history, and stops cleanly on a non-finite loss."""

import json

import pytest

from ferrylm.data.encode import ArrowRows
from ferrylm.manifest import write_json_atomic
from ferrylm.train import TrainingDiverged, run_train
from tests.conftest import tiny_config


def test_metrics_reach_tensorboard_and_history(copy_run, tiny_qwen2_dir, tiny_corpus):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = copy_run()
    cfg = tiny_config(
        run, tiny_qwen2_dir, tiny_corpus, "train.max_steps=4", "train.save_steps=2", "train.keep_best=true"
    )
    rec = run_train(cfg)
    history = [json.loads(line) for line in open(run / "train" / "log_history.jsonl")]
    train_lines = [h for h in history if "loss" in h and "eval_loss" not in h]
    assert len(train_lines) == 4 and all(h["tokens_per_s"] > 0 for h in train_lines[1:])
    # the record's speed is the run's (its evals and checkpoints in it), not the last window's
    m = rec.metrics
    assert m["tokens_per_s"] == pytest.approx(m["tokens_seen"] / m["train_runtime_s"])
    assert m["tokens_per_s_last_window"] == train_lines[-1]["tokens_per_s"]
    events = EventAccumulator(str(next((run / "train" / "tensorboard").rglob("events.out.tfevents.*")).parent))
    events.Reload()
    tb = {e.step: e.value for e in events.Scalars("train/loss")}
    assert tb == pytest.approx({h["step"]: h["loss"] for h in train_lines}, rel=1e-6)
    assert "train/tokens_per_s" in events.Tags()["scalars"] and "eval/loss" in events.Tags()["scalars"]
    evals = [h for h in history if "eval_loss" in h]
    assert len(evals) == 3  # step 0, and at each checkpoint (keep_best)
    best = min(evals[1:], key=lambda h: h["eval_loss"])
    assert rec.metrics["best_checkpoint"].endswith(f"checkpoint-{best['step']}")
    assert rec.metrics["best_eval_loss"] == pytest.approx(best["eval_loss"])


def test_non_finite_loss_stops_with_last_good_weights(copy_run, tiny_qwen2_dir, tiny_corpus):
    from datasets import Dataset

    run = copy_run()
    rows = Dataset.from_file(str(run / "data" / "train.arrow")).select(range(3)).to_list()
    # A row with no target token: its loss is 0/0 — the data bug a NaN guard exists for.
    rows.insert(2, {"input_ids": rows[0]["input_ids"], "labels": [-100] * len(rows[0]["labels"])})
    w = ArrowRows(run / "data" / "train.arrow", ["input_ids", "labels"])
    for r in rows:
        w.write(r)
    w.close()
    # Published like the data stage publishes: the record is written after the rows it describes
    # (rows newer than their record are refused as the leftovers of an unfinished run).
    record = json.loads((run / "data" / "record.json").read_text())
    write_json_atomic(run / "data" / "record.json", record)
    cfg = tiny_config(
        run,
        tiny_qwen2_dir,
        tiny_corpus,
        "train.max_steps=4",
        "train.per_device_batch_size=1",
        "train.gradient_accumulation_steps=1",
        "train.save_steps=100",
    )
    with pytest.raises(TrainingDiverged, match=r"the loss became nan at step \d; stopped before that step's update"):
        run_train(cfg)
    assert (run / "train" / "last-good-adapter" / "adapter_model.safetensors").is_file()
    assert not (run / "train" / "adapter").exists()


def _nan_gradient_at(steps):
    from ferrylm.train.observe import guarded_trainer_class

    class NanGradient(guarded_trainer_class()):
        def training_step(self, model, inputs, num_items_in_batch=None):
            loss = super().training_step(model, inputs, num_items_in_batch)
            if self.state.global_step + 1 in steps:  # the loss stays finite; one gradient does not
                next(p for p in model.parameters() if p.requires_grad).grad.fill_(float("nan"))
            return loss

    return NanGradient


def _finite(path) -> bool:
    import torch
    from safetensors.torch import load_file

    weights = load_file(path)
    return bool(weights) and all(torch.isfinite(w).all() for w in weights.values())


def test_non_finite_gradients_behind_a_finite_loss_stop_before_the_update(
    copy_run, tiny_qwen2_dir, tiny_corpus, monkeypatch
):
    from ferrylm.train import recipe

    monkeypatch.setattr(recipe, "guarded_trainer_class", lambda: _nan_gradient_at({2}))
    run = copy_run()
    cfg = tiny_config(
        run, tiny_qwen2_dir, tiny_corpus, "train.max_steps=4", "train.save_steps=100", "train.skip_nonfinite_steps=0"
    )
    with pytest.raises(TrainingDiverged, match=r"the gradient norm became nan at step 2; stopped before"):
        run_train(cfg)
    assert _finite(run / "train" / "last-good-adapter" / "adapter_model.safetensors")  # step 1's, not NaN


def test_a_step_with_non_finite_gradients_is_skipped_and_listed_up_to_the_limit(
    copy_run, tiny_qwen2_dir, tiny_corpus, monkeypatch
):
    from ferrylm.train import recipe

    monkeypatch.setattr(recipe, "guarded_trainer_class", lambda: _nan_gradient_at({2}))
    run = copy_run()
    cfg = tiny_config(run, tiny_qwen2_dir, tiny_corpus, "train.max_steps=4", "train.save_steps=100")
    rec = run_train(cfg)  # the default skips a few
    assert rec.metrics["steps"] == 4 and rec.metrics["skipped_steps"] == [2]
    assert _finite(run / "train" / "adapter" / "adapter_model.safetensors")

    monkeypatch.setattr(recipe, "guarded_trainer_class", lambda: _nan_gradient_at({2, 3}))
    run = copy_run("run-2")
    cfg = tiny_config(
        run, tiny_qwen2_dir, tiny_corpus, "train.max_steps=4", "train.save_steps=100", "train.skip_nonfinite_steps=1"
    )
    with pytest.raises(TrainingDiverged, match=r"nan at step 3 \(after skipping steps 2: train.skip_nonfinite_steps\)"):
        run_train(cfg)
    assert _finite(run / "train" / "last-good-adapter" / "adapter_model.safetensors")


def test_selective_checkpointing_recomputes_some_layers_with_the_same_losses(
    tiny_data_run, tmp_path, tiny_qwen2_dir, tiny_corpus, caplog
):
    import logging
    import shutil

    losses = {}
    for fraction in ("1.0", "0.5"):
        run = tmp_path / f"run-{fraction}"
        shutil.copytree(tiny_data_run, run)
        cfg = tiny_config(
            run,
            tiny_qwen2_dir,
            tiny_corpus,
            "train.max_steps=3",
            "train.gradient_checkpointing=true",
            f"train.checkpoint_fraction={fraction}",
            "train.report_to=[]",
        )
        with caplog.at_level(logging.INFO, logger="ferrylm.train"):
            run_train(cfg)
        rows = [json.loads(line) for line in open(run / "train" / "log_history.jsonl")]
        losses[fraction] = [r["loss"] for r in rows if "loss" in r and "eval_loss" not in r]
    assert "selective checkpointing: 1 of 2 decoder layers recompute" in caplog.text
    assert losses["0.5"] == losses["1.0"]  # recomputation changes memory, never the numbers (fp32)


def test_mfu_counts_attention_over_each_example_not_the_packed_row():
    import torch

    from ferrylm.train.observe import attention_flops_per_token, example_lengths

    packed = {"position_ids": torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3, 4]])}
    assert example_lengths(packed) == [3, 2, 5]
    padded = {"attention_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])}
    assert example_lengths(padded) == [3, 4]

    class Cfg:
        num_hidden_layers, hidden_size = 28, 3584

    class Model:
        config = Cfg()

    # Qwen2.5-7B at 4096 tokens: 12·28·3584·4096 = 4.93 GFLOP per token beside 6·N = 45.7 GFLOP.
    assert attention_flops_per_token(Model(), 4096) == 12 * 28 * 3584 * 4096
