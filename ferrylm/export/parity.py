"""Parity between two models on a fixed prompt set: greedy tokens and logits.

Every exported artifact carries these numbers; an export below the threshold fails instead of
shipping a model that quietly answers differently from the one that was trained.

A greedy continuation may part from the reference's where the reference itself hesitated: at the
first differing step its logits for its own token and for the artifact's were within the gate's
logit tolerance (a near-tie that any change of summation order can flip — seen on a fine-tuned
SmolLM2, max |Δlogit| 1.2e-4 and 2 of 4 continuations parting). Such a prompt counts as a tie, not
a failure; the report keeps both numbers.

A quantized artifact is held to its forced agreement: each model reads the reference's own
continuation, and at each step the artifact's top token is compared with the reference's. Free-running
agreement says how far two greedy texts stay together, and one early difference changes everything
after it: on 4 prompts x 16 tokens it put the same GPTQ recipe at 0.74 in one GPU run and 0.48 in the
next, and barely told GPTQ from round-to-nearest (0.125 against 0.035 on SmolLM2) where forced
agreement (0.789 against 0.645) and KL (0.246 against 0.603) did (studies/parity_measures/results/parity_measures_smollm2.json).

Each model is run where it fits: on the GPU (in fp32, without TF32) when one is here with room for it, else on
the CPU, whose cores the eval's sandboxes may be sharing then. Both sides of a comparison run on the same device.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch


@dataclass
class Parity:
    prompts: int
    new_tokens: int
    greedy_tokens_equal: int  # prompts whose greedy continuation is identical
    token_agreement: float  # fraction of generated positions that agree
    max_abs_logit_diff: float  # over every scored position (the prompt, then the reference's continuation)
    mean_kl: float = 0.0  # KL(reference ‖ artifact) of next-token distributions, mean over the scored positions
    greedy_ties: int = 0  # prompts that part only where the reference's two tokens were within the tolerance
    forced_agreement: float = (
        0.0  # fraction of the reference's greedy tokens that are the artifact's top token after the reference's prefix
    )

    def greedy_ok(self) -> bool:
        """Every continuation identical, or parting only at a near-tie of the reference."""
        return self.greedy_tokens_equal + self.greedy_ties >= self.prompts

    def as_dict(self) -> dict:
        return asdict(self)


HEADROOM = 1.25  # the weights' bytes times this must be free on the GPU (activations, the generate cache)


def parity_device(model, reference_device: str | None = None) -> str:
    """Where `model` is run for parity: the reference's device when given (like with like), else the
    GPU when one is here with room for the model, else the CPU."""
    if reference_device is not None:
        return reference_device if reference_device == "cpu" or torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available():
        return "cpu"
    need = sum(p.numel() * p.element_size() for p in model.parameters()) * HEADROOM
    return "cuda" if torch.cuda.mem_get_info()[0] > need else "cpu"


@torch.no_grad()
def reference_outputs(
    model,
    prompt_ids: list[list[int]],
    new_tokens: int,
    pad_id: int,
    eos_id: int | None = None,
    forced: list[list[int]] | None = None,
    device: str = "cpu",
) -> list[tuple]:
    """(logits over the prompt and the reference's continuation, greedy continuation, each generated step's
    logits) for each prompt, one prompt at a time (no padding effects). `forced`: the reference's
    continuations, which an artifact is scored on; None for the reference itself, scored on its own.
    `eos_id`: the token every artifact stops on (the chat template's end of turn), so the reference stops
    where they do, whatever its own generation config says. `device`: where it runs (parity_device); what
    it returns is on the CPU."""
    model.eval().to(device)
    tf32, torch.backends.cuda.matmul.allow_tf32 = torch.backends.cuda.matmul.allow_tf32, False
    try:
        return _outputs(model, prompt_ids, new_tokens, pad_id, eos_id, forced, device)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        model.to("cpu")  # its GPU memory back before the next model is loaded


def _outputs(model, prompt_ids, new_tokens, pad_id, eos_id, forced, device) -> list[tuple]:
    outs = []
    for i, ids in enumerate(prompt_ids):
        x = torch.tensor([ids], device=device)
        gen = model.generate(
            input_ids=x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=pad_id,
            output_logits=True,
            return_dict_in_generate=True,
            **({} if eos_id is None else {"eos_token_id": eos_id}),
        )
        cont = gen.sequences[0, len(ids) :].tolist()
        scored = torch.tensor([ids + (cont if forced is None else forced[i])], device=device)
        logits = model(input_ids=scored).logits[0].float().cpu()
        outs.append((logits, cont, [s[0].float().cpu() for s in gen.logits]))
    return outs


def _near_tie(steps: list | None, ta: list[int], tb: list[int], tolerance: float) -> bool:
    """Whether the continuations first part where the reference's logits for both tokens were within
    `tolerance` of each other."""
    first = next((i for i, (a, b) in enumerate(zip(ta, tb)) if a != b), None)
    if not steps or first is None or first >= len(steps):
        return False
    return abs(steps[first][ta[first]] - steps[first][tb[first]]).item() <= tolerance


def compare(ref: list[tuple], got: list[tuple], new_tokens: int, tolerance: float = 0.0) -> Parity:
    """`got`'s logits cover the same positions as `ref`'s: the prompt, then (when scored on it) the
    reference's continuation."""
    equal, ties, agree, total, diff, kl, positions = 0, 0, 0, 0, 0.0, 0.0, 0
    forced, forced_total = 0, 0
    for (la, ta, *steps), (lb, tb, *_) in zip(ref, got):
        lb = torch.as_tensor(lb).float()
        start = la.shape[0] - len(ta)  # where the reference's continuation begins, when it was scored
        if start > 0:
            forced += (lb[start - 1 : start - 1 + len(ta)].argmax(-1) == torch.tensor(ta)).sum().item()
            forced_total += len(ta)
        equal += ta == tb
        ties += ta != tb and _near_tie(steps[0] if steps else None, ta, tb, tolerance)
        n = max(len(ta), len(tb))
        agree += sum(a == b for a, b in zip(ta, tb))
        total += n
        diff = max(diff, (la - lb).abs().max().item())
        logp, logq = torch.log_softmax(la, -1), torch.log_softmax(lb, -1)
        kl += (logp.exp() * (logp - logq)).sum().item()
        positions += la.shape[0]
    return Parity(
        len(ref),
        new_tokens,
        equal,
        agree / max(total, 1),
        diff,
        kl / max(positions, 1),
        ties,
        forced / max(forced_total, 1),
    )


def onnx_outputs(
    lm, prompt_ids: list[list[int]], new_tokens: int, eos_ids: tuple[int, ...], forced: list[list[int]]
) -> list[tuple[torch.Tensor, list[int]]]:
    """The same (logits over the prompt and the reference's continuation, greedy continuation) pairs from
    an `OnnxCausalLM`."""
    return [
        (torch.from_numpy(lm.prompt_logits(ids + cont)).float(), lm.generate(ids, new_tokens, eos_ids))
        for ids, cont in zip(prompt_ids, forced)
    ]
