"""The batch-1 GPU engine: a static KV cache and a CUDA-graph-captured decode step (engine), the
fused Llama-family decoder it runs (fused), and that decoder's layers on other kernels: 4-bit
weights on torch's int4 kernel (int4), bf16 products on a matrix-vector kernel written in the Triton
kernel language (gemv), and the one-token step built around it (decode_step). Serving backends
(ferrylm.serve) and the Triton inference server's model (templates/triton_model.py) use it; it
imports nothing from them. Measurements: docs/performance.md.
"""
from .engine import Engine

__all__ = ["Engine"]
