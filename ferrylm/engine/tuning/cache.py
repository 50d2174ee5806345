"""The kernel engine's chosen configurations kept on disk, so that the next engine on the same GPU, with
the same kernels and libraries (a server restarted, the next eval), starts without tuning again.

Tuning times every candidate alone and then its runners-up inside the captured step (`tuning.refine`):
most of the 4-bit engine's start-up on a 7B model (docs/performance.md). What it chose is a function of
the weight shapes, the epilogues, the kernels' code, the GPU and the compiler, so the file is named by a
digest of all but the shapes (`tuned_path`) and holds one entry a shape (`load`, `save`); a shape not
found there is tuned and added. A file that cannot be read is ignored with a warning and written again:
at worst the engine tunes as if it had none.

Beside this machine's own file, ferrylm ships what the tuning chose on the GPUs it was measured on
(`defaults/<gpu>.json`, `shipped`): a GPU of that name starts with them and tunes only the shapes they lack.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import torch

from ferrylm.log import get_logger
from ferrylm.manifest import write_json_atomic
from ferrylm.models import cache_root

from ..kernels.gemv import Epilogue

log = get_logger(__name__)
KERNELS = (
    "kernels/gemv.py",
    "kernels/gemv4.py",
    "kernels/gemv4_kernel.py",
    "decode_step.py",
    "tuning/choose.py",
)  # what a choice depends on, under engine/


def tuned_path(pdl: bool, root: str | Path | None = None, sources: Path = Path(__file__).parents[1]) -> Path:
    """This GPU's, kernels' (their files in `sources`) and libraries' file under `root` (default:
    ferrylm's cache, engine/)."""
    import triton

    digest = hashlib.sha256()
    for part in (
        torch.cuda.get_device_name(),
        str(torch.cuda.get_device_capability()),
        torch.__version__,
        triton.__version__,
        str(pdl),
    ):
        digest.update(part.encode() + b"\0")
    for name in KERNELS:
        digest.update((sources / name).read_bytes())
    return (Path(root) if root else cache_root() / "engine") / f"configs-{digest.hexdigest()[:16]}.json"


def _encode(key: tuple) -> list:
    return [{"epilogue": list(part)} if isinstance(part, Epilogue) else part for part in key]


def _decode(key: list) -> tuple:
    return tuple(Epilogue(*part["epilogue"]) if isinstance(part, dict) else part for part in key)


DEFAULTS = Path(__file__).parent / "defaults"


def gpu_slug(name: str) -> str:
    """A GPU's name as a file name: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def shipped(name: str | None = None, root: Path = DEFAULTS) -> dict:
    """{key: configuration} shipped for the GPU called `name` (default: this one); empty for another GPU."""
    name = torch.cuda.get_device_name() if name is None else name
    return load(root / f"{gpu_slug(name)}.json")


def load(path: Path) -> dict:
    """{key: configuration} saved at `path`; empty where there is none or it cannot be read."""
    if not path.exists():
        return {}
    try:
        return {_decode(entry["key"]): entry["config"] for entry in json.loads(path.read_text())}
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning(
            "engine: ignoring the saved kernel configurations %s (%s: %s); tuning again", path, type(e).__name__, e
        )
        return {}


def save(path: Path, configs: dict) -> bool:
    """Add `configs` {key: configuration} to the file at `path` (those already there for other shapes
    stay), without their runners-up (a saved choice is not refined again), written atomically.
    Where it cannot be written (read-only, full), a warning: the engine tuned runs as well without
    it, and the next one tunes again. Whether it was saved."""
    ours = {
        key: {k: v for k, v in cfg.items() if k != "runners_up"}
        for key, cfg in configs.items()
        if not cfg.get("untimed")
    }  # a shape left untuned by a spent budget is tuned by the next engine
    try:
        write_json_atomic(path, [{"key": _encode(key), "config": cfg} for key, cfg in {**load(path), **ours}.items()])
        return True
    except OSError as e:
        log.warning("engine: could not save the kernel configurations to %s (%s); the next engine tunes again", path, e)
        return False
