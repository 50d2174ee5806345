"""Continued pre-training data: raw code packed to the training length, then trained on."""

import json

import pytest

from ferrylm.data import run_data
from ferrylm.data.encode import load_rows
from ferrylm.train import run_train
from tests.conftest import tiny_config
from tests.pinning import pinned


@pytest.mark.integration
def test_cpt_rows_are_packed_and_train(tmp_path, tiny_qwen2_dir, tiny_corpus):
    cfg = tiny_config(
        tmp_path / "run",
        tiny_qwen2_dir,
        tiny_corpus,
        "data.format=cpt",
        "train.max_steps=2",
        "train.save_steps=2",
        "train.eval_batches=1",
    )
    rec = run_data(cfg)
    m = rec.metrics
    rows = load_rows(rec.outputs["train"])
    assert m["packed"] and m["tokenizer_engine"] == "tiktoken" and m["pack_fill"] > 0.9
    assert all(len(r) <= 256 for r in rows["input_ids"]) and sum(map(len, rows["input_ids"])) == m["train_tokens"]
    # Every kept file of a training repository is in there once: documents end with <|endoftext|>.
    end_count = sum(r.count(0) for r in rows["input_ids"])
    assert end_count == m["train_examples"] > 0
    assert json.loads((tmp_path / "run" / "data" / "stats.json").read_text())["files_kept"] == m["files_kept"]
    t = run_train(cfg)  # the packing self-test runs first, on the first row
    # Pinned (torchtune's way): a silent change to the recipe, the packing or the seed moves these.
    # The tiny random model starts at ln(vocab) ~ 10.8; two steps lower the held-out loss by ~0.007.
    assert t.metrics["steps"] == 2
    assert t.metrics["eval_loss"] < t.metrics["base_eval_loss"]
    pinned(
        "cpt losses",
        "train-loss",
        [t.metrics[k] for k in ("base_eval_loss", "eval_loss", "first_train_loss")],
        [10.80312, 10.79628, 10.79282],
    )
