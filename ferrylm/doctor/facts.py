"""What the checks are made of: a check's line, and the facts of a machine (`gather()` reads this one's)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

GB = 1e9
GiB = 2**30


@dataclass
class Check:
    name: str
    status: str  # "ok" | "warn" | "fail"
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = {"ok": "✓", "warn": "!", "fail": "✗"}[self.status]
        return f"{mark} {self.name}: {self.detail}" + (f" — {self.fix}" if self.fix else "")


@dataclass
class Gpu:
    name: str
    memory_gib: float
    capability: tuple[int, int]


@dataclass
class Facts:
    gpus_listed: int = 0  # by nvidia-smi -L: the machine's, whatever torch is
    torch_version: str | None = None
    torch_cuda: str | None = None  # torch.version.cuda: None for a CPU build
    driver: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    nccl: str | None = None
    peer_access: bool | None = None
    free_disk_bytes: int = 0
    ram_available_gib: float = 0.0


def gather(run_dir: str) -> Facts:
    f = Facts()
    if shutil.which("nvidia-smi"):
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        f.gpus_listed = sum(line.startswith("GPU ") for line in listed.stdout.splitlines())
        drv = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        f.driver = drv.stdout.split("\n")[0].strip() or None
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        f.torch_version, f.torch_cuda = torch.__version__, torch.version.cuda
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                f.gpus.append(Gpu(p.name, p.total_memory / GiB, (p.major, p.minor)))
            f.nccl = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else None
            if len(f.gpus) > 1:
                f.peer_access = all(torch.cuda.can_device_access_peer(0, j) for j in range(1, len(f.gpus)))
    where = Path(run_dir).resolve()
    while not where.exists():
        where = where.parent
    f.free_disk_bytes = shutil.disk_usage(where).free
    with open("/proc/meminfo") as fh:
        mem = dict(line.split(":", 1) for line in fh)
    f.ram_available_gib = int(mem["MemAvailable"].split()[0]) * 1024 / GiB
    return f
