"""The 4-bit matrix-vector kernel (ferrylm/engine/gemv4.py) per Qwen2.5-7B layer shape, beside torch's
int4 kernel (what `Engine(int4_group=...)` runs), one token, on a GPU.

    python3 bench/gemv4_triton.py --group 128 --out gemv4_triton_h100.json
    python3 bench/gemv4_triton.py --group 128 --vary num_warps=4,8 --workers 14 --out gemv4_warps_h100.json

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

PEAK_BANDWIDTH = {"H200": 4.8e12, "H100": 3.35e12}
SHAPES = ("wqkv", "wo", "w13", "w2")


def products() -> dict:
    """Each 7B product's (rows, inputs, decode-step epilogue), by name."""
    from ferrylm.engine.gemv import ROPE, SILU, Epilogue

    return {"wqkv": (4608, 3584, Epilogue(1e-6, ROPE, 128, 4096)), "wo": (3584, 3584, Epilogue(residual=True)),
            "w13": (37888, 3584, Epilogue(1e-6, SILU, 37888)), "w2": (3584, 18944, Epilogue(residual=True))}


def shape(name: str, group: int) -> dict:
    """One 7B product's weights, inputs and epilogue (seeded: every process builds the same)."""
    from ferrylm.engine.gemv import ROPE
    from ferrylm.engine.gemv4 import pack_int4
    from ferrylm.engine.int4 import round_to_nearest_int4

    n, k, e = products()[name]
    torch.manual_seed(SHAPES.index(name))
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
    q, s = round_to_nearest_int4(w, group)
    packed, st = pack_int4(q, s)
    extra = {"residual": torch.randn(n, device="cuda", dtype=torch.bfloat16)} if e.residual else {}
    if e.pair == ROPE:
        extra.update(pos=torch.tensor([100], device="cuda"), inv_freq=torch.rand(64, device="cuda"))
    return dict(n=n, k=k, e=e, q=q, s=s, packed=packed, scales=st, extra=extra,
                x=torch.randn(k, device="cuda", dtype=torch.bfloat16),
                g=torch.rand(k, device="cuda", dtype=torch.bfloat16) + 0.5 if e.norm_eps is not None else None)


def run(sh: dict, group: int, cfg: dict) -> torch.Tensor:
    from ferrylm.engine.gemv4 import gemv4

    return gemv4(sh["x"], sh["packed"], sh["scales"], group, None, epilogue=sh["e"], norm_weight=sh["g"],
                 **sh["extra"], **cfg)


def configs(sh: dict, group: int, vary: list[str]) -> list[dict]:
    """The tuner's candidates for this shape, crossed with each `key=v1,v2` of `vary`."""
    from ferrylm.engine.tuning import tune4_candidates

    todo = list(tune4_candidates(sh["n"], sh["k"], group, sh["e"]))
    for item in vary:
        key, values = item.split("=")
        todo = [{**c, key: int(v)} for c in todo for v in values.split(",")]
    return todo


def _compile(job) -> str:
    """In a worker process: one launch, so the configuration lands in Triton's on-disk cache."""
    name, group, cfg = job
    global _cache
    if name not in _cache:
        _cache = {name: shape(name, group)}
    try:
        run(_cache[name], group, cfg)
        torch.cuda.synchronize()
        return "ok"
    except Exception as exc:   # reported, then skipped in the timed pass
        return f"{type(exc).__name__}: {str(exc)[:200]}"


_cache: dict = {}


def main() -> None:
    from triton.runtime.errors import OutOfResources
    from triton.testing import do_bench

    from ferrylm.engine.gemv import CONFIG_KEYS
    from ferrylm.engine.gemv4 import gemv4_reference
    from ferrylm.engine.int4 import Int4WeightLinear

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--workers", type=int, default=1, help="processes compiling the configurations first")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--vary", action="append", default=[],
                    help="key=v1,v2: every candidate at each of these values (e.g. num_warps=4,8)")
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
        row = {"n": n, "k": k, "epilogue": str(e), "bytes": nbytes, "torch_int4_ms": ms_torch,
               "floor_ms": nbytes / bw * 1e3 if bw else None, "configs": []}
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

        for cfg in todo:    # without --vary: what the engine's tuner times
            measure(cfg)
        if not args.vary:
            for top in sorted(row["configs"], key=lambda c: c["ms"])[:2]:
                for warps, stages in ((4 if top["num_warps"] == 8 else 8, 1), (top["num_warps"], 2)):
                    measure({**{key: top[key] for key in (*CONFIG_KEYS, "sub")}, "num_warps": warps,
                             "num_stages": stages})
        row["best"] = min(row["configs"], key=lambda c: c["ms"])
        print(name, "torch int4", f"{ms_torch * 1e3:.1f} us; best gemv4 {row['best']['ms'] * 1e3:.1f} us; floor "
              f"{row['floor_ms'] * 1e3:.1f} us", flush=True)
        rows[name] = row
        # Written after each shape: a run stopped at a time limit keeps the shapes it finished.
        result = {"gpu": gpu, "torch": torch.__version__, "group": args.group, "vary": args.vary, "shapes": rows}
        if len(rows) == len(SHAPES):
            result["layer_products_ms_per_token"] = {
                kind: 28 * sum(r[key] if key == "torch_int4_ms" else r[key]["ms"] for r in rows.values())
                for kind, key in (("torch_int4", "torch_int4_ms"), ("gemv4", "best"))}
            print(json.dumps(result["layer_products_ms_per_token"]), flush=True)
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
