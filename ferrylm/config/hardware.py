"""`hardware`: the machine a run is planned for (`ferrylm plan`)."""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from .base import _Section


class HardwareConfig(_Section):
    # What the run is planned for: `ferrylm plan` checks the config against it. Training itself
    # uses whatever the launcher gives it.
    name: str = "unspecified"
    gpus: int = Field(1, gt=0)                  # data-parallel GPUs in all (ZeRO shards over these)
    gpu_memory_gib: float = Field(80.0, gt=0)   # usable per GPU
    # A peak someone claims for this set-up (a design document's figure); the plan answers it.
    claimed_peak_gib: Optional[float] = Field(None, gt=0)
