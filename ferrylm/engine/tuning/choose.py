"""Choosing each matrix-vector kernel's configuration per weight shape and epilogue, on the GPU the
engine runs on: the candidates worth timing (`candidates` for the bf16 kernel of `gemv.py`,
`tune4_candidates` for the 4-bit one of `gemv4.py`), each run checked against its reference in fp32 and
timed with the L2 flushed (`fastest`). `decode_step.gemv_weights` calls `tune` and `tune4` once per
shape when the engine is built.

A kernel timed alone is not the kernel inside the captured step, where programmatic dependent launch
overlaps it with its neighbours and the L2 holds clean weights, not the dirty lines of a flush: alone,
the 4-bit products of a 7B layer take longer than they add to the step, and rank differently
(studies/decode_kernels/NOTES.md, "The configurations chosen inside the captured step"). `fastest` therefore keeps
its runners-up (for the 4-bit products every candidate that passed its check, for bf16 ones three),
and `refine` lets the engine try each of them in its captured step (`Engine._refine`), keeping one
only where the whole step gets faster, over the keys again (up to three passes) since their kernels
overlap.
"""

from __future__ import annotations

import itertools
import time

import torch

from ..kernels.gemv import CONFIG_KEYS, ROPE, Epilogue, Launch, gemv, gemv_reference
from ..kernels.gemv4 import gemv4, gemv4_reference
from ..kernels.linear import Gemv4Linear


def _pow2(k: int) -> int:
    """The smallest power of two at least k."""
    return 1 << max(k - 1, 0).bit_length()


def candidates(
    n: int,
    k: int,
    epilogue: Epilogue = Epilogue(),
    block_ns=(1, 2),
    block_ks=(512, 1024, 2048, 4096),
    max_tile: int = 8192,
    warps=(4, 8),
):
    """The configurations worth timing for an [n, k] weight (a paired epilogue: whole pairs of row
    blocks in every program and period), at most `max_tile` weights per program and step."""
    pair = 2 if epilogue.pair else 1
    for bn, bk, nw, stages in itertools.product(block_ns, block_ks, warps, (1, 2)):
        if epilogue.pair and epilogue.period % (2 * bn):
            continue
        if n % (pair * bn) == 0 and pair * bn * bk <= max_tile and bk <= _pow2(k):
            yield dict(zip(CONFIG_KEYS, (bn, bk, nw, stages)))


