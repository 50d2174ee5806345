"""The held-out loss is a mean over answer tokens: the same rows read the same at any batch size."""

import pytest
import torch

from ferrylm.train import run_train
from ferrylm.train.heldout import row_sums


def test_row_sums_are_each_row_s_cross_entropy_over_its_targets():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)
    labels = torch.tensor([[-100, -100, 3, 4, 1], [-100, 2, -100, -100, -100]])
    got = row_sums(logits, labels)
    want0 = torch.nn.functional.cross_entropy(logits[0, 1:4], labels[0, 2:5], reduction="sum")
    want1 = torch.nn.functional.cross_entropy(logits[1, :1], labels[1, 1:2], reduction="sum")
    assert got.flatten().tolist() == pytest.approx([float(want0), 3.0, float(want1), 1.0], rel=1e-6)
    # a one-row batch's scored positions only (dataset.scored_positions): the targets already shifted
    kept = torch.tensor([1, 2, 3])
    assert row_sums(logits[:1, kept], labels[:1, 2:5], shifted=True).flatten().tolist() == pytest.approx(
        got[0].tolist()
    )


@pytest.mark.parametrize("batch,batches", [(1, 8), (8, 1)])
def test_the_same_held_out_rows_read_the_same_loss_at_another_batch_size(
    batch, batches, copy_run, tiny_qwen2_dir, tiny_corpus, make_config
):
    """The base's held-out loss over the first 8 held-out rows, read 1 and 8 rows a batch, equals the same rows read
    2 a batch (the tiny recipe's); as a mean of per-batch means it moved with the grouping."""
    steps = ["train.max_steps=1", "train.save_steps=1", "train.save_final=false"]
    reference = run_train(make_config(copy_run("two"), tiny_qwen2_dir, tiny_corpus, *steps)).metrics
    other = make_config(
        copy_run(),
        tiny_qwen2_dir,
        tiny_corpus,
        *steps,
        f"train.per_device_batch_size={batch}",
        f"train.eval_batches={batches}",
    )
    got = run_train(other).metrics
    assert got["base_eval_loss"] == pytest.approx(reference["base_eval_loss"], abs=2e-5)
