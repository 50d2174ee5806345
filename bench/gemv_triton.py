"""Experiment: a hand-written Triton matrix-vector kernel for batch-1 bf16 decode, against cuBLAS.

    python3 bench/gemv_triton.py --out gemv_h200.json

At one token per step every linear layer is y = W x with W read once; the bf16 engine measured 58 %
of the H200's bandwidth floor with cuBLAS's (and inductor's) kernels. This script
1. sweeps block shapes of one simple kernel (each program owns BLOCK_N rows and walks all of K,
   fp32 accumulation) on the Qwen2.5-7B decode shapes and reports GB/s against cuBLAS's `F.linear`;
2. with `--decode`, puts the best configuration per shape into `FusedDecoder`'s linear layers and
   times 512 greedy tokens through `ferrylm.serve.engine.Engine` (compiled, CUDA graphs), against
   the same decoder on cuBLAS in the same run.
Not part of the package: an experiment, kept with its numbers.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# (N, K) of the fused 7B decoder: wqkv, wo, w13 (gate+up), w2 (down), lm_head.
SHAPES = {"wqkv": (4608, 3584), "wo": (3584, 3584), "w13": (37888, 3584), "w2": (3584, 18944), "lm_head": (152064, 3584)}


@triton.jit
def gemv_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, K: tl.constexpr, HAS_BIAS: tl.constexpr,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_K)
    w_ptrs = w_ptr + rows[:, None].to(tl.int64) * K + cols[None, :]
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):        # K is a multiple of BLOCK_K (checked by the caller)
        x = tl.load(x_ptr + k + cols)
        w = tl.load(w_ptrs + k)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
    y = tl.sum(acc, axis=1)
    if HAS_BIAS:
        y += tl.load(b_ptr + rows).to(tl.float32)
    tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty))


def gemv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, cfg: dict) -> torch.Tensor:
    n, k = w.shape
    y = torch.empty(n, device=x.device, dtype=x.dtype)
    grid = (n // cfg["BLOCK_N"],)
    gemv_kernel[grid](x, w, b if b is not None else w, y, n, k, b is not None, BLOCK_N=cfg["BLOCK_N"],
                      BLOCK_K=cfg["BLOCK_K"], num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return y


class GemvLinear(torch.nn.Module):
    """One-token inputs through `gemv` with a fixed configuration; anything else through F.linear."""

    def __init__(self, linear: torch.nn.Linear, cfg: dict):
        super().__init__()
        self.weight, self.bias, self.cfg = linear.weight, linear.bias, cfg

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[:-1].numel() != 1:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        return gemv(x.reshape(-1), self.weight, self.bias, self.cfg).reshape(*x.shape[:-1], -1)


def configs():
    for bn, bk, warps, stages in itertools.product((1, 2, 4, 8, 16), (256, 512, 1024), (4, 8), (2, 3, 4)):
        if bn * bk <= 8192:
            yield {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages}


def sweep(shapes: dict) -> dict:
    from triton.testing import do_bench

    out = {}
    for name, (n, k) in shapes.items():
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        ref = torch.nn.functional.linear(x, w)
        gb = n * k * 2 / 1e9
        cublas_ms = do_bench(lambda: torch.nn.functional.linear(x, w), warmup=10, rep=100)
        best = None
        for cfg in configs():
            if k % cfg["BLOCK_K"] or n % cfg["BLOCK_N"]:
                continue
            try:
                y = gemv(x, w, None, cfg)
                err = ((y.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
                ms = do_bench(lambda: gemv(x, w, None, cfg), warmup=10, rep=100)
            except Exception as e:  # a configuration that does not compile (resources) is skipped
                print(name, cfg, "failed:", type(e).__name__, flush=True)
                continue
            if err < 1e-2 and (best is None or ms < best["ms"]):
                best = {"cfg": cfg, "ms": ms, "rel_err": err}
        out[name] = {"n": n, "k": k, "cublas_ms": cublas_ms, "cublas_gb_s": gb / cublas_ms * 1e3,
                     "triton_ms": best["ms"], "triton_gb_s": gb / best["ms"] * 1e3, "best": best["cfg"],
                     "rel_err": best["rel_err"]}
        print(name, json.dumps(out[name]), flush=True)
        del w
    return out


def decode(best: dict, runs: int) -> dict:
    from gpu_decode import model_7b
    from ferrylm.serve.engine import Engine

    model = model_7b()
    ids = torch.randint(100, 150000, (1, 128), generator=torch.Generator().manual_seed(1)).cuda()[0].tolist()
    result = {}
    for variant in ("fused-untuned (cuBLAS)", "fused + triton gemv"):
        torch._dynamo.reset()
        engine = Engine(model, max_len=128 + 512 + 8, fused=True, tune=False)
        if "triton" in variant:
            dec = engine.decoder
            for layer in dec.layers:
                for attr in ("wqkv", "wo", "w13", "w2"):
                    setattr(layer, attr, GemvLinear(getattr(layer, attr), best[attr]["best"]))
            dec.lm_head = GemvLinear(dec.lm_head, best["lm_head"]["best"])
        t0 = time.perf_counter()
        engine.generate_timed(ids, 512)
        engine.generate_timed(ids, 512)
        warm = time.perf_counter() - t0
        times = [engine.generate_timed(ids, 512)["total_s"] for _ in range(runs)]
        result[variant] = {"runs_s": times, "median_s": statistics.median(times), "warmup_s": warm}
        print(variant, json.dumps(result[variant]), flush=True)
        del engine
        torch.cuda.empty_cache()
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--decode", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    result["shapes"] = sweep(SHAPES)
    total_gb = sum(v["n"] * v["k"] * 2 for v in result["shapes"].values()) / 1e9
    layers = {"wqkv": 28, "wo": 28, "w13": 28, "w2": 28, "lm_head": 1}
    for kind in ("cublas", "triton"):
        ms = sum(result["shapes"][s][f"{kind}_ms"] * c for s, c in layers.items())
        result[f"{kind}_linear_ms_per_token"] = ms
        result[f"{kind}_linear_s_per_512_tokens"] = ms * 512 / 1e3
    result["one_layer_of_each_gb"] = total_gb
    if args.decode:
        result["decode_512"] = decode(result["shapes"], args.runs)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "shapes"}, indent=2))


if __name__ == "__main__":
    main()
