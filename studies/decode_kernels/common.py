"""What the scripts of this study share (they import it as `common`: each runs from this folder): the 7B products'
4-bit inputs and one launch of each (gemv4_vs_int4mm.py, gemv4_in_step.py), a captured step split among its
kernels (gemv4_in_step.py, gemv_step_floor.py), and weight reads timed back to back (gemv4_read_floor.py,
gemv_step_floor.py). GPU only; importing it needs only torch and triton."""

from __future__ import annotations

from collections import defaultdict

import torch
import triton
import triton.language as tl

SHAPES = ("wqkv", "wo", "w13", "w2")
STEP_PRODUCTS = ("q/k/v", "o", "gate/up", "down")  # a layer's products in launch order, as split_step names them


def products() -> dict:
    """Each 7B product's (rows, inputs, decode-step epilogue), by name."""
    from ferrylm.shapes import PRODUCTS, epilogues

    return {name: (*PRODUCTS[name], epilogues()[name]) for name in SHAPES}


def shape(name: str, group: int) -> dict:
    """One 7B product's weights, inputs and epilogue (seeded: every process builds the same)."""
    from ferrylm.engine.kernels.gemv import ROPE
    from ferrylm.engine.kernels.gemv4 import pack_int4
    from ferrylm.engine.kernels.int4 import round_to_nearest_int4

    n, k, e = products()[name]
    torch.manual_seed(SHAPES.index(name))
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
    q, s = round_to_nearest_int4(w, group)
    packed, st = pack_int4(q, s)
    extra = {"residual": torch.randn(n, device="cuda", dtype=torch.bfloat16)} if e.residual else {}
    if e.pair == ROPE:
        extra.update(pos=torch.tensor([100], device="cuda"), inv_freq=torch.rand(64, device="cuda"))
    return dict(
        n=n,
        k=k,
        e=e,
        q=q,
        s=s,
        packed=packed,
        scales=st,
        extra=extra,
        x=torch.randn(k, device="cuda", dtype=torch.bfloat16),
        g=torch.rand(k, device="cuda", dtype=torch.bfloat16) + 0.5 if e.norm_eps is not None else None,
    )


def run(sh: dict, group: int, cfg: dict) -> torch.Tensor:
    from ferrylm.engine.kernels.gemv import CONFIG_KEYS, Launch
    from ferrylm.engine.kernels.gemv4 import gemv4

    launch = Launch(**{k: cfg[k] for k in CONFIG_KEYS}, pdl=cfg.get("pdl", False))
    rest = {k: v for k, v in cfg.items() if k not in (*CONFIG_KEYS, "pdl")}  # sub, ahead
    return gemv4(sh["x"], sh["packed"], sh["scales"], group, None, launch, sh["e"], sh["g"], **sh["extra"], **rest)


def configs(sh: dict, group: int, vary: list[str]) -> list[dict]:
    """The tuner's candidates for this shape, crossed with each `key=v1,v2` of `vary`."""
    from ferrylm.engine.tuning.choose import tune4_candidates

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
    except Exception as exc:  # reported, then skipped in the timed pass
        return f"{type(exc).__name__}: {str(exc)[:200]}"


_cache: dict = {}


def split_events(events, kind_of, steps: int) -> dict:
    """ms per step of each kind (`kind_of(name)`, called in launch order) of the CUDA kernels among
    profiler events: each kernel's end minus the previous end (kernels overlap under PDL), the gaps
    between them as "idle"."""
    kernels = sorted(
        (e for e in events if e.device_type == torch.autograd.DeviceType.CUDA), key=lambda e: e.time_range.start
    )
    per_kind, last_end = defaultdict(float), None
    for e in kernels:
        kind = kind_of(e.name)
        start, end = e.time_range.start, e.time_range.end
        if last_end is not None:
            per_kind[kind] += max(end - max(start, last_end), 0) / 1e3
            per_kind["idle"] += max(start - last_end, 0) / 1e3
        last_end = max(end, last_end or end)
    return {k: v / steps for k, v in per_kind.items()}  # ms per one-token step


def split_step(engine, steps: int = 32) -> dict:
    """ms per step of each kernel kind: end-to-end increments, in launch order (the bf16 engine's
    products too: the step's product kernels counted from its first kernel, the embedding)."""
    prompt = list(range(1000, 1128))
    engine.generate_timed(prompt, steps)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        engine.generate_timed(prompt, steps)
    products = 4 * len(engine.decoder.layers)
    state = {"product": 0}

    def kind_of(name: str) -> str:
        if name.startswith(("_gemv4_kernel", "_gemv_kernel")):
            i = state["product"]
            state["product"] += 1
            return STEP_PRODUCTS[i % 4] if i < products else "output layer"
        if name.startswith(("_attend_chunk", "_combine_chunks")):
            return name.split("(")[0].strip()
        state["product"] = 0
        return "other (the prompt's kernels, the embedding, the argmax)"

    return split_events(prof.events(), kind_of, steps - 1)


@triton.jit
def _stream(w_ptr, y_ptr, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    """The plainest read: each program xors BLOCK contiguous words (the calibration of `stream`); with
    PDL it lets the next kernel launch before reading (gemv_step_floor.py)."""
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + tl.program_id(0), tl.xor_sum(tl.load(at + w_ptr), axis=0))


def back_to_back(run, copies: int, nbytes: int, rounds: int = 20) -> dict:
    """run(i) launched on copy i of the words, copy after copy, captured in a CUDA graph as the decode
    step is: no flush (whose dirty lines do_bench's reads would write back), no Python between the
    launches, and each launch's data not in the L2 (the copies together are several times its size)."""
    for i in range(copies):  # compiled before the capture
        run(i)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(copies):
            run(i)
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(rounds):
        graph.replay()
    end.record()
    end.synchronize()
    us = start.elapsed_time(end) * 1e3 / (rounds * copies)
    return {"us": us, "tb_s": nbytes / us / 1e6}