def tuning_inputs(n: int, k: int, like: torch.Tensor, epilogue: Epilogue) -> tuple[torch.Tensor, dict]:
    """A random x [k] and the residual / position inputs an epilogue reads, for tuning."""
    x = torch.randn(k, device=like.device, dtype=like.dtype)
    extra = {"residual": torch.randn(n, device=like.device, dtype=like.dtype) if epilogue.residual else None}
    if epilogue.pair == ROPE:
        extra.update(
            pos=torch.tensor([100], device=like.device), inv_freq=torch.rand(epilogue.period // 2, device=like.device)
        )
    return x, extra


def fastest(
    run, want: torch.Tensor, configs, what: str, runners_up: int | None = None, within: float = float("inf")
) -> dict:
    """The configuration whose `run(**cfg)` is fastest (timed with the L2 flushed between runs, as in
    decode, where each weight is read once per token); each one's result checked against `want`. The
    next `runners_up` (all by default) within `within` times its time go with it, for `refine`."""
    from triton.runtime.errors import OutOfResources
    from triton.testing import do_bench

    timed = []
    for cfg in configs:
        try:
            got = run(**cfg)
        except OutOfResources:  # more registers or shared memory than the GPU has: not a candidate here
            continue
        if (got.float() - want).abs().max() > 1e-2 * want.abs().max():
            raise RuntimeError(f"{what} {cfg} disagrees with its reference")
        timed.append((do_bench(lambda: run(**cfg), warmup=5, rep=30), cfg))
    timed.sort(key=lambda t: t[0])
    best_ms, best = timed[0]
    # Alone, the L2 is flushed by writing it and each launch is timed with its latency, so this order
    # is not the step's (docs/performance.md): `refine` times the runners-up in the step.
    others = [{**cfg, "ms": ms} for ms, cfg in timed[1:] if ms <= best_ms * within]
    return {**best, "ms": best_ms, "runners_up": others[:runners_up]}


class Budget:
    """Seconds of tuning left to an engine's start (None: no limit): past them, a shape still to tune takes
    its first candidate untimed (`untimed`) and no runner-up is tried, so a server is ready in bounded time."""

    def __init__(self, seconds: float | None = None, clock=time.monotonic):
        self.clock = clock
        self.deadline = None if seconds is None else clock() + seconds

    def left(self) -> bool:
        return self.deadline is None or self.clock() < self.deadline


def untimed(configs) -> dict:
    """The first of a shape's candidates, marked so that it is neither saved nor taken for a tuned choice."""
    return {**next(iter(configs)), "untimed": True}


TIMINGS = ("ms", "step_ms", "runners_up", "untimed")  # what a configuration's dict holds besides the configuration


def _same(a: dict, b: dict) -> bool:
    return {k: v for k, v in a.items() if k not in TIMINGS} == {k: v for k, v in b.items() if k not in TIMINGS}


def refine(
    configs: dict,
    apply,
    time_step,
    gain: float = 0.995,
    passes: int = 3,
    log: list | None = None,
    budget: Budget | None = None,
) -> dict:
    """The configurations `configs` {key: cfg} with each key's candidates (its first choice and its
    runners-up) tried in turn in the whole captured step: `apply(key, cfg)` puts a configuration on that
    key's layers, `time_step()` times the step (ms) with whatever is applied. A candidate replaces its
    key's configuration where the step takes under `gain` of its time so far (step timings repeat to a
    few tenths of a percent); otherwise the configuration before it goes back. The kernels overlap in
    the step, so one key's best can depend on another's: the keys are passed over again, up to
    `passes` times, until a pass changes nothing. Each kept one records its "step_ms"; `log` gets every
    timing: the step as tuned, then each candidate tried (with its pass). Once `budget` is spent, what
    is kept so far is the answer."""
    configs, log = dict(configs), [] if log is None else log
    options = {key: [cfg] + cfg.get("runners_up", []) for key, cfg in configs.items()}
    best = time_step()
    log.append({"step_ms": best})
    for p in range(passes):
        changed = False
        for key in configs:
            for alt in options[key]:
                if budget is not None and not budget.left():
                    return configs
                if _same(alt, configs[key]):
                    continue
                apply(key, alt)
                ms = time_step()
                kept = ms < best * gain
                log.append({"key": str(key), "config": alt, "step_ms": ms, "kept": kept, "pass": p})
                if kept:
                    changed = True
                    best, configs[key] = ms, {**alt, "step_ms": ms, "runners_up": options[key][0].get("runners_up", [])}
                else:
                    apply(key, configs[key])
        if not changed:
            break
    return configs


def tune(w: torch.Tensor, pdl: bool = False, epilogue: Epilogue = Epilogue()) -> dict:
    """The fastest configuration for this weight's shape and epilogue."""
    n, k = w.shape
    x, extra = tuning_inputs(n, k, w, epilogue)
    # Three runners-up, as before: trying all in the step was measured for the 4-bit products only, and
    # the one bf16 product of the 4-bit step (the output layer) reads near the memory's bandwidth.
    return fastest(
        lambda **cfg: gemv(x, w, None, Launch(**cfg, pdl=pdl), epilogue, **extra),
        gemv_reference(x, w, None, epilogue, **extra),
        candidates(n, k, epilogue),
        f"gemv on {tuple(w.shape)}, {epilogue}",
        runners_up=3,
        within=1.15,
    )


def tune4(layer: Gemv4Linear, pdl: bool = False, epilogue: Epilogue = Epilogue()) -> dict:
    """The fastest configuration for this 4-bit layer's shape, group and epilogue."""
    n, k, group = layer.out_features, layer.in_features, layer.group_size
    x, extra = tuning_inputs(n, k, layer.scales, epilogue)
    g = layer.norm_weight if epilogue.norm_eps is not None else None
    args = (layer.packed, layer.scales, group, None)
    configs = list(tune4_candidates(n, k, group, epilogue))
    return fastest(
        lambda sub=1, ahead=1, **cfg: gemv4(
            x, *args, Launch(**cfg, pdl=pdl), epilogue, g, sub=sub, ahead=ahead, **extra
        ),
        gemv4_reference(x, *args, epilogue, g, **extra),
        configs,
        f"gemv4 on {n}x{k} (group {group}), {epilogue}",
    )


# (block_n, block_k, sub, num_warps[, ahead]): the fastest four of each 7B layer shape timed inside the
# captured step, out of 32 (block_n 8/16, block_k 256-2048, one or two row blocks a program, 4 or 8
# warps; H100, 2026-11-26, studies/decode_kernels/results/gemv4_in_step_h100.json): narrow row blocks, so a layer has many
# programs. Then tiles of 4,096: where K is 3,584 a program reads all its weights before it waits for
# the kernel before it (programmatic dependent launch); the step has not chosen them on an H100 since.
# Last, the words read two tiles ahead (`ahead`) for the two fastest of down and of gate/up in the step
# crossed with it (studies/decode_kernels/results/gemv4_in_step_ahead_h100.json): down's long rows run two programs a
# multiprocessor, and a second tile in flight made its step 2.9 % faster.
TUNE4 = (
    (8, 256, 1, 4),
    (8, 256, 2, 4),
    (8, 512, 1, 4),
    (8, 1024, 1, 4),
    (8, 1024, 2, 4),
    (8, 1024, 2, 8),
    (8, 2048, 1, 4),
    (8, 2048, 2, 4),
    (16, 256, 1, 4),
    (16, 512, 1, 4),
    (16, 1024, 1, 8),
    (16, 2048, 1, 4),
    (8, 4096, 1, 4),
    (8, 4096, 1, 8),
    (16, 4096, 1, 8),
    (8, 1024, 2, 8, 2),
    (8, 1024, 2, 4, 2),
    (16, 256, 1, 4, 2),
    (8, 512, 1, 4, 2),
)
MAX_PER_THREAD = 256  # weights a thread holds a tile: past it the registers spill


def tune4_candidates(n: int, k: int, group: int, epilogue: Epilogue = Epilogue(), table=TUNE4):
    """The configurations `tune4` times: those of `table` the shape allows, at most MAX_PER_THREAD weights
    a thread a tile; one stage (the kernel reads a tile ahead itself)."""
    pair = 2 if epilogue.pair else 1
    for bn, bk, sub, nw, *ahead in table:
        if (
            bk % group
            or n % (pair * bn * sub)
            or (epilogue.pair and epilogue.period % (2 * bn))
            or bk > max(_pow2(k), group)
            or pair * bn * bk * sub > MAX_PER_THREAD * 32 * nw
        ):
            continue
        # `ahead` only where it is not gemv4's default, so a configuration has one spelling
        yield {
            "block_n": bn,
            "block_k": bk,
            "num_warps": nw,
            "num_stages": 1,
            "sub": sub,
            **({"ahead": ahead[0]} if ahead and ahead[0] != 1 else {}),
        }
