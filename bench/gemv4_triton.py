"""The 4-bit matrix-vector kernel (ferrylm/engine/gemv4.py) per Qwen2.5-7B layer shape, beside torch's
int4 kernel (what `Engine(int4_group=...)` runs), one token, on a GPU.

    python3 bench/gemv4_triton.py --group 128 --out gemv4_triton_h100.json

Round-to-nearest 4-bit weights of random bf16 matrices; each product with its decode-step epilogue
(rotary positions on q/k/v, SiLU on gate/up, residual adds) for the Triton kernel, plain for torch's.
Times from triton.testing.do_bench (L2 flushed between runs, as in decode, where each weight is read
once per token); GB/s counts the packed weights, scales and x read, the floor divides them by the
GPU's peak bandwidth. Each configuration's result is checked against the dequantized weights first.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
PEAK_BANDWIDTH = {"H200": 4.8e12, "H100": 3.35e12}


def main() -> None:
    from triton.runtime.errors import OutOfResources
    from triton.testing import do_bench

    from ferrylm.engine.gemv import CONFIG_KEYS, ROPE, SILU, Epilogue
    from ferrylm.engine.gemv4 import gemv4, gemv4_reference, pack_int4
    from ferrylm.engine.tuning import tune4_candidates
    from ferrylm.engine.int4 import Int4WeightLinear, round_to_nearest_int4

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--group", type=int, default=128)
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name()
    bw = next((v for k, v in PEAK_BANDWIDTH.items() if k in gpu), None)
    shapes = {"wqkv": (4608, 3584, Epilogue(1e-6, ROPE, 128, 4096)), "wo": (3584, 3584, Epilogue(residual=True)),
              "w13": (37888, 3584, Epilogue(1e-6, SILU, 37888)), "w2": (3584, 18944, Epilogue(residual=True))}
    torch.manual_seed(0)
    rows = {}
    for name, (n, k, e) in shapes.items():
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        q, s = round_to_nearest_int4(w, args.group)
        packed, st = pack_int4(q, s)
        x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        g = torch.rand(k, device="cuda", dtype=torch.bfloat16) + 0.5 if e.norm_eps is not None else None
        extra = {"residual": torch.randn(n, device="cuda", dtype=torch.bfloat16)} if e.residual else {}
        if e.pair == ROPE:
            extra.update(pos=torch.tensor([100], device="cuda"), inv_freq=torch.rand(64, device="cuda"))
        nbytes = packed.numel() * packed.element_size() + s.numel() * 2 + k * 2
        torch_int4 = Int4WeightLinear(q, s, None, args.group)
        x2 = x.view(1, -1)
        ms_torch = do_bench(lambda: torch_int4(x2), warmup=5, rep=50)
        row = {"n": n, "k": k, "epilogue": str(e), "bytes": nbytes, "torch_int4_ms": ms_torch,
               "floor_ms": nbytes / bw * 1e3 if bw else None, "configs": []}
        want = gemv4_reference(x, packed, st, args.group, None, e, g, **extra)

        def measure(kw):
            try:
                got = gemv4(x, packed, st, args.group, None, epilogue=e, norm_weight=g, **extra, **kw)
            except (ValueError, OutOfResources):
                return
            err = ((got.float() - want).abs().max() / want.abs().max()).item()
            ms = do_bench(lambda: gemv4(x, packed, st, args.group, None, epilogue=e, norm_weight=g, **extra, **kw),
                          warmup=5, rep=50)
            row["configs"].append({**kw, "ms": ms, "gb_s": nbytes / ms / 1e6, "rel_error": err})
            print(name, kw, f"{ms * 1e3:.1f} us", f"{nbytes / ms / 1e6:.0f} GB/s", f"err {err:.2e}", flush=True)

        for cfg in tune4_candidates(n, k, args.group, e):    # what the engine's tuner times
            measure(cfg)
        for top in sorted(row["configs"], key=lambda c: c["ms"])[:2]:
            for warps, stages in ((4 if top["num_warps"] == 8 else 8, 1), (top["num_warps"], 2)):
                measure({**{key: top[key] for key in (*CONFIG_KEYS, "sub")}, "num_warps": warps, "num_stages": stages})
        best = min(row["configs"], key=lambda c: c["ms"])
        row["best"] = best
        print(name, "torch int4", f"{ms_torch * 1e3:.1f} us; best gemv4 {best['ms'] * 1e3:.1f} us; floor "
              f"{row['floor_ms'] * 1e3:.1f} us", flush=True)
        rows[name] = row
        # Written after each shape: a run stopped at a time limit keeps the shapes it finished.
        result = {"gpu": gpu, "torch": torch.__version__, "group": args.group, "shapes": rows}
        if len(rows) == len(shapes):
            result["layer_products_ms_per_token"] = {
                kind: 28 * sum(r[key] if key == "torch_int4_ms" else r["best"]["ms"] for r in rows.values())
                for kind, key in (("torch_int4", "torch_int4_ms"), ("gemv4", "best"))}
            print(json.dumps(result["layer_products_ms_per_token"]), flush=True)
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
