"""The data stage's Arrow rows as training examples, and a collator that pads them or lays them end
to end in one row.

Packed rows carry position ids that restart per example; for those the collator passes position
ids and no attention mask, so the model builds a block-diagonal causal mask and no example
attends to another. A flattened micro-batch is one such row.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..data.encode import load_rows
from ..prompts import IGNORE_INDEX


def examples(path: str | Path, limit: int | None = None, numbered: bool = False):
    """The rows of a data split (the first `limit`); `numbered`: each with its index as `row`, which the
    collator passes on so a step the trainer cannot finish names its rows."""
    rows = load_rows(path)
    if len(rows) == 0:
        raise ValueError(f"{path} holds no examples")
    rows = rows.select(range(min(limit, len(rows)))) if limit else rows
    return rows.add_column("row", list(range(len(rows)))) if numbered else rows


def flattened(batch: list[dict]) -> dict:
    """The batch's rows end to end as one packed row. A label at a restart of the position ids is
    ignored: padded, it was never a target (nothing precedes it); here the previous example's last
    token would be asked to predict it."""
    pos = [list(b["position_ids"]) if "position_ids" in b else list(range(len(b["input_ids"]))) for b in batch]
    labels = []
    for b, p in zip(batch, pos):
        labels += [IGNORE_INDEX if q == 0 else y for q, y in zip(p, b["labels"])]
    return {
        "input_ids": [x for b in batch for x in b["input_ids"]],
        "labels": labels,
        "position_ids": [q for p in pos for q in p],
    }


def scored_positions(labels: torch.Tensor) -> dict:
    """For a one-row batch's labels [1, T]: the positions whose next token is a target
    (`logits_to_keep`) and those targets in order (`shift_labels`, [1, n]). The model then computes
    its output layer and loss only there: the same loss, without the logits of prompt tokens, which
    nothing reads."""
    targets = labels[0, 1:]
    keep = (targets != IGNORE_INDEX).nonzero().squeeze(1)
    return {"logits_to_keep": keep, "shift_labels": targets[keep].unsqueeze(0)}


class PadCollator:
    """`flatten`: each micro-batch as one unpadded row (flattened), else rows padded to the longest.
    A batch of one row (flattened, or a micro-batch of one) also gets `scored_positions`, unless
    `only_scored` is off."""

    def __init__(self, pad_id: int, flatten: bool = False, only_scored: bool = True):
        self.pad_id, self.flatten, self.only_scored = pad_id, flatten, only_scored

    def __call__(self, batch: list[dict]) -> dict:
        if self.flatten:
            row = flattened(batch)
            out = {k: torch.tensor([row[k]], dtype=torch.long) for k in ("input_ids", "labels", "position_ids")}
        else:
            out = self.padded(batch)
        if "row" in batch[0]:  # which rows: named if the step fails (the trainer takes it out of the inputs)
            out["row"] = torch.tensor([b["row"] for b in batch], dtype=torch.long)
        return {**out, **scored_positions(out["labels"])} if self.only_scored and len(out["labels"]) == 1 else out

    def padded(self, batch: list[dict]) -> dict:
        width = max(len(b["input_ids"]) for b in batch)
        packed = "position_ids" in batch[0]
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(batch), width), IGNORE_INDEX, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        # Padding gets its own run of positions: a separate "example" that nothing attends to.
        pos = torch.arange(width).repeat(len(batch), 1)
        for i, b in enumerate(batch):
            n = len(b["input_ids"])
            ids[i, :n] = torch.tensor(b["input_ids"])
            labels[i, :n] = torch.tensor(b["labels"])
            mask[i, :n] = 1
            if packed:
                pos[i, :n] = torch.tensor(b["position_ids"])
                pos[i, n:] = torch.arange(width - n)
        if packed:
            return {"input_ids": ids, "labels": labels, "position_ids": pos}
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def split_packed(row: dict) -> list[dict]:
    """The examples of a packed row, cut where the position ids restart."""
    pos = list(row["position_ids"])
    starts = [i for i, p in enumerate(pos) if p == 0] + [len(pos)]
    return [{k: list(row[k][a:b]) for k in ("input_ids", "labels")} for a, b in zip(starts, starts[1:])]


def packing_self_test(model, row: dict) -> tuple[float, float]:
    """(loss of the packed row, token-weighted loss of its examples run one by one).

    Equal when attention stays inside each example; a model or attention kernel that ignores the
    restarting position ids would let examples see each other and the two would differ.
    """
    device = next(model.parameters()).device

    def summed(ids, labels, pos=None) -> tuple[float, int]:
        t = lambda x: torch.tensor([list(x)], dtype=torch.long, device=device)  # noqa: E731
        kwargs = {"position_ids": t(pos)} if pos is not None else {}
        # use_cache=False as in training: with a cache object transformers ignores packed positions.
        out = model(input_ids=t(ids), labels=t(labels), use_cache=False, **kwargs)
        n = sum(1 for x in list(labels)[1:] if x != IGNORE_INDEX)
        return float(out.loss) * n, n

    was_training = model.training
    model.eval()
    with torch.no_grad():
        packed, n = summed(row["input_ids"], row["labels"], row["position_ids"])
        parts = [summed(ex["input_ids"], ex["labels"]) for ex in split_packed(row)]
    model.train(was_training)
    return packed / max(1, n), sum(s for s, _ in parts) / max(1, sum(k for _, k in parts))
