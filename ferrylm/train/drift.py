"""The penalty for drifting from the base model (train.drift_penalty).

A LoRA fine-tune is its base model with adapters: switched off, the same weights give the base's own
next-token distribution, with no second copy in memory. Over the answer tokens, the KL divergence from
the base's distribution to the fine-tune's is added to the loss; mass the base put on its own way of
answering that the fine-tune takes away costs in proportion.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ..config.train import HEAD_CHUNK
from ..prompts import IGNORE_INDEX

NOT_MODEL_INPUTS = ("labels", "shift_labels")  # the reference pass computes no loss of its own


def answer_logits(logits: torch.Tensor, inputs: dict) -> torch.Tensor:
    """[N, V]: the logits that predict a target token. A batch with `shift_labels` (train/dataset.py's
    scored_positions) already holds only those; padded rows predict labels[:, 1:]."""
    if "shift_labels" in inputs:
        return logits.reshape(-1, logits.shape[-1])
    scored = inputs["labels"][:, 1:] != IGNORE_INDEX
    return logits[:, :-1][scored]


def kl_from_base(peft_model, model, inputs: dict, logits: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(Σ over answer tokens of KL(base ‖ fine-tune), the token count). `peft_model` owns the adapters,
    `model` is what the trainer calls (it may wrap it)."""
    with torch.no_grad(), peft_model.disable_adapter():
        ref = model(**{k: v for k, v in inputs.items() if k not in NOT_MODEL_INPUTS}).logits
    tuned, base = answer_logits(logits, inputs).float(), answer_logits(ref, inputs).float()
    base_logp = F.log_softmax(base, dim=-1)
    per_token = (base_logp.exp() * (base_logp - F.log_softmax(tuned, dim=-1))).sum(-1)
    return per_token.sum(), per_token.numel()


def last_hidden(model, inputs: dict) -> torch.Tensor:
    """The final (normed) hidden states of the model the trainer calls, through its own forward (so DDP and
    the adapters see the call) with no logits computed."""
    call = {k: v for k, v in inputs.items() if k not in (*NOT_MODEL_INPUTS, "logits_to_keep")}
    none = torch.empty(0, dtype=torch.long, device=inputs["input_ids"].device)
    return model(**call, logits_to_keep=none, output_hidden_states=True, use_cache=False).hidden_states[-1]


def _chunk_sums(head, h, base_h, targets):
    """One chunk of answer tokens: (Σ cross-entropy, Σ KL(base ‖ fine-tune)), its logits in fp32 as the loss's."""
    logp = F.log_softmax(head(h.to(head.weight.dtype)).float(), dim=-1)
    ce = -logp.gather(1, targets[:, None]).sum()
    if base_h is None:
        return ce, ce.new_zeros(())
    with torch.no_grad():
        base_logp = F.log_softmax(head(base_h.to(head.weight.dtype)).float(), dim=-1)
    return ce, (base_logp.exp() * (base_logp - logp)).sum()


def head_sums(head, hidden, base_hidden, labels, chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(Σ cross-entropy, Σ KL from the base, answer tokens) over the positions that predict a target, through the
    frozen output layer `chunk` tokens at a time (HEAD_CHUNK); each chunk's logits are recomputed in the backward rather
    than kept, so no full-vocabulary tensor outlives its chunk. `base_hidden` None: no KL."""
    scored = labels[:, 1:] != IGNORE_INDEX
    h, targets = hidden[:, :-1][scored], labels[:, 1:][scored]
    base = base_hidden[:, :-1][scored] if base_hidden is not None else None
    ce = kl = h.sum().float() * 0  # in the graph even with no answer token (then the loss is 0 / 0, as the model's)
    chunk = HEAD_CHUNK if chunk is None else chunk
    for a in range(0, len(targets), chunk):
        part = slice(a, a + chunk)
        c, k = checkpoint(
            _chunk_sums, head, h[part], None if base is None else base[part], targets[part], use_reentrant=False
        )
        ce, kl = ce + c, kl + k
    return ce, kl, len(targets)


class DriftPenalty:
    """A Trainer mixin, built with its weight (`drift_penalty=`, train.drift_penalty): the training loss gains the
    penalty, scaled per answer token as the Trainer scales the loss; the held-out loss stays the plain loss."""

    _kl = _kl_n = 0.0  # Σ KL and answer tokens since the last log line
    fused_head = False  # train.fused_head, where the run allows it (recipe.py)

    def __init__(self, *args, drift_penalty: float = 0.0, **kwargs):
        self.drift_penalty = drift_penalty
        super().__init__(*args, **kwargs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.fused_head and model.training and not return_outputs:
            return self._fused_loss(model, inputs, num_items_in_batch)
        if not (self.drift_penalty and model.training):
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        loss, outputs = super().compute_loss(model, inputs, True, num_items_in_batch)
        total, n = kl_from_base(self.accelerator.unwrap_model(model), model, inputs, outputs.logits)
        self._kl, self._kl_n = self._kl + float(total.detach()), self._kl_n + n
        loss = loss + self.drift_penalty * self._per_token(total, n, num_items_in_batch)
        return (loss, outputs) if return_outputs else loss

    def _fused_loss(self, model, inputs, num_items_in_batch):
        """The loss, and the penalty, from the last hidden states (head_sums): the model's own loss and
        kl_from_base's sum without the logits of every position (train.fused_head)."""
        peft_model = self.accelerator.unwrap_model(model)
        hidden, base = last_hidden(model, inputs), None
        if self.drift_penalty:
            with torch.no_grad(), peft_model.disable_adapter():
                base = last_hidden(model, inputs)
        head = peft_model.get_base_model().get_output_embeddings()
        ce, kl, n = head_sums(head, hidden, base, inputs["labels"])
        loss = self._per_token(ce, n, num_items_in_batch)
        if self.drift_penalty:
            self._kl, self._kl_n = self._kl + float(kl.detach()), self._kl_n + n
            loss = loss + self.drift_penalty * self._per_token(kl, n, num_items_in_batch)
        return loss

    def _per_token(self, total, n: int, num_items_in_batch):
        """Over the accumulated batch's answer tokens (every process's) where the model divides its loss
        by them, else this micro-batch's mean."""
        if self.model_accepts_loss_kwargs and num_items_in_batch is not None:
            devices = self.accelerator.num_processes if self.args.average_tokens_across_devices else 1
            return total * devices / num_items_in_batch
        return total / max(n, 1)

    def drift_since_last_log(self) -> dict:
        """{"kl_to_base": the KL measured, mean per answer token since the last log line}, or {} without the penalty."""
        out = {"kl_to_base": self._kl / self._kl_n} if self._kl_n else {}
        self._kl = self._kl_n = 0.0
        return out
