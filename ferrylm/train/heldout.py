"""The held-out loss as a mean over answer tokens. The Trainer's own is a mean of per-batch means, so the same rows
read differently at another batch size or number of processes (0.8456 at 8 rows a batch, 0.8375 at 16)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..prompts import IGNORE_INDEX


def row_sums(logits: torch.Tensor, labels: torch.Tensor, shifted: bool = False) -> torch.Tensor:
    """(rows, 2): each row's Σ cross-entropy over the positions that predict a target, and how many they are;
    in fp32 one row at a time, so no full-vocabulary fp32 tensor holds a whole batch. `shifted`: `labels` are
    already the targets of `logits`' positions (a one-row batch's `shift_labels`: dataset.scored_positions)."""
    out = torch.zeros(len(labels), 2, dtype=torch.float32, device=logits.device)
    for i in range(len(labels)):
        scores, targets = (logits[i], labels[i]) if shifted else (logits[i, :-1], labels[i, 1:])
        scored = targets != IGNORE_INDEX
        if scored.any():
            out[i, 0] = F.cross_entropy(scores[scored].float(), targets[scored], reduction="sum")
            out[i, 1] = scored.sum()
    return out


class TokenMeanEval:
    """A Trainer mixin: `eval_loss` is Σ cross-entropy / answer tokens over all the held-out rows. Each row's two
    sums travel as the Trainer's predictions, so they are gathered across processes as predictions are, with the
    rows a process repeats to even out the batches dropped."""

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        if not prediction_loss_only or "labels" not in inputs:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        inputs = self._prepare_inputs(inputs)
        shifted = "shift_labels" in inputs
        labels = inputs["shift_labels"] if shifted else inputs["labels"]
        feed = {k: v for k, v in inputs.items() if k not in ("labels", "shift_labels", "row")}  # "row": not an input
        with torch.no_grad(), self.compute_loss_context_manager():
            sums = row_sums(model(**feed).logits, labels, shifted)
        return sums[:, 0].sum() / sums[:, 1].sum().clamp(min=1), sums, None

    def evaluation_loop(self, *args, metric_key_prefix: str = "eval", **kwargs):
        out = super().evaluation_loop(*args, metric_key_prefix=metric_key_prefix, **kwargs)
        rows = out.predictions
        if rows is None or getattr(rows, "ndim", 0) != 2 or rows.shape[1] != 2:
            return out
        out.metrics[f"{metric_key_prefix}_loss"] = float(rows[:, 0].sum() / max(rows[:, 1].sum(), 1.0))
        return out._replace(predictions=None)
