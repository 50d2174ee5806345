"""`hardware`: the machine a run is planned for (`ferrylm plan`)."""

from __future__ import annotations

from pydantic import Field

from .base import _Section


class HardwareConfig(_Section):
    name: str = "unspecified"
    """The set-up's name in `ferrylm plan`'s output. The section says what the run is planned for; training
    itself uses whatever the launcher gives it."""
    gpus: int = Field(1, gt=0)
    """Data-parallel GPUs in all (ZeRO shards over these)."""
    gpu_memory_gib: float = Field(80.0, gt=0)
    """Usable memory per GPU."""
    claimed_peak_gib: float | None = Field(None, gt=0)
    """A peak someone claims for this set-up (a design document's figure); the plan answers it."""
