"""Choosing each matrix-vector kernel's configuration per weight shape and epilogue, on the GPU the
engine runs on: the candidates worth timing (`candidates` for the bf16 kernel of `gemv.py`,
`tune4_candidates` for the 4-bit one of `gemv4.py`), each run checked against its reference in fp32 and
timed with the L2 flushed (`fastest`). `decode_step.gemv_weights` calls `tune` and `tune4` once per
shape when the engine is built.

A kernel timed alone is not the kernel inside the captured step, where programmatic dependent launch
overlaps it with its neighbours and the L2 holds what they left: two configurations within a few
percent alone can differ by more in the step, and which one wins alone changes from run to run.
`fastest` therefore keeps its runners-up, and `refine` lets the engine try each of them in its
captured step (`Engine._refine`), keeping one only where the whole step gets faster.
"""
from __future__ import annotations

import itertools

import torch

from .gemv import CONFIG_KEYS, ROPE, Epilogue, gemv, gemv_reference
from .gemv4 import Gemv4Linear, gemv4, gemv4_reference


def _pow2(k: int) -> int:
    """The smallest power of two at least k."""
    return 1 << max(k - 1, 0).bit_length()


def candidates(n: int, k: int, epilogue: Epilogue = Epilogue(), block_ns=(1, 2), block_ks=(512, 1024, 2048, 4096),
               max_tile: int = 8192, warps=(4, 8)):
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
        extra.update(pos=torch.tensor([100], device=like.device),
                     inv_freq=torch.rand(epilogue.period // 2, device=like.device))
    return x, extra


def fastest(run, want: torch.Tensor, configs, what: str) -> dict:
    """The configuration whose `run(**cfg)` is fastest (timed with the L2 flushed between runs, as in
    decode, where each weight is read once per token); each one's result checked against `want`."""
    from triton.runtime.errors import OutOfResources
    from triton.testing import do_bench

    timed = []
    for cfg in configs:
        try:
            got = run(**cfg)
        except OutOfResources:   # more registers or shared memory than the GPU has: not a candidate here
            continue
        if (got.float() - want).abs().max() > 1e-2 * want.abs().max():
            raise RuntimeError(f"{what} {cfg} disagrees with its reference")
        timed.append((do_bench(lambda: run(**cfg), warmup=5, rep=30), cfg))
    timed.sort(key=lambda t: t[0])
    best_ms, best = timed[0]
    # Runners-up for `refine`: within RUNNER_UP of the best alone, where the step may order them otherwise.
    runners_up = [{**cfg, "ms": ms} for ms, cfg in timed[1:RUNNERS_UP + 1] if ms <= best_ms * RUNNER_UP]
    return {**best, "ms": best_ms, "runners_up": runners_up}


RUNNERS_UP, RUNNER_UP = 3, 1.15


def refine(configs: dict, apply, time_step, gain: float = 0.995, log: list | None = None) -> dict:
    """The configurations `configs` {key: cfg} with each key's runners-up tried in turn in the whole
    captured step: `apply(key, cfg)` puts a configuration on that key's layers, `time_step()` times the
    step (ms) with whatever is applied. A runner-up replaces its key's configuration where the step
    takes under `gain` of its time so far (step timings repeat to a few tenths of a percent);
    otherwise the configuration before it goes back. Each kept one records its "step_ms"; `log` gets
    every timing: the step as tuned, then each runner-up tried."""
    configs, log = dict(configs), [] if log is None else log
    best = time_step()
    log.append({"step_ms": best})
    for key, cfg in list(configs.items()):
        for alt in cfg.get("runners_up", []):
            apply(key, alt)
            ms = time_step()
            kept = ms < best * gain
            log.append({"key": str(key), "config": alt, "step_ms": ms, "kept": kept})
            if kept:
                best, configs[key] = ms, {**alt, "step_ms": ms, "runners_up": cfg["runners_up"]}
            else:
                apply(key, configs[key])
    return configs


def tune(w: torch.Tensor, pdl: bool = False, epilogue: Epilogue = Epilogue()) -> dict:
    """The fastest configuration for this weight's shape and epilogue."""
    n, k = w.shape
    x, extra = tuning_inputs(n, k, w, epilogue)
    return fastest(lambda **cfg: gemv(x, w, None, pdl=pdl, epilogue=epilogue, **extra, **cfg),
                   gemv_reference(x, w, None, epilogue, **extra), candidates(n, k, epilogue),
                   f"gemv on {tuple(w.shape)}, {epilogue}")


def tune4(layer: Gemv4Linear, pdl: bool = False, epilogue: Epilogue = Epilogue()) -> dict:
    """The fastest configuration for this 4-bit layer's shape, group and epilogue."""
    n, k, group = layer.out_features, layer.in_features, layer.group_size
    x, extra = tuning_inputs(n, k, layer.scales, epilogue)
    g = layer.norm_weight if epilogue.norm_eps is not None else None
    args = (layer.packed, layer.scales, group, None)
    configs = list(tune4_candidates(n, k, group, epilogue))
    return fastest(lambda **cfg: gemv4(x, *args, pdl=pdl, epilogue=epilogue, norm_weight=g, **extra, **cfg),
                   gemv4_reference(x, *args, epilogue, g, **extra), configs,
                   f"gemv4 on {n}x{k} (group {group}), {epilogue}")


# (block_n, block_k, sub): the fastest few of every 7B layer shape in a sweep of 94 configurations (block_n
# 8-64, block_k 128-2048, one or two row blocks a program, 4 or 8 warps, 1 or 2 stages; H200, 2026-11-26,
# bench/results/gemv4_input_major_h200_6_sweep.json): narrow row blocks, so a layer has many programs,
# and long tiles where K is long.
TUNE4 = ((8, 512, 1), (8, 512, 2), (8, 1024, 1), (8, 1024, 2), (16, 256, 2), (16, 512, 1), (16, 1024, 2), (32, 1024, 1))


def tune4_candidates(n: int, k: int, group: int, epilogue: Epilogue = Epilogue()):
    """The configurations `tune4` times (TUNE4 where the shape allows): 4 warps, 8 once a program's tile
    is over 16,384 weights; one stage (the kernel reads a tile ahead itself)."""
    pair = 2 if epilogue.pair else 1
    for bn, bk, sub in TUNE4:
        weights = pair * bn * bk
        if (bk % group or n % (pair * bn * sub) or (epilogue.pair and epilogue.period % (2 * bn))
                or bk > max(_pow2(k), group)):
            continue
        yield {"block_n": bn, "block_k": bk, "num_warps": 8 if weights > 16384 else 4, "num_stages": 1, "sub": sub}
