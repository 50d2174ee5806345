"""`export`: the artifacts and the parity each must hold."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import _Section


class ExportConfig(_Section):
    parity_new_tokens: int = Field(16, gt=0)
    """Greedy tokens generated per parity prompt, compared with base + adapter."""
    parity_prompts: int = Field(4, gt=0)
    """Held-out prompts in the parity check."""
    max_logit_diff: float = Field(1e-3, gt=0)
    """The merged model fails its gate when any logit differs from base + adapter by more than this."""
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """Dtype of the merged weights; "auto" keeps the base model's."""
    onnx: bool = False
    """ONNX with KV cache (fp32), and CPU-quantized variants of it. Each carries its own parity."""
    quantize: list[Literal["int8", "int8-naive", "int4"]] = Field(default_factory=list)
    """CPU-quantized ONNX variants: int8 (per-channel, output layer fp32), int8-naive (per-tensor), int4 (weight-only, block 32)."""
    onnx_max_logit_diff: float = Field(1e-2, gt=0)
    """The fp32 ONNX artifact fails its gate above this logit difference."""
    quantized_min_agreement: float = Field(0.7, ge=0, le=1)
    """A quantized artifact fails the export when, reading the reference's own greedy continuation, its top
    token is the reference's on fewer than this fraction of the steps (forced agreement; the free-running
    agreement and KL are reported beside it)."""
    vllm_quantize: list[Literal["w4a16", "fp8"]] = Field(default_factory=list)
    """GPU-serving artifacts in the compressed-tensors format vLLM loads (<run>/export/vllm-<scheme>/): w4a16
    (4-bit weights, bf16 activations) and fp8 (e4m3 weights, per-token dynamic activations)."""
    w4a16_group_size: Literal[32, 64, 128] = 32
    """Inputs per W4A16 scale; must divide every quantized layer's input width. 32 lost least where measured (the
    demo-gpu recipe's fine-tuned Qwen2.5-Coder-1.5B 83 against its merged 84 of 124; 128 and 64 lost 7 and 10; the
    team recipe's, with full-range clipping, 411 against 409 of 909 tasks): ask the artifact too (eval.artifacts).
    11 % of the 7B's decode."""
    w4a16_method: Literal["gptq", "rtn"] = "gptq"
    """How W4A16 rounds: "gptq" calibrates each layer on rows of the run's training data (act-order, static
    groups, each group's scale by w4a16_clipping), "rtn" rounds each weight to nearest (no data; measured worse)."""
    w4a16_clipping: Literal["search", "full"] = "full"
    """W4A16 with gptq: each group's scale from its largest weight ("full", as rounding does), or from the clipping
    ratio (1.0 down to 0.75 of it) whose input-weighted error is least ("search"). On the team recipe's model "full"
    kept HumanEval, HumanEval-X and own code pooled (411 against the merged model's 409 of 909 tasks), "search" lost
    27 (p = 0.0036) with the same rows; KL a token did not tell them apart (0.014, 0.013)."""
    calibration_rows: int = Field(128, gt=0)
    """W4A16 with gptq: training rows (a seeded draw, each cut to 512 tokens) the layers are calibrated on."""
    calibration_seed: int = 0
    """W4A16 with gptq: the seed of that draw (two seeds show how many tasks the calibration alone flips)."""
    triton_dir: str = "triton_models"
    """Where Triton model repositories are written (relative paths from the working directory)."""
    triton_name: str = Field("ferrylm", pattern=r"^[A-Za-z0-9_\-]+$")
    """Name of the Triton model; the ONNX and W4A16 ones get "-onnx" and "-w4a16" appended."""
    triton_engine: Literal["auto", "fused", "transformers"] = "auto"
    """What streams inside the Triton model: "fused" (ferrylm's batch-1 engine: static KV cache, on a GPU bf16
    in CUDA graphs), "transformers" (generate(), any architecture), "auto" (fused where it supports the
    architecture). With vllm_quantize w4a16 and the fused engine, also "<name>-w4a16"."""
    triton_max_len: int = Field(2048, gt=0)
    """Prompt + new tokens the Triton models accept (their engine's static cache is this long)."""
