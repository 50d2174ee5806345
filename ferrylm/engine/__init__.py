"""The batch-1 GPU engine: a static KV cache and a CUDA-graph-captured decode step (engine), the
fused Llama-family decoder it runs (fused), the one-token step built around its kernels (decode_step),
the kernels themselves (kernels/: bf16 and 4-bit matrix-vector products in the Triton kernel language,
the greedy choice, torch's int4 layers) and their configurations per GPU (tuning/). Serving backends
(ferrylm.serve) and the Triton inference server's model (templates/triton_model.py) use it; it
imports nothing from them. Measurements: docs/performance.md.
"""

from .engine import Engine
from .options import EngineOptions

__all__ = ["Engine", "EngineOptions"]
