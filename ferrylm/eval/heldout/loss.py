"""Held-out loss per example, the same way for every model: the mean next-token loss over the answer's
tokens (the training target: the assistant turn, rendered with the model's chat template), so the
fine-tuned and the base model can be compared example by example."""

from __future__ import annotations

from pathlib import Path

from ...log import get_logger
from ...prompts import render_messages

log = get_logger("eval")


def answered(tokenizer, rows: list[dict]) -> list[tuple[int, dict]]:
    """(index, the row rendered with its training answer) for each row that carries one (`answer`)."""
    return [
        (i, render_messages(tokenizer, r["messages"] + [{"role": "assistant", "content": r["answer"]}]))
        for i, r in enumerate(rows)
        if r.get("answer")
    ]


def padded(examples: list[dict], pad_id: int):
    """input ids, labels and attention mask of rendered examples, padded on the right to the longest."""
    import torch

    width = max(len(ex["input_ids"]) for ex in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for j, ex in enumerate(examples):
        n = len(ex["input_ids"])
        ids[j, :n], labels[j, :n], mask[j, :n] = torch.tensor(ex["input_ids"]), torch.tensor(ex["labels"]), 1
    return ids, labels, mask


def example_losses(model, tokenizer, rows: list[dict], batch: int = 8) -> list[float | None]:
    """One loss per row that carries its training answer (`answer`), None for the others."""
    import torch

    device = next(model.parameters()).device
    out: list[float | None] = [None] * len(rows)
    todo = answered(tokenizer, rows)
    todo.sort(key=lambda t: len(t[1]["input_ids"]))  # batches of like lengths: little padding
    for k in range(0, len(todo), batch):
        chunk = todo[k : k + batch]
        ids, labels, mask = padded([ex for _, ex in chunk], tokenizer.pad_token_id or 0)
        target = labels[:, 1:].to(device)
        # Logits only at the positions some row scores (the answers sit at the rows' ends): the prompts'
        # and the padding's were never used.
        keep = (target != -100).any(0).nonzero()[:, 0]
        with torch.no_grad():
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), logits_to_keep=keep).logits.float()
        nll = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), target[:, keep], ignore_index=-100, reduction="none"
        )
        counts = (target != -100).sum(1).clamp(min=1)
        for (i, _), v in zip(chunk, (nll.sum(1) / counts).tolist()):
            out[i] = v
    return out


def losses_of(model_dir: str | Path, rows: list[dict]) -> list[float | None]:
    """example_losses of the model in `model_dir`, loaded as the in-process generator loads it
    (bf16 on a GPU, fp32 on the CPU) and freed afterwards."""
    import torch

    from ...models import load_model, load_tokenizer

    cuda = torch.cuda.is_available()
    model = load_model(model_dir, torch.bfloat16 if cuda else None).eval().to("cuda" if cuda else "cpu")
    try:
        return example_losses(model, load_tokenizer(model_dir), rows)
    finally:
        del model
        if cuda:
            torch.cuda.empty_cache()
