"""`export`: the artifacts and the parity each must hold."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import _Section


class ExportConfig(_Section):
    parity_new_tokens: int = Field(16, gt=0)
    parity_prompts: int = Field(4, gt=0)
    max_logit_diff: float = Field(1e-3, gt=0)
    # Dtype of the merged weights; "auto" keeps the base model's.
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    # ONNX with KV cache (fp32), and CPU-quantized variants of it. Each carries its own parity.
    onnx: bool = False
    quantize: list[Literal["int8", "int8-naive", "int4"]] = Field(default_factory=list)
    onnx_max_logit_diff: float = Field(1e-2, gt=0)
    # A quantized artifact whose greedy tokens agree with base+adapter less than this fails the export.
    quantized_min_agreement: float = Field(0.5, ge=0, le=1)
    # GPU-serving artifacts in the compressed-tensors format vLLM loads (<run>/export/vllm-<scheme>/):
    # w4a16 (4-bit weights, bf16 activations) and fp8 (e4m3 weights, per-token dynamic activations).
    vllm_quantize: list[Literal["w4a16", "fp8"]] = Field(default_factory=list)
    # Inputs per W4A16 scale; must divide every quantized layer's input width (7B Qwen: 128; SmolLM2: 64).
    w4a16_group_size: Literal[32, 64, 128] = 128
    triton_dir: str = "triton_models"
    triton_name: str = Field("ferrylm", pattern=r"^[A-Za-z0-9_\-]+$")
    # What streams inside the Triton model: "fused" (ferrylm's batch-1 engine: static KV cache, on a
    # GPU bf16 in CUDA graphs), "transformers" (generate(), any architecture), "auto" (fused where it
    # supports the architecture). With vllm_quantize w4a16 and the fused engine, also "<name>-w4a16".
    triton_engine: Literal["auto", "fused", "transformers"] = "auto"
    # Prompt + new tokens the Triton models accept (their engine's static cache is this long).
    triton_max_len: int = Field(2048, gt=0)
