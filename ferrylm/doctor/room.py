"""Room for the run: the disk it writes, the memory plan on these GPUs, host RAM for offload."""

from __future__ import annotations

from ..config import Config
from .facts import GB, Check, Facts


def disk_check(need: int, free: int, where: str) -> Check:
    detail = f"{free / GB:.0f} GB free under {where}; the run writes about {need / GB:.1f} GB"
    if free < need:
        return Check("disk", "fail", detail, "free space, point run_dir elsewhere, or lower train.save_total_limit")
    return Check("disk", "ok", detail)


def room_checks(cfg: Config, f: Facts, shape) -> list[Check]:
    from dataclasses import replace

    from ..train.plan import estimate, setup_from_config

    setup = setup_from_config(cfg, shape)
    out = []
    if f.gpus:
        gpus = len(f.gpus) if (cfg.train.deepspeed or cfg.train.fsdp) else 1
        setup = replace(setup, gpus=gpus, gpu_memory_gib=min(g.memory_gib for g in f.gpus))
        plan = estimate(setup)
        out.append(
            Check(
                "memory plan",
                "ok" if plan.fits else "fail",
                f"{plan.total_gib:.1f} GiB per GPU of {setup.gpu_memory_gib:.1f} on {gpus} GPU(s)",
                "" if plan.fits else f"change {plan.advice}",
            )
        )
    else:
        plan = estimate(setup)
        out.append(
            Check(
                "memory plan",
                "ok",
                f"no GPU here; on the config's hardware ({cfg.hardware.name}): "
                f"{plan.total_gib:.1f} GiB per GPU of {cfg.hardware.gpu_memory_gib:g}",
            )
        )
    if plan.cpu_offload_gib:
        ok = plan.cpu_offload_gib <= f.ram_available_gib
        out.append(
            Check(
                "host RAM",
                "ok" if ok else "fail",
                f"offload needs {plan.cpu_offload_gib:.1f} GiB, {f.ram_available_gib:.1f} GiB available",
                "" if ok else "more RAM, or more GPUs to shard over",
            )
        )
    else:
        out.append(Check("host RAM", "ok", f"{f.ram_available_gib:.1f} GiB available; no offload"))
    return out
