"""Parity between two models on a fixed prompt set: greedy tokens and logits.

Every exported artifact carries these numbers; an export below the threshold fails instead of
shipping a model that quietly answers differently from the one that was trained.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch


@dataclass
class Parity:
    prompts: int
    new_tokens: int
    greedy_tokens_equal: int      # prompts whose greedy continuation is identical
    token_agreement: float        # fraction of generated positions that agree
    max_abs_logit_diff: float     # over every prompt position

    def as_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def reference_outputs(model, prompt_ids: list[list[int]], new_tokens: int, pad_id: int) -> list[tuple[torch.Tensor, list[int]]]:
    """(prompt logits, greedy continuation) for each prompt, one prompt at a time (no padding effects)."""
    model.eval()
    outs = []
    for ids in prompt_ids:
        x = torch.tensor([ids])
        logits = model(input_ids=x).logits[0].float()
        gen = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens,
                             do_sample=False, pad_token_id=pad_id)
        outs.append((logits, gen[0, len(ids):].tolist()))
    return outs


def compare(ref: list[tuple[torch.Tensor, list[int]]], got: list[tuple[torch.Tensor, list[int]]], new_tokens: int) -> Parity:
    equal, agree, total, diff = 0, 0, 0, 0.0
    for (la, ta), (lb, tb) in zip(ref, got):
        equal += ta == tb
        n = max(len(ta), len(tb))
        agree += sum(a == b for a, b in zip(ta, tb))
        total += n
        diff = max(diff, (la - lb).abs().max().item())
    return Parity(len(ref), new_tokens, equal, agree / max(total, 1), diff)
