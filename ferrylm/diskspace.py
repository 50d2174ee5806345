"""A full disk said in one line, with nothing half-written left behind.

A write that runs out of space surfaces as `OSError(ENOSPC)` from Python, as safetensors'
`SafetensorError: … No space left on device (os error 28)`, or from torch's zip writer as
`RuntimeError: [enforce fail at inline_container.cc] . unexpected pos …` (the errno is lost there,
so that one counts as a full disk only when the file system is nearly full). `out_of_space` turns
either into `DiskFull`: what was being written, where, how much room the file system has, after the
partial output is removed.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import FerryError

if TYPE_CHECKING:
    from .config import Config

_NEARLY_FULL = 64 * 2**20  # below this, torch's lost-errno write failure is the disk's
_TORCH_WRITE = ("unexpected pos", "PytorchStreamWriter failed", "No space left on device")


class DiskFull(FerryError, OSError):
    pass


def free_bytes(path: str | Path) -> int:
    where = Path(path).resolve()
    while not where.exists() and where != where.parent:
        where = where.parent
    return shutil.disk_usage(where).free


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def is_disk_full(exc: BaseException, path: str | Path) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(exc) or "Disk quota exceeded" in str(exc):
            return True  # safetensors' SafetensorError keeps only the message
        if isinstance(exc, RuntimeError) and any(s in str(exc) for s in _TORCH_WRITE):
            return free_bytes(path) < _NEARLY_FULL
        exc = exc.__cause__ or exc.__context__
    return False


@contextmanager
def out_of_space(
    what: str, path: str | Path, cleanup: Callable[[], object] | None = None, writing: Callable[[], Path] | None = None
) -> Iterator[None]:
    """Around a write of `what` under `path`: a full disk becomes one DiskFull line (exit 2), after
    `cleanup` removed the partial output; `writing` names the file or folder that was being written."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 — anything else goes on unchanged
        if isinstance(e, DiskFull) or not is_disk_full(e, path):
            raise
        target = writing() if writing is not None else path
        if cleanup is not None:
            cleanup()
        raise DiskFull(
            f"out of disk space writing {what} to {target}: {_human(free_bytes(path))} free there after "
            f"removing the partial output; free space, or point run_dir at a larger disk"
        ) from None


def enough_room(need: int, path: str | Path) -> str | None:
    """A warning line when `path`'s file system has less than `need` bytes free, else None."""
    free = free_bytes(path)
    if free >= need:
        return None
    return f"{_human(free)} free under {path}, and this run writes about {_human(need)}"


def disk_need_bytes(cfg: Config, params: int, trainable: int) -> int:
    """Checkpoints the run keeps, its final weights and its export artifacts."""
    t, e = cfg.train, cfg.export
    full = t.method == "full"
    # A full fine-tune's checkpoint: bf16 weights + fp32 master copy, Adam m and v (2 + 12 bytes).
    ckpt = params * 14 if full else trainable * 12
    kept = (t.save_total_limit + (1 if t.keep_best else 0)) if t.save_steps else 0
    need = kept * ckpt + (params * 2 if full else trainable * 4) + params * 2  # final weights, merged export
    need += params * 4 if e.onnx else 0
    need += sum({"w4a16": params * 0.6, "fp8": params * 1.1}[q] for q in e.vllm_quantize)
    return int(need)
