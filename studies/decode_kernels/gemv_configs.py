"""Experiment: does a wider set of kernel configurations than `tuning.candidates` make the fused
one-token step's products faster? Qwen2.5-7B shapes with the epilogues `decode_step` gives them.

    python3 studies/decode_kernels/gemv_configs.py --out gemv_configs.json

For each product: the best of `tuning.candidates` (what the engine tunes over) and the best of a wider
set (block_n up to 8, block_k from 256, num_stages up to 4), timed like `tuning.tune` (L2 flushed).
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import torch

from ferrylm.engine.kernels.gemv import CONFIG_KEYS, ROPE, Epilogue, Launch, gemv
from ferrylm.engine.tuning.choose import candidates
from ferrylm.shapes import PRODUCTS as SHAPES
from ferrylm.shapes import epilogues

PRODUCTS = {name: (*shape, epilogues()[name]) for name, shape in SHAPES.items()}


def wide(n: int, k: int, e: Epilogue):
    pair = 2 if e.pair else 1
    for bn, bk, warps, stages in itertools.product((1, 2, 4, 8), (256, 512, 1024, 2048, 4096), (4, 8), (1, 2, 3, 4)):
        if n % (pair * bn) == 0 and pair * bn * bk <= 16384 and (not e.pair or e.period % (2 * bn) == 0):
            yield dict(zip(CONFIG_KEYS, (bn, bk, warps, stages)))


def main() -> None:
    from triton.testing import do_bench

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--products", default=",".join(PRODUCTS))
    args = ap.parse_args()
    result = {"gpu": torch.cuda.get_device_name()}
    for name in args.products.split(","):
        n, k, e = PRODUCTS[name]
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        extra = {"residual": torch.randn(n, device="cuda", dtype=torch.bfloat16) if e.residual else None}
        if e.pair == ROPE:
            extra.update(pos=torch.tensor([100], device="cuda"), inv_freq=torch.rand(64, device="cuda"))
        timed = []
        for cfg in wide(n, k, e):
            try:
                ms = do_bench(lambda: gemv(x, w, None, Launch(**cfg, pdl=True), e, **extra), warmup=5, rep=30)
            except Exception as err:  # out of resources: skipped
                print(name, cfg, type(err).__name__, flush=True)
                continue
            timed.append((ms, cfg))
        timed.sort(key=lambda t: t[0])
        current = [t for t in timed if t[1] in list(candidates(n, k, e))]
        result[name] = {
            "gb": n * k * 2 / 1e9,
            "best_current": {"ms": current[0][0], **current[0][1]},
            "best_wide": [{"ms": ms, **cfg} for ms, cfg in timed[:5]],
        }
        print(name, json.dumps(result[name]), flush=True)
        Path(args.out).write_text(json.dumps(result, indent=2))  # after each product: a long sweep may be cut off


if __name__ == "__main__":
    main()
