"""What the bf16 decode step's weight reads alone cost on this GPU: the 113 products of a Qwen2.5-7B
step (per layer q/k/v, o, gate/up, down; then the output layer) replaced by the plainest read of the
same bytes (`common._stream`), launched in the same order back to back in a CUDA graph,
each on its own buffer (14.1 GB in all, so nothing is in the L2). Two ways: each read after the last (`serial`), and each launching
its successor at once through programmatic dependent launch (`overlapped`: no kernel boundary drains
the memory, the best any sequence of kernels reading these bytes could do). Beside them, in the same
run, the engine's own bf16 step (`Engine(gemv=True)`): 512 tokens, the time per step after the first.
Each is also split by kind (q/k/v, o, gate/up, down, output layer; the engine's attention and the
rest) as gemv4_in_step.py splits the 4-bit step: each kernel's end minus the previous one's, profiled
(the reads alone launched once each, not in the graph: the profiler's split, not the graph's total).

    python3 studies/decode_kernels/gemv_step_floor.py --out gemv_step_floor_h100.json [--try 3584,3584:2,4096,4,1 ...]

`--try N,K:block_n,block_k,num_warps,num_stages` puts that configuration on the [N, K] products of the
engine's step and times its 512 tokens again (then the engine's own choice once more, for the drift).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton
import triton.language as tl

from ferrylm.shapes import LAYER, PRODUCTS

BLOCK = 4096  # int32 words a program (16 KB)
# [n, k] of each product a layer reads, in the step's order, then the output layer's
HEAD = PRODUCTS["lm_head"]


@triton.jit
def _prefetch_asm(ptr, n, sink_ptr, p, BLOCK: tl.constexpr):
    """decode_step.prefetch_block's block p, asked of the L2 one 128-byte line a thread (evict_last) instead of
    loaded: the program ends without waiting for the words."""
    LINES: tl.constexpr = BLOCK // 32
    at = tl.minimum(p * BLOCK + tl.arange(0, LINES) * 32, n - 1)
    tl.inline_asm_elementwise(
        "prefetch.global.L2::evict_last [$1];\n\tmov.u32 $0, 0;",
        "=r,l",
        [ptr + at],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


def reads_alone(layers: int, pdl: bool, rounds: int = 10) -> dict:
    from common import STEP_PRODUCTS, _stream, back_to_back, split_events

    shapes = [s for _ in range(layers) for s in LAYER] + [HEAD]
    bufs = [torch.empty(n * k // 2 // BLOCK * BLOCK, device="cuda", dtype=torch.int32) for n, k in shapes]
    y = torch.empty(max(b.numel() for b in bufs) // BLOCK, device="cuda", dtype=torch.int32)
    launch = {"launch_pdl": True} if pdl else {}
    nbytes = sum(b.numel() * 4 for b in bufs)

    def read(i: int) -> None:
        _stream[(bufs[i].numel() // BLOCK,)](bufs[i], y, BLOCK, pdl, num_warps=8, **launch)

    timed = back_to_back(read, len(bufs), nbytes, rounds)
    step_us = timed["us"] * len(bufs)  # back_to_back gives the time per launch
    launched = iter(range(len(bufs)))

    def kind_of(name: str) -> str:
        i = next(launched)
        return STEP_PRODUCTS[i % 4] if i < 4 * layers else "output layer"

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(len(bufs)):
            read(i)
        torch.cuda.synchronize()
    split = split_events(prof.events(), kind_of, 1)
    bufs = None
    torch.cuda.empty_cache()
    return {
        "launches": len(shapes),
        "gb": nbytes / 1e9,
        "step_ms": step_us / 1e3,
        "tb_s": nbytes / step_us / 1e6,
        "split_ms_one_launch_each": split,
    }


def engine_step(
    tries: list[tuple[str, dict]],
    prefetch: list[tuple[int, float, float]],
    int4: bool = False,
    new_tokens: int = 512,
    runs: int = 3,
) -> dict:
    """The engine's 512 tokens and its step split by kind; then with each of `tries` (a product's
    shape and a configuration for it) in place of the engine's choice, and the choice again."""
    from common import split_step

    from ferrylm.engine import Engine, decode_step
    from ferrylm.engine.decode_step import configure
    from ferrylm.shapes import qwen7b_model

    model = qwen7b_model()
    prompt = list(range(1000, 1128))
    engine = Engine(model, max_len=len(prompt) + new_tokens + 8, gemv=True, int4_group=128 if int4 else None)

    def timed() -> dict:
        engine.generate_timed(prompt, new_tokens)
        timings = [engine.generate_timed(prompt, new_tokens) for _ in range(runs)]
        steps = sorted((t["total_s"] - t["ttft_s"]) / (new_tokens - 1) for t in timings)
        return {"total_s": sorted(t["total_s"] for t in timings), "step_ms": [s * 1e3 for s in steps]}

    result = {**timed(), "split_ms": split_step(engine), "tries": []}
    for shape, cfg in tries:
        key = next(k for k in engine.gemv_configs if tuple(k[:2]) == shape)
        configure(engine.decoder, key, cfg)
        engine.recapture()  # captured again with this configuration
        result["tries"].append({"shape": shape, "config": cfg, **timed()})
        print(json.dumps(result["tries"][-1]), flush=True)
        configure(engine.decoder, key, engine.gemv_configs[key])
        engine.recapture()
    chosen, words = engine.decoder.attention_prefetch, decode_step.words
    for block, lo, hi in prefetch:  # words a program of attention's reads of o's weights into the L2 (0: none)
        # o's words as the step sees them: only the part [lo, hi) of them, all of which it reads ahead
        engine.decoder.attention_prefetch = (block, 1.0)
        decode_step.words = lambda linear, lo=lo, hi=hi: (w := words(linear))[int(lo * w.numel()) : int(hi * w.numel())]
        engine.recapture()
        result["tries"].append({"attention_prefetch": block, "part": [lo, hi], **timed()})
        print(json.dumps(result["tries"][-1]), flush=True)
    engine.decoder.attention_prefetch, decode_step.words = chosen, words
    engine.recapture()
    if tries or prefetch:  # the engine's own choice once more: the drift over the tries
        result["again"] = timed()
    engine = model = None
    torch.cuda.empty_cache()
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--skip-engine", action="store_true")
    ap.add_argument(
        "--try",
        dest="tries",
        action="append",
        default=[],
        help="N,K:block_n,block_k,num_warps,num_stages: that product's configuration in the engine's step",
    )
    ap.add_argument(
        "--prefetch",
        default="",
        help="e.g. 0,4096,16384,16384@0.5-1: words a program of attention's "
        "prefetching of o's weights reads (@lo-hi: only that part of them, as fractions)",
    )
    ap.add_argument("--int4", action="store_true", help="the 4-bit engine (group 128) instead of bf16")
    ap.add_argument(
        "--prefetch-asm",
        action="store_true",
        help="attention's prefetching programs ask the L2 for "
        "their words with PTX's prefetch instruction instead of loading them (nothing waits for them)",
    )
    args = ap.parse_args()
    if args.prefetch_asm:  # before anything compiles: Triton reads the module's globals at compile time
        from ferrylm.engine import decode_step

        decode_step.prefetch_block = _prefetch_asm
    tries = [
        (
            tuple(map(int, shape.split(","))),
            dict(zip(("block_n", "block_k", "num_warps", "num_stages"), map(int, cfg.split(",")))),
        )
        for shape, cfg in (t.split(":") for t in args.tries)
    ]
    result = {
        "gpu": torch.cuda.get_device_name(),
        "serial": reads_alone(args.layers, False),
        "overlapped": reads_alone(args.layers, True),
    }
    print(json.dumps(result), flush=True)
    if not args.skip_engine:
        prefetch = [
            (int(b), *map(float, (part or "0-1").split("-")))
            for b, _, part in (p.partition("@") for p in args.prefetch.split(",") if p)
        ]
        result["engine"] = engine_step(tries, prefetch, args.int4)
        if not args.int4:  # the reads alone are the bf16 weights'
            result["engine"]["of_overlapped_reads"] = result["overlapped"]["step_ms"] / result["engine"]["step_ms"][1]
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
