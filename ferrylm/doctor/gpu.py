"""The GPUs: CUDA, each card's precision support, NCCL, the kernels a config needs, FP8."""

from __future__ import annotations

import importlib.util

from ..config import Config
from .facts import Check, Facts

FP8_CAPABILITY = (8, 9)  # Ada, Hopper and later: FP8 matrix products (train/fp8.py refuses the others too)


def gpu_checks(f: Facts) -> list[Check]:
    if not f.gpus:
        return [
            Check(
                "GPUs",
                "ok" if not f.gpus_listed else "fail",
                "none: the CPU path (fp32 training, vLLM's CPU build)"
                if not f.gpus_listed
                else f"nvidia-smi lists {f.gpus_listed}, torch sees none",
                "" if not f.gpus_listed else "check CUDA_VISIBLE_DEVICES and the torch build",
            )
        ]
    out = [Check("CUDA", "ok", f"driver {f.driver or 'unknown'}, torch's runtime {f.torch_cuda}")]
    for i, g in enumerate(f.gpus):
        bf16, fp8 = g.capability >= (8, 0), g.capability >= FP8_CAPABILITY
        out.append(
            Check(
                f"GPU {i}",
                "ok",
                f"{g.name}, {g.memory_gib:.1f} GiB, compute {g.capability[0]}.{g.capability[1]}, "
                f"bf16 {'yes' if bf16 else 'no (fp16)'}, FP8 {'yes' if fp8 else 'no'}",
            )
        )
    if len(f.gpus) > 1:
        out.append(
            Check(
                "NCCL",
                "ok" if f.nccl else "fail",
                f"{f.nccl or 'missing'}; peer access between GPUs: "
                f"{'yes' if f.peer_access else 'no (collectives go through host memory)'}",
            )
        )
    return out


def kernel_checks(cfg: Config, has_gpu: bool, installed=importlib.util.find_spec) -> list[Check]:
    t = cfg.train
    out = []
    for module, label, needed in (
        ("flash_attn", "flash-attn", t.attention == "flash_attention_2"),
        ("liger_kernel", "liger-kernel", t.liger),
        ("bitsandbytes", "bitsandbytes", t.method == "qlora"),
    ):
        there = installed(module) is not None
        if needed and not there:
            out.append(Check(label, "fail", "needed by this config, not installed", f"pip install {label}"))
        elif needed and not has_gpu and module != "bitsandbytes":
            out.append(
                Check(label, "fail", "needed by this config, but it runs on GPUs only", "turn it off on this machine")
            )
        else:
            out.append(
                Check(
                    label,
                    "ok" if there or not has_gpu else "warn",
                    "installed" if there else "not installed (optional)",
                )
            )
    from ..preflight import EXPORT_PACKAGES

    for key, (module, pip_name) in EXPORT_PACKAGES.items():
        if getattr(cfg.export, key) and installed(module) is None:
            out.append(
                Check(
                    pip_name.split("==")[0], "fail", f"needed by export.{key}, not installed", f"pip install {pip_name}"
                )
            )
    return out


def fp8_checks(cfg: Config, f: Facts) -> list[Check]:
    if cfg.train.base_precision != "fp8":
        return []
    without = sorted({g.name for g in f.gpus if g.capability < FP8_CAPABILITY})
    if without:
        return [
            Check(
                "FP8 base",
                "fail",
                f"train.base_precision=fp8, but {', '.join(without)} has no FP8 products "
                "(compute capability 8.9 or newer)",
                "train.base_precision=model",
            )
        ]
    return [
        Check(
            "FP8 base",
            "ok" if f.gpus else "warn",
            "FP8 products on every GPU" if f.gpus else "no GPU: torch emulates FP8 on the CPU, slower than fp32",
        )
    ]


def fsdp_checks(cfg: Config, f: Facts) -> list[Check]:
    """train.fsdp: PyTorch's fully_shard and Accelerate's FSDP2 plugin, present or named."""
    if not cfg.train.fsdp:
        return []
    import importlib.util

    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401 — torch 2.6 and newer
    except ImportError:
        return [Check("FSDP2", "fail", "train.fsdp, but this torch has no fully_shard (2.6 or newer)", "make install")]
    if importlib.util.find_spec("accelerate") is None:
        return [Check("FSDP2", "fail", "train.fsdp needs accelerate (the Trainer's FSDP2 plugin)", "make install")]
    gpus = len(f.gpus)
    where = (
        f"over {gpus} GPU(s): launch as many processes (ferrylm launch --nproc {gpus})" if gpus else "on the CPU (gloo)"
    )
    return [Check("FSDP2", "ok" if gpus else "warn", f"fully_shard present; {cfg.train.fsdp} {where}")]
