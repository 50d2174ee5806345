"""The 4-bit matrix-vector kernel (ferrylm/engine/kernels/gemv4.py) per Qwen2.5-7B layer shape, beside torch's
int4 kernel (what `Engine(int4_group=...)` runs), one token, on a GPU.

    python3 studies/decode_kernels/gemv4_vs_int4mm.py --group 128 --out gemv4_triton_h100.json
    python3 studies/decode_kernels/gemv4_vs_int4mm.py --group 128 --vary num_warps=4,8 --workers 14 --out gemv4_warps_h100.json

Round-to-nearest 4-bit weights of random bf16 matrices; each product with its decode-step epilogue
(rotary positions on q/k/v, SiLU on gate/up, residual adds) for the Triton kernel, plain for torch's.
Times from triton.testing.do_bench (L2 flushed between runs, as in decode, where each weight is read
once per token); GB/s counts the packed weights, scales and x read, the floor divides them by the
GPU's peak bandwidth. Each configuration's result is checked against the dequantized weights first.

Without `--vary`: the tuner's candidates (`tune4_candidates`) and, for the two fastest, the other
warp count and two stages. With `--vary key=v1,v2` (repeatable): every candidate at each of those
values. `--workers` processes compile the configurations into Triton's cache first; this one then
times them one at a time.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch
from common import SHAPES, _compile, configs, run, shape

PEAK_BANDWIDTH = {"H200": 4.8e12, "H100": 3.35e12}


def main() -> None:
    from triton.runtime.errors import OutOfResources
    from triton.testing import do_bench

    from ferrylm.engine.kernels.gemv import CONFIG_KEYS
    from ferrylm.engine.kernels.gemv4 import gemv4_reference
    from ferrylm.engine.kernels.int4 import Int4WeightLinear

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--workers", type=int, default=1, help="processes compiling the configurations first")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument(
        "--vary",
        action="append",
        default=[],
        help="key=v1,v2: every candidate at each of these values (e.g. num_warps=4,8)",
    )
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name()
    bw = next((v for k, v in PEAK_BANDWIDTH.items() if k in gpu), None)
    names = args.shapes.split(",")
    rows = {}
    for name in names:
        sh = shape(name, args.group)
        n, k, e = sh["n"], sh["k"], sh["e"]
        nbytes = sh["packed"].numel() * 4 + sh["scales"].numel() * 2 + k * 2
        torch_int4 = Int4WeightLinear(sh["q"], sh["s"], None, args.group)
        x2 = sh["x"].view(1, -1)
        ms_torch = do_bench(lambda: torch_int4(x2), warmup=5, rep=50)
        row = {
            "n": n,
            "k": k,
            "epilogue": str(e),
            "bytes": nbytes,
            "torch_int4_ms": ms_torch,
            "floor_ms": nbytes / bw * 1e3 if bw else None,
            "configs": [],
        }
        want = gemv4_reference(sh["x"], sh["packed"], sh["scales"], args.group, None, e, sh["g"], **sh["extra"])
        todo = configs(sh, args.group, args.vary)
        if args.workers > 1:
            with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
                for cfg, status in zip(todo, pool.map(_compile, [(name, args.group, c) for c in todo])):
                    if status != "ok":
                        print(name, cfg, "compile:", status, flush=True)

        def measure(kw):
            try:
                got = run(sh, args.group, kw)
            except (ValueError, OutOfResources):
                return
            err = ((got.float() - want).abs().max() / want.abs().max()).item()
            ms = do_bench(lambda: run(sh, args.group, kw), warmup=5, rep=50)
            row["configs"].append({**kw, "ms": ms, "gb_s": nbytes / ms / 1e6, "rel_error": err})
            print(name, kw, f"{ms * 1e3:.1f} us", f"{nbytes / ms / 1e6:.0f} GB/s", f"err {err:.2e}", flush=True)

        for cfg in todo:  # without --vary: what the engine's tuner times
            measure(cfg)
        if not args.vary:
            for top in sorted(row["configs"], key=lambda c: c["ms"])[:2]:
                for warps, stages in ((4 if top["num_warps"] == 8 else 8, 1), (top["num_warps"], 2)):
                    measure(
                        {**{key: top[key] for key in (*CONFIG_KEYS, "sub")}, "num_warps": warps, "num_stages": stages}
                    )
        row["best"] = min(row["configs"], key=lambda c: c["ms"])
        print(
            name,
            "torch int4",
            f"{ms_torch * 1e3:.1f} us; best gemv4 {row['best']['ms'] * 1e3:.1f} us; floor "
            f"{row['floor_ms'] * 1e3:.1f} us",
            flush=True,
        )
        rows[name] = row
        # Written after each shape: a run stopped at a time limit keeps the shapes it finished.
        result = {"gpu": gpu, "torch": torch.__version__, "group": args.group, "vary": args.vary, "shapes": rows}
        if len(rows) == len(SHAPES):
            result["layer_products_ms_per_token"] = {
                kind: 28 * sum(r[key] if key == "torch_int4_ms" else r[key]["ms"] for r in rows.values())
                for kind, key in (("torch_int4", "torch_int4_ms"), ("gemv4", "best"))
            }
            print(json.dumps(result["layer_products_ms_per_token"]), flush=True)
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
