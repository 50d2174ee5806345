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
    mean_kl: float = 0.0          # KL(reference ‖ artifact) of next-token distributions, mean over prompt positions

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
    equal, agree, total, diff, kl, positions = 0, 0, 0, 0.0, 0.0, 0
    for (la, ta), (lb, tb) in zip(ref, got):
        lb = torch.as_tensor(lb).float()
        equal += ta == tb
        n = max(len(ta), len(tb))
        agree += sum(a == b for a, b in zip(ta, tb))
        total += n
        diff = max(diff, (la - lb).abs().max().item())
        logp, logq = torch.log_softmax(la, -1), torch.log_softmax(lb, -1)
        kl += (logp.exp() * (logp - logq)).sum().item()
        positions += la.shape[0]
    return Parity(len(ref), new_tokens, equal, agree / max(total, 1), diff, kl / max(positions, 1))


def onnx_outputs(lm, prompt_ids: list[list[int]], new_tokens: int, eos_ids: tuple[int, ...]) -> list[tuple[torch.Tensor, list[int]]]:
    """The same (prompt logits, greedy continuation) pairs from an `OnnxCausalLM`."""
    return [(torch.from_numpy(lm.prompt_logits(ids)).float(), lm.generate(ids, new_tokens, eos_ids)) for ids in prompt_ids]
