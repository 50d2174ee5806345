"""The 4-bit engine's decode with and without the L2 prefetch of `ferrylm/engine/prefetch.py`, one
engine, alternating (Qwen2.5-7B shapes, random weights, W4A16 group 128, one GPU).

    python3 bench/l2_prefetch.py --out l2_prefetch.json [--rounds 3] [--profile]

Each round times, with the prefetch off then on: the captured step (16 steps from an 8-token prompt,
best of 3: `Engine.step_ms`) and 512 tokens after a 128-token prompt (median of 3). The tokens with it
on must equal those with it off (it moves no numbers). `--profile` also splits a step's time among its
kernels: each kernel's end minus the previous kernel's end, summed per kind over 32 captured steps
(with programmatic dependent launch kernels overlap, so their own durations would count twice).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PRODUCTS = ("q/k/v", "o", "gate/up", "down")


def set_prefetch(engine, on: bool) -> None:
    from ferrylm.engine import prefetch

    if on:
        prefetch.plan(engine.decoder)
    else:
        for layer in engine.decoder.layers:
            layer.w2.prefetch = layer.attention_prefetch = None
    engine._graph = None


def split_step(engine, steps: int) -> dict:
    """ms per step of each kernel kind: end-to-end increments, in launch order."""
    prompt = list(range(1000, 1128))
    engine.generate_timed(prompt, steps)   # captured already; the cache from this prompt on
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        engine.generate_timed(prompt, steps)
    kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    per_kind, last_end, product = defaultdict(float), None, 0
    for e in kernels:
        name = e.name
        if name.startswith("_gemv4_kernel"):
            kind = PRODUCTS[product % 4]
            product += 1
        elif name.startswith("_gemv_kernel"):
            kind, product = "output layer", 0
        elif name.startswith(("_attend_chunk", "_combine_chunks")):
            kind = name.split("(")[0].strip()
        else:
            kind = "other"
        start, end = e.time_range.start, e.time_range.end
        if last_end is not None:   # the GPU idle before it (between replays, after the prompt) apart
            per_kind[kind] += max(end - max(start, last_end), 0) / 1e3
            per_kind["idle"] += max(start - last_end, 0) / 1e3
        last_end = max(end, last_end or end)
    # ms per one-token step (the prompt's kernels, eager, fall under "other")
    return {k: v / (steps - 1) for k, v in per_kind.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    from gpu_decode import model_7b

    from ferrylm.engine import Engine

    model = model_7b()
    n = args.new_tokens
    engine = Engine(model, max_len=128 + n + 8, gemv=True, tune=False, int4_group=128)
    ids = torch.randint(100, 150000, (128,), generator=torch.Generator().manual_seed(1)).tolist()
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "new_tokens": n,
              "gemv_configs": {str(k): v for k, v in engine.gemv_configs.items()}, "rounds": []}
    tokens = {}
    for r in range(args.rounds):
        for on in (False, True):
            set_prefetch(engine, on)
            engine._prefill(list(range(8)), 20)
            start = engine._pos.clone()
            engine._replay()
            step = engine.step_ms(start)
            for _ in range(2):
                engine.generate_timed(ids, n)
            runs = [engine.generate_timed(ids, n) for _ in range(3)]
            tokens[on] = runs[-1]["tokens"]
            row = {"round": r, "prefetch": on, "step_ms": step, "runs_s": [t["total_s"] for t in runs],
                   "median_s": statistics.median(t["total_s"] for t in runs),
                   "ttft_s": statistics.median(t["ttft_s"] for t in runs)}
            result["rounds"].append(row)
            print(json.dumps(row), flush=True)
    result["tokens_equal_on_off"] = tokens[True] == tokens[False]
    for on in (False, True):
        rows = [r for r in result["rounds"] if r["prefetch"] == on]
        result[f"median_s_{'on' if on else 'off'}"] = statistics.median(r["median_s"] for r in rows)
        result[f"step_ms_{'on' if on else 'off'}"] = statistics.median(r["step_ms"] for r in rows)
    if args.profile:
        for on in (False, True):
            set_prefetch(engine, on)
            result[f"split_ms_{'on' if on else 'off'}"] = split_step(engine, 32)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k not in ("rounds", "gemv_configs")}, indent=2))


if __name__ == "__main__":
    main()
