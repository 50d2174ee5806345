"""The 4-bit engine's captured step, kernel by kernel and configuration by configuration (Qwen2.5-7B
shapes, random weights, W4A16 group 128, one GPU).

    python3 studies/decode_kernels/gemv4_in_step.py --out gemv4_in_step.json [--workers 14] [--wide]

1. Where the step's time goes: each kernel's end minus the previous kernel's end, summed per kind over
   31 captured steps (with programmatic dependent launch kernels overlap, so their own durations
   would count twice; the GPU's idle time between steps apart).
2. Every candidate configuration of each 4-bit product timed inside the captured step (`Engine.step_ms`:
   16 steps from an 8-token prompt, best of 3), the other products as the engine chose them. `--wide`:
   block_n 8/16 x block_k 256-2048 x one or two row blocks x 4 or 8 warps instead of the tuner's table;
   `--workers` processes compile them into Triton's cache first.
3. The fastest in-step configuration of each product together, against the engine's own choice, in the
   same process: the step, and 512 tokens after a 128-token prompt (median of 3, alternated twice).

`--cross key=v1,v2` (e.g. `ahead=1,2`) crosses the candidates with those values of a `gemv4` argument,
and first times the step with every product's chosen configuration at each value.

`--read-only` instead splits the step with the engine's choice, then again with every 4-bit product's
arithmetic taken out (`_dot8` replaced by one xor a word: the same reads, grid and epilogue; the
numbers it writes are wrong), so each product's reads alone in the step are measured. `--empty` does
the same with kernels that do none of the work (`_gemv4_kernel_empty`): what the step's chain of
launches costs by itself.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch
import triton
import triton.language as tl

WIDE = tuple(itertools.product((8, 16), (256, 512, 1024, 2048), (1, 2), (4, 8)))


def read_only_kernel():
    """`gemv4_kernel.kernel` with `_dot8` doing one xor a word (a copy of the module, imported
    from a temporary file so Triton can read its source)."""
    import importlib.util
    import tempfile

    from ferrylm.engine.kernels import gemv4_kernel

    src = Path(gemv4_kernel.__file__).read_text()
    start = src.index("@triton.jit\ndef _dot8")
    end = src.index("@triton.jit", start + 1)
    src = (
        src[:start]
        + (
            "@triton.jit\ndef _dot8(p, s, x):\n"
            "    return (p ^ (x[1][:, :, None].to(tl.int32, bitcast=True))).to(tl.float32, bitcast=True)"
            " * s.to(tl.float32)[:, None, :]\n\n\n"
        )
        + src[end:]
    )
    path = Path(tempfile.mkdtemp()) / "_gemv4_read_only.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("ferrylm.engine._gemv4_read_only", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.kernel


@triton.jit
def _gemv4_kernel_empty(
    x_ptr,
    w_ptr,
    s_ptr,
    g_ptr,
    b_ptr,
    r_ptr,
    y_ptr,
    pos_ptr,
    freq_ptr,
    eps,
    rope_scale,
    K: tl.constexpr,
    GROUP: tl.constexpr,
    HAS_G: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    NORM: tl.constexpr,
    PAIR: tl.constexpr,
    PERIOD: tl.constexpr,
    ROPE_ROWS: tl.constexpr,
    RESIDUAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
    SUB: tl.constexpr,
    B: tl.constexpr,
    AHEAD: tl.constexpr = 1,
):
    """The 4-bit kernel's launch, grid and dependencies with none of its work: it waits for the kernel
    before it (as the real one does before reading x), lets the next one start, and writes zeros to
    as many outputs (its own rows or not: only the count matters here)."""
    W: tl.constexpr = BLOCK_N * SUB * (1 + PAIR // 2)  # outputs a program: rotary pairs write both halves
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    at = tl.program_id(0) * W + tl.arange(0, W)
    tl.store(y_ptr + at, tl.zeros([W], tl.float32).to(y_ptr.dtype.element_ty))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--wide", action="store_true")
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--read-only", action="store_true")
    ap.add_argument("--products", help="which products to search (e.g. w13,w2; default: all four)")
    ap.add_argument("--cross", help="key=v1,v2: a gemv4 argument to cross the candidates with (e.g. ahead=1,2)")
    ap.add_argument("--empty", action="store_true")
    args = ap.parse_args()
    from common import _compile, products, split_step

    from ferrylm.engine import Engine
    from ferrylm.engine.decode_step import configure
    from ferrylm.engine.tuning.choose import TUNE4, tune4_candidates
    from ferrylm.shapes import qwen7b_model

    shapes = products()
    todo = {
        name: list(tune4_candidates(n_, k_, 128, e, WIDE if args.wide else TUNE4))
        for name, (n_, k_, e) in shapes.items()
    }
    if args.products:
        todo = {name: cfgs for name, cfgs in todo.items() if name in args.products.split(",")}
    cross_key, values = args.cross.split("=") if args.cross else (None, "")
    values = [int(v) for v in values.split(",") if v]
    if cross_key:
        todo = {name: [{**cfg, cross_key: v} for cfg in cfgs for v in values] for name, cfgs in todo.items()}
    if args.workers > 1:  # before the model: each worker holds its own copy of one product's weights
        # the engine's launches (PDL on), so the engine finds them in Triton's cache
        jobs = [(name, 128, {**cfg, "pdl": True}) for name in todo for cfg in todo[name]]
        with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
            for job, status in zip(jobs, pool.map(_compile, jobs, chunksize=4)):
                if status != "ok":
                    print(job, "compile:", status, flush=True)
    model = qwen7b_model()
    n = args.new_tokens
    engine = Engine(model, max_len=128 + n + 8, gemv=True, tune=False, int4_group=128, tuned_dir=False)
    names = {(n_, k_): name for name, (n_, k_, _) in shapes.items()}
    keys = {names[key[1], key[2]]: key for key in engine.gemv_configs if key[0] == "int4"}
    chosen = {
        name: {k: v for k, v in engine.gemv_configs[key].items() if k not in ("ms", "runners_up", "step_ms")}
        for name, key in keys.items()
    }
    engine.prefill(list(range(8)), 20)
    start = engine.position()

    def step_with(configs: dict) -> float:
        for name, cfg in configs.items():
            configure(engine.decoder, keys[name], cfg)
        engine.recapture()
        engine.capture_at(start)
        return engine.step_ms(start)

    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "chosen": chosen,
        "split_ms_chosen": split_step(engine),
        "in_step": {},
    }
    if args.read_only or args.empty:
        from ferrylm.engine.kernels import gemv4

        label = "read_only" if args.read_only else "empty"
        result["step_ms_chosen"] = step_with(chosen)
        with gemv4.kernel_swapped(read_only_kernel() if args.read_only else _gemv4_kernel_empty):
            result[f"step_ms_{label}"] = step_with(chosen)
            result[f"split_ms_{label}"] = split_step(engine)
        Path(args.out).write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))
        return
    engine.prefill(list(range(8)), 20)
    result["step_ms_chosen"] = step_with(chosen)
    if cross_key:  # every product at one value, its configuration as chosen
        result["step_ms_all_at"] = {
            v: step_with({name: {**cfg, cross_key: v} for name, cfg in chosen.items()}) for v in values
        }
        print(f"all products at each {cross_key}:", result["step_ms_all_at"], flush=True)
    best = dict(chosen)
    for name, cfgs in todo.items():
        rows = []
        for cfg in cfgs:
            try:
                ms = step_with({**chosen, name: cfg})
            except Exception as exc:  # out of resources on this GPU: not a candidate
                print(name, cfg, type(exc).__name__, flush=True)
                continue
            rows.append({**cfg, "step_ms": ms})
            print(name, cfg, f"{ms:.4f} ms", flush=True)
        rows.sort(key=lambda r: r["step_ms"])
        result["in_step"][name] = rows
        best[name] = {k: v for k, v in rows[0].items() if k != "step_ms"}
        result["step_ms_chosen_again"] = step_with(chosen)  # drift check
    result["best_in_step"] = best
    result["step_ms_best"] = step_with(best)
    ids = torch.randint(100, 150000, (128,), generator=torch.Generator().manual_seed(1)).tolist()
    decode = {"chosen": [], "best": []}
    for _ in range(2):
        for which, cfgs in (("chosen", chosen), ("best", best)):
            step_with(cfgs)
            for _ in range(2):
                engine.generate_timed(ids, n)
            decode[which] += [engine.generate_timed(ids, n)["total_s"] for _ in range(3)]
    result["decode_s"] = decode
    result["decode_median_s"] = {k: statistics.median(v) for k, v in decode.items()}
    step_with(best)
    result["split_ms_best"] = split_step(engine)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "in_step"}, indent=2))


if __name__ == "__main__":
    main()
