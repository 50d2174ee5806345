"""Held-out loss per example: batched, padded and scored only where the answer is, it equals each
example's own mean answer loss run alone."""

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ferrylm.eval.heldout.loss import example_losses
from ferrylm.prompts import render_messages


def test_batched_losses_equal_each_example_alone(tiny_qwen2_dir):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(tiny_qwen2_dir)
    rows = [
        {"messages": [{"role": "user", "content": "Explain: " + "x = 1\n" * n}], "answer": "It sets x. " * m}
        for n, m in [(1, 9), (12, 2), (4, 5)]
    ]
    rows.insert(1, {"messages": [{"role": "user", "content": "no answer"}]})
    got = example_losses(model, tok, rows, batch=3)
    assert got[1] is None
    for row, loss in zip(rows, got):
        if "answer" not in row:
            continue
        ex = render_messages(tok, row["messages"] + [{"role": "assistant", "content": row["answer"]}])
        with torch.no_grad():
            alone = model(input_ids=torch.tensor([ex["input_ids"]]), labels=torch.tensor([ex["labels"]])).loss.item()
        assert abs(loss - alone) < 1e-4, (loss, alone)
    # The rows differ in length, so padding and the answers' positions differ within a batch.
    assert (
        len(
            {
                len(render_messages(tok, r["messages"] + [{"role": "assistant", "content": r["answer"]}])["input_ids"])
                for r in rows
                if "answer" in r
            }
        )
        == 3
    )
