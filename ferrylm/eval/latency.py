"""The 512-new-token latency, against a live endpoint or on the in-process engine."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from ..prompts import user_message
from ..serve.client import timed_chat_stream

# A fixed prompt, so latency numbers compare across runs and models.
LATENCY_PROMPT = 'def fibonacci(n: int) -> list[int]:\n    """Return the first n Fibonacci numbers."""\n'


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _stats(values: list[float]) -> dict:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values),
        "min": min(values),
        "max": max(values),
    }


def latency(
    base_url: str, model: str, new_tokens: int, runs: int = 3, concurrency: list[int] | None = None, timed=None
) -> dict:
    """Single-stream latency over `runs` repeats (percentiles), then a concurrency sweep.

    Each request generates exactly `new_tokens` (ignore_eos), so runs compare like with like. `timed`:
    how one request is made and timed (default: an OpenAI chat stream; a generator's `timed_stream`).
    """
    timed = timed or timed_chat_stream
    messages = [{"role": "user", "content": user_message(LATENCY_PROMPT)}]
    timed(base_url, model, messages, 8)  # warm-up: the first request pays one-off costs
    single = [timed(base_url, model, messages, new_tokens) for _ in range(runs)]
    out = {
        "new_tokens": single[0].completion_tokens,
        "runs": runs,
        "ttft_s": _stats([t.ttft_s for t in single]),
        "total_s": _stats([t.total_s for t in single]),
        "tpot_s": _stats([(t.total_s - t.ttft_s) / max(t.completion_tokens - 1, 1) for t in single]),
        "tokens_per_s": _stats([t.tokens_per_s for t in single]),
        "samples_total_s": [t.total_s for t in single],
        "sweep": [],
    }
    for c in concurrency or []:
        start = time.perf_counter()
        with ThreadPoolExecutor(c) as pool:
            timings = list(pool.map(lambda _: timed(base_url, model, messages, new_tokens), range(c)))
        wall = time.perf_counter() - start
        out["sweep"].append(
            {
                "concurrency": c,
                "wall_s": wall,
                "aggregate_tokens_per_s": sum(t.completion_tokens for t in timings) / wall,
                "total_s": _stats([t.total_s for t in timings]),
                "ttft_s": _stats([t.ttft_s for t in timings]),
            }
        )
    return out


# Peak memory bandwidth (bytes/s) by a piece of the name torch gives the GPU; the first piece found wins.
BANDWIDTH = (
    ("H200", 4.8e12),
    ("H100 NVL", 3.9e12),
    ("H100 PCIe", 2.0e12),
    ("H100", 3.35e12),
    ("A800", 2.039e12),
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB PCIe", 1.935e12),
    ("A100", 1.555e12),
    ("RTX A6000", 768e9),
    ("A40", 696e9),
    ("L40S", 864e9),
    ("L4", 300e9),
)


def decode_floor(model, gpu: str, new_tokens: int) -> dict | None:
    """Batch-1 decoding's floor on `gpu`: every weight read once a token (the input embeddings, a lookup, only
    where the output layer shares them) over the card's bandwidth. None for a GPU not in BANDWIDTH."""
    bandwidth = next((b for piece, b in BANDWIDTH if piece in gpu), None)
    if bandwidth is None:
        return None
    weights = {id(p): p for p in model.parameters()}  # a tied output layer counted once
    embed, head = model.get_input_embeddings().weight, model.get_output_embeddings()
    read = sum(p.numel() * p.element_size() for p in weights.values())
    if head is None or head.weight is not embed:
        read -= embed.numel() * embed.element_size()
    return {
        "gpu": gpu,
        "bandwidth_gb_s": bandwidth / 1e9,
        "weight_gb_per_token": read / 1e9,
        "floor_s": read * new_tokens / bandwidth,
    }


def engine_latency(generator, new_tokens: int, runs: int = 3) -> dict:
    """The same measurement in-process, on a LocalGenerator's serving engine (GPU, batch 1): exactly
    `new_tokens` greedy tokens per run after a warm-up that captures the decode step; no sweep."""
    tok = generator.tokenizer
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": user_message(LATENCY_PROMPT)}], tokenize=False, add_generation_prompt=True
    )
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    generator.engine.generate_timed(ids, 8)
    single = [generator.engine.generate_timed(ids, new_tokens) for _ in range(runs)]
    return {
        "new_tokens": new_tokens,
        "runs": runs,
        "in_process": True,
        "ttft_s": _stats([t["ttft_s"] for t in single]),
        "total_s": _stats([t["total_s"] for t in single]),
        "tpot_s": _stats([(t["total_s"] - t["ttft_s"]) / max(new_tokens - 1, 1) for t in single]),
        "tokens_per_s": _stats([new_tokens / t["total_s"] for t in single]),
        "samples_total_s": [t["total_s"] for t in single],
        "sweep": [],
        "floor": decode_floor(generator.model, _gpu_name(), new_tokens),
    }


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
