"""`train`: the recipe, its precision, memory and parallelism knobs, checkpoints."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import _Section

# train.fused_head: answer tokens whose full-vocabulary logits exist at once (0.6 GB fp32 at 152k words)
HEAD_CHUNK = 1024


class TrainConfig(_Section):
    method: Literal["lora", "qlora", "full"] = "lora"
    """"lora" adapters on a frozen base; "qlora" the same on a 4-bit NF4 base (bitsandbytes, the `qlora`
    extra); "full" every weight (writes a whole model, not an adapter)."""
    lora_r: int = Field(8, gt=0)
    """LoRA rank (lora, qlora)."""
    lora_alpha: int = Field(16, gt=0)
    """LoRA scale numerator: the adapter's update is scaled by lora_alpha / lora_r."""
    lora_dropout: float = Field(0.05, ge=0, lt=1)
    """Dropout on the adapter's input."""
    target_modules: list[str] | Literal["all-linear"] = "all-linear"
    """Which linear layers get adapters: "all-linear" or a list of module names (e.g. [q_proj, v_proj])."""
    learning_rate: float = Field(2e-4, gt=0)
    """Peak learning rate (cosine schedule after warm-up)."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay."""
    warmup_steps: int = Field(5, ge=0)
    """Optimizer steps of linear warm-up."""
    max_steps: int = Field(60, gt=0)
    """Optimizer steps to train in all (unless epochs is set)."""
    epochs: float | None = Field(None, gt=0)
    """Passes over the training rows, instead of max_steps: the run takes ceil(epochs × rows / global batch) steps,
    so a corpus of another size sees its rows as often (the train record's `epochs` says how often a run did)."""
    per_device_batch_size: int = Field(4, gt=0)
    """Examples (or packed rows) per micro-batch per GPU."""
    flatten_batches: bool | None = None
    """A micro-batch's examples laid end to end in one row, their position ids restarting at each example
    (the model keeps them apart as it does packed rows): the same loss and gradients as padded rows,
    without computing on the padding. None: on without a GPU (measured on CPUs: docs/performance.md); on
    GPUs padded rows keep the attention kernels' causal fast path."""
    gradient_accumulation_steps: int = Field(2, gt=0)
    """Micro-batches per optimizer step; the global batch is this × per_device_batch_size × GPUs."""
    max_grad_norm: float = Field(1.0, gt=0)
    """Gradients are clipped to this global norm."""
    precision: Literal["auto", "bf16", "fp16", "fp32"] = "auto"
    """"auto": bf16 where the GPU supports it, else fp32. "fp16" uses dynamic loss scaling (GPUs only)."""
    attention: Literal["auto", "sdpa", "flash_attention_2", "eager"] = "auto"
    """"auto": FlashAttention-2 when flash-attn is installed and a GPU is present, else PyTorch SDPA."""
    sdpa_cudnn: bool = False
    """PyTorch SDPA's cuDNN kernels in training steps. Off: their backward (torch 2.11 and later, H100/H200) returns
    NaN gradients for a padded batch whose width is 64 mod 128 when an attention row's log-sum-exp is below
    -88.7, which Qwen2.5's massive-activation heads give (docs/train.md, "Non-finite steps"); the
    memory-efficient kernel runs those batches instead. Held-out loss and generation are not affected."""
    liger: bool = False
    """Liger's Triton kernels (RMSNorm, SwiGLU, RoPE, fused linear + cross-entropy): faster and the logits are
    never materialised. With train.drift_penalty only RMSNorm, SwiGLU and RoPE (the penalty needs both models'
    logits, which Liger's fused loss never gives; train.fused_head makes them a chunk at a time). GPUs only; the `liger` extra."""
    compile: Literal["none", "layers", "model"] = "none"
    """torch.compile: "layers" compiles each decoder layer in place (regional compilation: one layer's graph,
    reused 28 times), "model" the whole model (the Trainer's torch_compile). Fuses the element-wise work
    between matrix products; the first step pays the compile. With train.liger, "layers" keeps only Liger's
    fused linear cross-entropy (outside the layers); measured in docs/performance.md."""
    base_precision: Literal["model", "fp8"] = "model"
    """The frozen base's linear weights under LoRA: "model" in the training precision; "fp8" in float8 (e4m3,
    one scale per output channel) with FP8 products (torch._scaled_mm) for the forward and the input
    gradient, the adapters and gradients in the training precision. For speed, not memory (the weight is
    kept in two layouts). method=lora only, no DeepSpeed; CUDA GPUs of compute capability 8.9 or newer
    (on a CPU torch emulates it, for tests)."""
    gradient_checkpointing: bool = True
    """Recompute activations in backward instead of keeping them (less memory, slower); see checkpoint_fraction."""
    checkpoint_fraction: float = Field(1.0, ge=0, le=1)
    """Selective checkpointing: recompute only this fraction of the decoder layers (the first ones); 1.0 = all.
    Trades memory for speed (measured: docs/performance.md, LoRA training speed)."""
    logging_steps: int = Field(5, gt=0)
    """Log loss, learning rate, grad norm, tokens/s, MFU and memory every N steps."""
    save_steps: int = Field(20, ge=0)
    """A resumable checkpoint every N steps and at the end; 0 = none (the adapter or model is still written at
    the end). A full fine-tune's checkpoint holds the fp32 optimizer states too (Qwen2.5-7B: about 106 GB)."""
    save_total_limit: int = Field(3, gt=0)
    """Complete checkpoints kept (the oldest removed first; the best one is kept besides with keep_best)."""
    save_final: bool = True
    """false: no adapter or model at the end either (measurement runs: `ferrylm bench`'s trials)."""
    eval_batches: int = Field(16, gt=0)
    """Held-out batches in each evaluation of the loss: its first eval_batches × per_device_batch_size held-out rows
    (runs at another batch size read other rows), the loss their mean per answer token."""
    deepspeed: Literal["zero2", "zero3"] | None = None
    """DeepSpeed ZeRO stage: zero2 shards optimizer states and gradients, zero3 also the parameters. Launch several processes with `ferrylm launch --nproc N`."""
    fsdp: Literal["full_shard", "shard_grad_op"] | None = None
    """PyTorch's own sharding, FSDP2 (`fully_shard`, each decoder layer and the whole model), instead of DeepSpeed:
    full_shard shards parameters, gradients and optimizer states (as ZeRO-3), shard_grad_op keeps a layer's
    parameters gathered from its forward to its backward (as ZeRO-2). Activation checkpointing is FSDP's own
    (train.gradient_checkpointing); checkpoints are sharded (torch.distributed.checkpoint) and resume on the same
    number of processes. Launch several processes with `ferrylm launch --nproc N` (on a CPU torch runs it over
    gloo, for tests)."""
    offload_optimizer: bool = False
    """With deepspeed: keep the optimizer states in CPU RAM and step on the CPU."""
    offload_params: bool = False
    """With deepspeed=zero3: keep the parameters in CPU RAM between uses; with fsdp: the parameters, the gradients
    and the optimizer step on the CPU."""
    zero3_reduce_bucket_size: int | None = Field(500_000_000, gt=0)
    """ZeRO-3: elements per gradient reduction bucket (None: the Trainer's "auto", sized from the hidden width, 7B: 12.8 M; the defaults were chosen by measurement, docs/performance.md)."""
    zero3_prefetch_bucket_size: int | None = Field(200_000_000, gt=0)
    """ZeRO-3: elements of parameters fetched ahead of use (None: the Trainer's "auto")."""
    zero3_param_persistence_threshold: int | None = Field(1_000_000, ge=0)
    """ZeRO-3: parameters smaller than this many elements stay gathered (None: "auto")."""
    zero3_leaf_layers: bool | None = None
    """ZeRO-3: gather each decoder layer whole on entry (None: on for full fine-tunes; with adapters only when every layer is checkpointed)."""
    report_to: list[Literal["tensorboard", "wandb", "mlflow"]] = Field(default_factory=lambda: ["tensorboard"])
    """Where loss, eval loss, learning rate, grad norm, tokens/s, MFU and GPU memory go besides
    log_history.jsonl: TensorBoard (in <run>/train/tensorboard) by default; wandb / mlflow when their
    packages are installed and configured."""
    keep_best: bool = False
    """Evaluate at every checkpoint and keep the best one (by eval loss) beside the last K."""
    drift_penalty: float = Field(0.0, ge=0)
    """Weight of the penalty for drifting from the base model (method lora or qlora): the KL divergence from the
    base's next-token distribution (the adapters switched off, no gradient) to the fine-tune's, over the
    answer tokens, added to the loss in training (never to the held-out loss). Holds the fine-tune near the
    base's own way of answering, which a general-coding canary sees it lose. Costs one more forward pass per
    micro-batch. 0 = off. The log's `kl_to_base` is the KL measured, per answer token."""
    fused_head: bool = True
    """LoRA and QLoRA (not under ZeRO-3, FSDP2, Liger or a whole compiled model): the training loss, and the drift
    penalty, from the last hidden states through the frozen output layer 1,024 answer tokens at a time, each
    chunk's logits recomputed in the backward: the same loss without the full-vocabulary logits of every
    position (prompt and padding included) in memory. false: the model's own loss over all its logits."""
    skip_nonfinite_steps: int = Field(3, ge=0)
    """A step whose gradients are not finite behind a finite loss (one batch's NaN in the backward pass) is
    skipped: no update, the next batch follows, the step listed in the record (`skipped_steps`).
    One more than this many a run stops it with the last good weights saved, as a non-finite loss always
    does. 0 = stop at the first."""
    canary_tasks: int = Field(0, ge=0, le=164)
    """A general-coding canary (needs keep_best): this many HumanEval tasks (a seeded draw) generated greedily
    and executed at every evaluation; the checkpoint kept, and trained on to the end, is the best by held-out
    loss among those within forgetting_budget of the base's canary Pass@1. The eval leaves these tasks out of
    HumanEval(-X) and names them. 0 = off."""
    forgetting_budget: float = Field(3.0, ge=0)
    """Points of canary Pass@1 (0-100) a kept checkpoint may lose against the base model."""
    canary_max_new_tokens: int = Field(384, gt=0)
    """New tokens per canary reply."""
    resume: bool = True
    """Resume from the newest complete checkpoint in <run>/train/checkpoints (false: start clean)."""
    seed: int = 0
    """Seeds weight init of the adapter, data order and dropout."""

    @property
    def head_fused(self) -> bool:
        """train.fused_head where it applies: adapters over an output layer that is neither sharded (ZeRO-3,
        FSDP2) nor Liger's (Liger leaves it to us under the drift penalty), in a model that is not compiled whole."""
        return (
            self.fused_head
            and self.method in ("lora", "qlora")
            and self.deepspeed != "zero3"
            and not self.fsdp
            and not (self.liger and not self.drift_penalty)
            and self.compile != "model"
        )
