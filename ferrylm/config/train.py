"""`train`: the recipe, its precision, memory and parallelism knobs, checkpoints."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from .base import _Section


class TrainConfig(_Section):
    # "lora" adapters on a frozen base; "qlora" the same on a 4-bit NF4 base (bitsandbytes, the
    # `qlora` extra); "full" every weight (writes a whole model, not an adapter).
    method: Literal["lora", "qlora", "full"] = "lora"
    lora_r: int = Field(8, gt=0)
    lora_alpha: int = Field(16, gt=0)
    lora_dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"
    learning_rate: float = Field(2e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    warmup_steps: int = Field(5, ge=0)
    max_steps: int = Field(60, gt=0)
    per_device_batch_size: int = Field(4, gt=0)
    gradient_accumulation_steps: int = Field(2, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)
    # "auto": bf16 where the GPU supports it, else fp32. "fp16" uses dynamic loss scaling (GPUs only).
    precision: Literal["auto", "bf16", "fp16", "fp32"] = "auto"
    # "auto": FlashAttention-2 when flash-attn is installed and a GPU is present, else PyTorch SDPA.
    attention: Literal["auto", "sdpa", "flash_attention_2", "eager"] = "auto"
    # Liger's Triton kernels (RMSNorm, SwiGLU, RoPE, fused linear + cross-entropy): faster and the
    # logits are never materialised. GPUs only; the `liger` extra.
    liger: bool = False
    # torch.compile: "layers" compiles each decoder layer in place (regional compilation: one
    # layer's graph, reused 28 times), "model" the whole model (the Trainer's torch_compile). Fuses the
    # element-wise work between matrix products; the first step pays the compile. With train.liger,
    # "layers" keeps only Liger's fused linear cross-entropy (outside the layers); measured in
    # docs/benchmarks.md.
    compile: Literal["none", "layers", "model"] = "none"
    gradient_checkpointing: bool = True
    # Selective checkpointing: recompute only this fraction of the decoder layers (the first ones);
    # 1.0 = all. Trades memory for speed (measured: docs/benchmarks.md, LoRA training speed).
    checkpoint_fraction: float = Field(1.0, ge=0, le=1)
    logging_steps: int = Field(5, gt=0)
    # A resumable checkpoint every N steps and at the end; 0 = none (the adapter or model is still
    # written at the end). A full fine-tune's checkpoint holds the fp32 optimizer states too
    # (Qwen2.5-7B: about 106 GB).
    save_steps: int = Field(20, ge=0)
    save_total_limit: int = Field(3, gt=0)
    # false: no adapter or model at the end either (measurement runs: `ferrylm bench`'s trials).
    save_final: bool = True
    eval_batches: int = Field(16, gt=0)
    # DeepSpeed ZeRO stage (sharded optimizer + gradients; zero3 also parameters), and what it moves
    # to CPU RAM. Launch several processes with `ferrylm launch --nproc N`.
    deepspeed: Optional[Literal["zero2", "zero3"]] = None
    offload_optimizer: bool = False
    offload_params: bool = False
    # ZeRO-3's communication sizes (elements; None: the Trainer's "auto", sized from the hidden width,
    # 7B: 12.8 M / 11.6 M / 36 k) and leaf layers: each decoder layer gathered whole on entry, one
    # collective per layer instead of one per linear, one layer prefetched while the last computes;
    # None: on for full fine-tunes. Chosen by measurement (docs/benchmarks.md, "ZeRO-3 against
    # DeepSpeed driven directly").
    zero3_reduce_bucket_size: Optional[int] = Field(500_000_000, gt=0)
    zero3_prefetch_bucket_size: Optional[int] = Field(200_000_000, gt=0)
    zero3_param_persistence_threshold: Optional[int] = Field(1_000_000, ge=0)
    zero3_leaf_layers: Optional[bool] = None
    # Where loss, eval loss, learning rate, grad norm, tokens/s, MFU and GPU memory go besides
    # log_history.jsonl: TensorBoard (in <run>/train/tensorboard) by default; wandb / mlflow when
    # their packages are installed and configured.
    report_to: list[Literal["tensorboard", "wandb", "mlflow"]] = Field(default_factory=lambda: ["tensorboard"])
    # Evaluate at every checkpoint and keep the best one (by eval loss) beside the last K.
    keep_best: bool = False
    resume: bool = True
    seed: int = 0
