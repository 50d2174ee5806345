"""`ferrylm doctor [--config C]`: can this machine run the config? One line per check, ✓ / ! / ✗,
each ✗ with its fix; exit 1 when any check fails. Queries only: no GPU work, seconds in all.

Each check is a function of facts (so the tests give it a GPU machine, a full disk or a wrong pin on
a CPU machine); `gather()` reads the facts of this machine. One module per topic: facts, install, gpu,
plan, serving.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..config import Config
from ..diskspace import disk_need_bytes
from ..pins import profile, requirements
from ..shapes import SMOLLM2_135M
from .facts import GB, Check, Facts, GiB, Gpu, gather
from .gpu import FP8_CAPABILITY, fp8_checks, fsdp_checks, gpu_checks, kernel_checks
from .install import flavour_check, pin_checks
from .room import disk_check, room_checks
from .serving import eval_checks

__all__ = [
    "FP8_CAPABILITY",
    "GB",
    "SMOLLM2_135M",
    "Check",
    "Facts",
    "GiB",
    "Gpu",
    "disk_check",
    "disk_need_bytes",
    "doctor",
    "eval_checks",
    "flavour_check",
    "fp8_checks",
    "fsdp_checks",
    "gather",
    "gpu_checks",
    "kernel_checks",
    "model_config",
    "pin_checks",
    "room_checks",
    "run_checks",
]


def model_config(cfg: Config) -> dict | None:
    """The model's config.json where it can be read without building anything."""
    from ..gguf import WHEEL_MODELS
    from ..models import EMBEDDED, converted_dir

    try:
        path = converted_dir(cfg.model.path, cfg.model.cache_dir) or Path(cfg.model.path)
    except FileNotFoundError:
        return None  # a GGUF file that is not there: the model check says so
    if not (path / "config.json").is_file() and cfg.model.path in WHEEL_MODELS:
        return WHEEL_MODELS[cfg.model.path].config  # its shapes, before the first conversion
    if not (path / "config.json").is_file() and cfg.model.path == EMBEDDED:
        return SMOLLM2_135M
    return json.loads((path / "config.json").read_text()) if (path / "config.json").is_file() else None


def run_checks(cfg: Config, f: Facts) -> list[Check]:
    from ..train.plan import ModelShape

    prof = profile()
    mc = model_config(cfg)
    shape = ModelShape.from_hf_config(mc) if mc else ModelShape()
    checks = [
        Check("python", "ok" if sys.version_info >= (3, 10) else "fail", sys.version.split()[0]),
        *pin_checks(prof, requirements(prof), requirements("gpu", core=False)),
        flavour_check(f, prof),
        *gpu_checks(f),
        *kernel_checks(cfg, bool(f.gpus)),
        *fp8_checks(cfg, f),
        *fsdp_checks(cfg, f),
    ]
    checks.append(
        Check(
            "model",
            "ok" if mc else "warn",
            f"{shape.params() / 1e9:.2f} B parameters"
            if mc
            else f"{cfg.model.path}: config.json not readable yet; Qwen2.5-7B shapes assumed below",
        )
    )
    trainable = shape.params() if cfg.train.method == "full" else shape.lora_params(cfg.train.lora_r)
    checks.append(disk_check(disk_need_bytes(cfg, shape.params(), trainable), f.free_disk_bytes, cfg.run_dir))
    return checks + room_checks(cfg, f, shape) + eval_checks(cfg, mc, f, prof)


def doctor(cfg: Config, pins_only: bool = False) -> int:
    if pins_only:
        prof = profile()
        checks = pin_checks(prof, requirements(prof), requirements("gpu", core=False))
    else:
        checks = run_checks(cfg, gather(cfg.run_dir))
    print("\n".join(c.line() for c in checks))
    failed = sum(c.status == "fail" for c in checks)
    print(f"ferrylm doctor: {failed} check(s) failed" if failed else "ferrylm doctor: ready")
    return 1 if failed else 0
