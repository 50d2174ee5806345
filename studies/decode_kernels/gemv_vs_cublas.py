"""The engine's Triton matrix-vector kernel (ferrylm/engine/kernels/gemv.py) against cuBLAS, for batch-1 bf16 decode.

    python3 studies/decode_kernels/gemv_vs_cublas.py --out gemv_h200.json [--decode]

1. Per Qwen2.5-7B decode shape: cuBLAS's `F.linear` and the kernel's tuned configuration, in ms and
   GB/s (L2 flushed between runs, as in decode where each weight is read once per token).
2. With `--decode`: 512 greedy tokens after a 128-token prompt through `Engine` (fused decoder,
   compiled, CUDA graphs), on cuBLAS, on the kernel, on the kernel with programmatic dependent
   launch, and with inductor's own kernels also launched that way (where this torch has the
   setting). Also each variant's first decode step against the same decoder in fp32, and how many of
   the 512 greedy tokens agree with cuBLAS's (bf16 sums in another order flip near ties, and random
   weights make many).
(Earlier versions of this script, with their results in git history: commit df96597 swept a simpler
kernel without masking or PDL; commit 8dcc055 fused the norms and the SiLU gate into the kernel.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import triton

from ferrylm.shapes import PRODUCTS

# (N, K) of the fused 7B decoder: wqkv, wo, w13 (gate+up), w2 (down), lm_head; and how many per token.
SHAPES = PRODUCTS
PER_TOKEN = {"wqkv": 28, "wo": 28, "w13": 28, "w2": 28, "lm_head": 1}


def sweep(pdl: bool) -> dict:
    from triton.testing import do_bench

    from ferrylm.engine.tuning.choose import tune

    out = {}
    for name, (n, k) in SHAPES.items():
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        gb = n * k * 2 / 1e9
        cublas_ms = do_bench(lambda: torch.nn.functional.linear(x, w), warmup=10, rep=100)
        t0 = time.perf_counter()
        best = tune(w, pdl)
        out[name] = {
            "n": n,
            "k": k,
            "cublas_ms": cublas_ms,
            "cublas_gb_s": gb / cublas_ms * 1e3,
            "gemv_ms": best["ms"],
            "gemv_gb_s": gb / best["ms"] * 1e3,
            "config": best,
            "tune_s": time.perf_counter() - t0,
        }
        print(name, json.dumps(out[name]), flush=True)
    return out


def decode(configs: dict, runs: int, only: list[str]) -> dict:
    import torch._inductor.config as inductor

    from ferrylm.engine import Engine
    from ferrylm.engine.decode_step import gemv_weights
    from ferrylm.engine.kernels.gemv import supports_pdl
    from ferrylm.shapes import qwen7b_model

    model = qwen7b_model()
    ids = torch.randint(100, 150000, (1, 128), generator=torch.Generator().manual_seed(1)).cuda()[0].tolist()
    has_inductor_pdl = hasattr(inductor.triton, "enable_pdl")
    pdl = supports_pdl()
    # name: (kernel PDL or None for cuBLAS, inductor's kernels PDL, the fused one-token step)
    variants = {"cuBLAS": (None, False, False), "gemv": (pdl, pdl, False), "gemv, fused step": (pdl, pdl, True)}
    variants = {k: v for k, v in variants.items() if k in only}
    result, ref_logits, ref_tokens = {"inductor_has_enable_pdl": has_inductor_pdl}, None, None
    first_logits = {}
    for variant, (pdl, inductor_pdl, fused_step) in variants.items():
        torch._dynamo.reset()
        engine = Engine(model, max_len=128 + 512 + 8, fused=True, tune=False)
        if has_inductor_pdl:  # after Engine(), which sets it for its own choice
            inductor.triton.enable_pdl = inductor_pdl
        t_tune = time.perf_counter()
        used = gemv_weights(engine.decoder, pdl, configs, fused_step=fused_step) if pdl is not None else {}
        t_tune = time.perf_counter() - t_tune
        with torch.no_grad():  # the first decode step, eagerly: logits after the prompt
            first = engine.prefill(ids, 1)
            logits = engine.decoder(first, torch.tensor([len(ids)], device="cuda"))[0, -1].float()
        t0 = time.perf_counter()
        engine.generate_timed(ids, 512)
        engine.generate_timed(ids, 512)
        warm = time.perf_counter() - t0
        timings = [engine.generate_timed(ids, 512) for _ in range(runs)]
        times = [t["total_s"] for t in timings]
        rec = {
            "runs_s": times,
            "median_s": statistics.median(times),
            "warmup_s": warm,
            "tune_s": t_tune,
            "ttft_s": statistics.median(t["ttft_s"] for t in timings),
            "kernels": {f"{n}x{k} {e}": cfg for (n, k, e), cfg in used.items()},
        }
        if ref_logits is None:
            ref_logits, ref_tokens = logits, timings[0]["tokens"]
        else:
            rec["first_step_max_logit_diff_vs_cublas"] = (logits - ref_logits).abs().max().item()
            rec["first_step_logit_scale"] = ref_logits.abs().max().item()
            rec["greedy_tokens_equal_to_cublas"] = sum(a == b for a, b in zip(timings[0]["tokens"], ref_tokens))
        if fused_step:  # the captured loop's tokens against the same kernels run eagerly, token by token
            with torch.no_grad():
                token, eager = engine.prefill(ids, 64), []
                for i in range(64):
                    eager.append(int(token))
                    token = engine.decoder(token.view(1, 1), torch.tensor([len(ids) + i], device="cuda"))[:, -1].argmax(
                        -1
                    )
            rec["first_64_tokens_equal_to_eager_steps"] = sum(a == b for a, b in zip(eager, timings[0]["tokens"]))
            rec["first_64_tokens_equal_to_stream"] = sum(
                a == b for a, b in zip(engine.stream(ids, 64), timings[0]["tokens"])
            )
        result[variant] = rec
        first_logits[variant] = logits
        print(variant, json.dumps(rec), flush=True)
        del engine
        torch.cuda.empty_cache()
    if has_inductor_pdl:
        inductor.triton.enable_pdl = False
    # Each variant's first decode step against the same decoder in fp32: which is closer to exact.
    from ferrylm.engine.fused import FusedDecoder

    with torch.no_grad():
        ref = FusedDecoder(model.float(), 128 + 8)
        ref(torch.tensor([ids], device="cuda"), torch.arange(len(ids), device="cuda"))
        exact = ref(first.view(1, 1), torch.tensor([len(ids)], device="cuda"))[0, -1]
    for variant, logits in first_logits.items():
        result[variant]["first_step_max_logit_diff_vs_fp32"] = (logits - exact).abs().max().item()
    return result


def main() -> None:
    from ferrylm.engine.kernels.gemv import supports_pdl

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--decode", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--variants",
        default="cuBLAS,gemv,gemv, fused step".replace(", ", "+"),
        help="decode variants, comma-separated: cuBLAS, gemv (every product on the kernel, PDL on "
        "Hopper), gemv+fused step (norms, rotary positions, SiLU gate, residual adds and "
        "attention in the kernels of ferrylm/engine/decode_step.py)",
    )
    args = ap.parse_args()
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "pdl": supports_pdl(),
    }
    result["shapes"] = sweep(supports_pdl())
    for kind in ("cublas", "gemv"):
        ms = sum(result["shapes"][s][f"{kind}_ms"] * c for s, c in PER_TOKEN.items())
        result[f"{kind}_linear_ms_per_token"] = ms
        result[f"{kind}_linear_s_per_512_tokens"] = ms * 512 / 1e3
    if args.decode:
        from ferrylm.engine.kernels.gemv import Epilogue

        configs = {(v["n"], v["k"], Epilogue()): v["config"] for v in result["shapes"].values()}
        result["decode_512"] = decode(configs, args.runs, [v.replace("+", ", ") for v in args.variants.split(",")])
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "shapes"}, indent=2))


if __name__ == "__main__":
    main()
