"""Predict per-GPU peak memory of a training set-up before renting the hardware.

The model counts bytes, term by term, for the HF transformers + PEFT recipe this package runs
(Qwen2-style decoder, SDPA attention, RMSNorm computed in fp32, loss on fp32 logits):

- weights: parameters × bytes (bf16 2, 4-bit ≈ 0.5 + quantisation constants), ZeRO-3 shards them;
- trainable state: gradients + optimizer (AdamW m, v and an fp32 master copy under mixed precision),
  sharded by ZeRO stage 1/2/3 over the data-parallel GPUs, or moved to CPU RAM by offload;
- activations: what autograd keeps per token per layer (counted below), or, with gradient
  checkpointing, one layer input per layer plus one layer's activations during recompute;
- logits: the bf16 logits, their fp32 copy and the fp32 log-softmax (10 bytes per token per vocab
  entry at the loss; their gradients replace them as backward starts). Counted at every position: a
  micro-batch of one row computes them only where a token is a target (`train.dataset.scored_positions`),
  a share the plan cannot know before the data exists, so for instruction data it is an upper bound.

Backward frees each layer's activations as that layer's gradients appear, so the peak holds
weights + optimizer state + max(activations + logits, gradients), not their sum. (The first
version of this planner summed them and counted 16 bytes per logit; measured peaks on an H200
showed both wrong; a held-out set then showed the LoRA input copy is kept without dropout too —
see docs/memory_planner.md.)

Per token per layer without checkpointing (bytes, h hidden, I intermediate, bf16 = 2 bytes):
two RMSNorms keep an fp32 copy of their input and a bf16 normalised output (2 × 6h); SDPA keeps q,
k and v expanded to every head and its output (8h); o_proj keeps its input (2h); the MLP keeps
gate, up, act(gate) and act(gate)·up (8I). LoRA adds, per adapted module, a copy of its input
(2 bytes per element) and with dropout a mask (1 byte).

Fused kernels keep less, and the adapters' input copies go with the eager element-wise chains:
- train.compile=layers (inductor's partitioner saves matmul inputs and recomputes element-wise
  chains): the layer input and post-attention residual (4h), both normalised inputs (4h), SDPA's
  q, k, v and output (8h), gate and up (4I) and the down projection's input (2I): 16h + 6I.
- train.compile=model: the same less the normalised inputs, recomputed across the whole graph: 12h + 6I.
- train.liger (eager): 22h + 6I. Liger's RMSNorm keeps input and output (2 × 4h), SDPA 8h,
  o_proj 2h, its SwiGLU gate, up and the down input (6I): 18h + 6I; the other 4h is measured, not
  attributed. Its fused linear cross-entropy never materialises the logits (what stays is the fp32
  gradient of the last hidden state, 4h per token); with the drift penalty Liger keeps to the layers and
  the output layer is counted as without it.
These are fitted to H100 runs of `ferrylm train` (docs/memory_planner.md) and checked on held-out ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..shapes import QWEN25_7B as QWEN25_7B_CONFIG

GiB = 2**30


@dataclass
class ModelShape:
    hidden: int = QWEN25_7B_CONFIG["hidden_size"]  # Qwen2.5-7B's, what every preset plans for
    layers: int = QWEN25_7B_CONFIG["num_hidden_layers"]
    heads: int = QWEN25_7B_CONFIG["num_attention_heads"]
    kv_heads: int = QWEN25_7B_CONFIG["num_key_value_heads"]
    intermediate: int = QWEN25_7B_CONFIG["intermediate_size"]
    vocab: int = QWEN25_7B_CONFIG["vocab_size"]
    tied_embeddings: bool = QWEN25_7B_CONFIG["tie_word_embeddings"]

    @classmethod
    def from_hf_config(cls, c: dict) -> ModelShape:
        return cls(
            hidden=c["hidden_size"],
            layers=c["num_hidden_layers"],
            heads=c["num_attention_heads"],
            kv_heads=c.get("num_key_value_heads") or c["num_attention_heads"],
            intermediate=c["intermediate_size"],
            vocab=c["vocab_size"],
            tied_embeddings=bool(c.get("tie_word_embeddings", False)),
        )

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def layer_params(self) -> int:
        h, kv, i = self.hidden, self.kv_heads * self.head_dim, self.intermediate
        attn = h * h + 2 * h * kv + h * h + h + 2 * kv  # q, k, v (with bias), o
        return attn + 3 * h * i + 2 * h

    def params(self) -> int:
        emb = self.vocab * self.hidden
        return self.layers * self.layer_params() + emb * (1 if self.tied_embeddings else 2) + self.hidden

    def lora_params(self, r: int) -> int:
        h, kv, i = self.hidden, self.kv_heads * self.head_dim, self.intermediate
        per_layer = r * ((h + h) + (h + kv) * 2 + (h + h) + 2 * (h + i) + (i + h))
        return self.layers * per_layer


QWEN25_7B = ModelShape()


@dataclass
class Setup:
    shape: ModelShape = field(default_factory=ModelShape)
    method: Literal["lora", "qlora", "full"] = "lora"
    lora_r: int = 16
    lora_dropout: float = 0.05
    seq_len: int = 4096
    micro_batch: int = 1
    gradient_checkpointing: bool = True
    checkpoint_fraction: float = 1.0  # selective: only this share of the layers recompute
    gpus: int = 1
    zero_stage: int = 0
    offload_optimizer: bool = False
    offload_params: bool = False
    # "mixed": bf16 weights + fp32 master copy and fp32 Adam states (DeepSpeed, 16 B per trainable
    # parameter); "bf16": weights, gradients and Adam states all bf16 (8 B per parameter).
    optimizer_precision: Literal["mixed", "bf16"] = "mixed"
    gpu_memory_gib: float = 80.0
    reserve_gib: float = 1.5  # CUDA context (~0.5 GiB), allocator fragmentation, NCCL buffers
    compile: Literal["none", "layers", "model"] = "none"
    liger: bool = False
    base_precision: Literal["model", "fp8"] = "model"
    drift_penalty: bool = False  # train.drift_penalty: the base's logits and the KL's fp32 tensors beside the loss's
    # train.fused_head where it applies: the vocabulary's tensors one chunk of tokens at a time
    fused_head: bool = False


@dataclass
class Plan:
    weights_gib: float
    grads_gib: float
    optimizer_gib: float
    activations_gib: float
    logits_gib: float
    reserve_gib: float
    cpu_offload_gib: float
    total_gib: float
    fits: bool
    advice: str | None = None

    def lines(self, setup: Setup) -> list[str]:
        rows = [
            ("weights", self.weights_gib),
            ("gradients", self.grads_gib),
            ("optimizer states", self.optimizer_gib),
            ("activations", self.activations_gib),
            ("logits + loss", self.logits_gib),
            ("reserve", self.reserve_gib),
        ]
        out = [f"{name:<17} {v:8.1f} GiB" for name, v in rows]
        out.append(
            "(peak = weights + optimizer + max(activations + logits, gradients) + reserve: backward frees "
            "activations as gradients appear)"
        )
        out.append(
            f"{'peak per GPU':<17} {self.total_gib:8.1f} GiB of {setup.gpu_memory_gib:g} GiB: "
            f"{'fits' if self.fits else 'does NOT fit'}"
        )
        if self.cpu_offload_gib:
            out.append(f"{'CPU RAM (offload)':<17} {self.cpu_offload_gib:8.1f} GiB")
        if self.advice:
            out.append(f"smallest change that fits: {self.advice}")
        return out


def activation_bytes_per_token_layer(s: Setup) -> float:
    h, i = s.shape.hidden, s.shape.intermediate
    if s.compile == "layers":
        return 16 * h + 6 * i
    if s.compile == "model":
        return 12 * h + 6 * i
    if s.liger:
        return 22 * h + 6 * i
    b = 2 * 6 * h + 8 * h + 2 * h + 8 * i
    if s.method in ("lora", "qlora"):
        # Each adapted module keeps its own copy of its input for lora_A (2 bytes per element),
        # plus a dropout mask (1 byte) when dropout is on. q, k, v, o, gate and up take h-wide
        # inputs; down takes an I-wide one.
        b += (2 + (1 if s.lora_dropout > 0 else 0)) * (6 * h + i)
    return b


def activations(s: Setup, tokens: int) -> float:
    """Bytes of activations kept for backward at the peak."""
    per_layer = activation_bytes_per_token_layer(s) * tokens
    recompute = round(s.checkpoint_fraction * s.shape.layers) if s.gradient_checkpointing else 0
    # A recomputed layer keeps its input; the others keep everything; recomputing one layer
    # briefly holds that layer's activations as well.
    acts = recompute * 2 * s.shape.hidden * tokens + (s.shape.layers - recompute) * per_layer
    if recompute:
        acts += per_layer
    if s.base_precision == "fp8":
        # The FP8 base keeps its weights in two e4m3 layouts (2 bytes a parameter, as bf16: no change
        # to the weights); each product briefly holds an fp32 copy of its input and the e4m3 one (5
        # bytes an element), the largest being down's intermediate-wide input. On an H100 (7B shapes,
        # compiled layers) 1.4 % under the measured peak; uncompiled 14 % over, as for bf16 LoRA without
        # checkpointing (docs/performance.md).
        acts += tokens * s.shape.intermediate * 5
    return acts


def estimate(s: Setup) -> Plan:
    p = s.shape.params()
    tokens = s.seq_len * s.micro_batch
    dp = max(s.gpus, 1)
    weight_bytes = 0.5 + 0.0625 if s.method == "qlora" else 2.0  # NF4 + double-quantised constants
    weights = p * weight_bytes
    if s.method == "qlora":
        weights += s.shape.vocab * s.shape.hidden * 2 * 1.5  # embeddings and lm_head stay bf16
    trainable = p if s.method == "full" else s.shape.lora_params(s.lora_r)
    # PEFT keeps adapters in fp32 (fp32 gradients, Adam m and v). Full fine-tuning under mixed
    # precision (DeepSpeed) reduces gradients into an fp32 partition and keeps an fp32 master copy
    # plus m and v (4 + 12 bytes); pure bf16 keeps everything in bf16 (2 + 4 bytes).
    mixed = s.method != "full" or s.optimizer_precision == "mixed"
    grad_bytes = 4.0 if mixed else 2.0
    opt_bytes = 8.0 if s.method != "full" else (12.0 if mixed else 4.0)
    grads = trainable * grad_bytes
    optim = trainable * opt_bytes
    if s.method != "full":
        weights += trainable * 4.0
    if s.zero_stage >= 1:
        optim /= dp
    if s.zero_stage >= 2:
        grads /= dp
    if s.method == "full" and s.zero_stage in (1, 2) and mixed:
        # DeepSpeed's ZeRO-1/2 mixed-precision optimizer keeps every half-precision gradient as
        # backward produces it, beside the fp32 partition it reduces them into (that one on the
        # CPU with optimizer offload). Measured on 2 x H200: without this term the plan was 17 % low.
        grads = trainable * 2.0 + (0.0 if s.offload_optimizer else grads)
    if s.zero_stage >= 3:
        largest_layer = s.shape.layer_params() * 2.0
        weights = weights / dp + 2 * largest_layer  # gathered working set: current + prefetched layer
    cpu = 0.0
    if s.offload_optimizer and s.zero_stage >= 1:
        cpu += optim  # each rank's shard lives in its host's RAM
        optim = 0.0
        if s.method == "full" and s.zero_stage in (1, 2) and mixed:
            cpu += trainable * 4.0 / dp  # the fp32 gradient partition goes with it
    if s.offload_params and s.zero_stage >= 3:
        cpu += p * weight_bytes / dp
        weights = 2 * s.shape.layer_params() * 2.0

    acts = activations(s, tokens)
    logits = _logits(s, tokens)
    total = weights + optim + max(acts + logits, grads) + s.reserve_gib * GiB
    plan = Plan(
        weights / GiB,
        grads / GiB,
        optim / GiB,
        acts / GiB,
        logits / GiB,
        s.reserve_gib,
        cpu / GiB,
        total / GiB,
        total / GiB <= s.gpu_memory_gib,
    )
    if not plan.fits:
        plan.advice = smallest_fix(s)
    return plan


def smallest_fix(s: Setup) -> str:
    """Try single changes in order of how little they cost in speed or quality."""
    from dataclasses import replace

    candidates = []
    if not s.gradient_checkpointing:
        candidates.append(("train.gradient_checkpointing=true", replace(s, gradient_checkpointing=True)))
    elif s.checkpoint_fraction < 1:
        candidates.append(("train.checkpoint_fraction=1", replace(s, checkpoint_fraction=1.0)))
    if s.micro_batch > 1:
        candidates.append(
            (
                f"train.per_device_batch_size={s.micro_batch // 2} (raise "
                f"train.gradient_accumulation_steps to keep the batch)",
                replace(s, micro_batch=s.micro_batch // 2),
            )
        )
    if s.gpus > 1 and s.zero_stage < 3:
        stage = 2 if s.zero_stage < 2 else 3
        candidates.append((f"train.deepspeed=zero{stage}", replace(s, zero_stage=stage)))
    if s.zero_stage >= 1 and not s.offload_optimizer:
        candidates.append(("train.offload_optimizer=true", replace(s, offload_optimizer=True)))
    if s.zero_stage >= 3 and not s.offload_params:
        candidates.append(("train.offload_params=true", replace(s, offload_params=True)))
    if s.method == "full":
        candidates.append(("train.method=lora", replace(s, method="lora")))
    if s.method == "lora":
        candidates.append(("train.method=qlora", replace(s, method="qlora")))
    if s.seq_len > 512:
        candidates.append((f"data.max_seq_len={s.seq_len // 2}", replace(s, seq_len=s.seq_len // 2)))
    for label, alt in candidates:
        if estimate(alt).fits:
            return label
    return "none of the single changes tried is enough; combine them or add GPUs"


def _logits(s: Setup, tokens: int) -> float:
    """Bytes of the loss over the vocabulary, and of the drift penalty's KL beside it."""
    if s.liger and not s.drift_penalty:
        return tokens * s.shape.hidden * 4.0  # fused linear cross-entropy: the hidden state's gradient
    per_entry = 2 + 4 + 4  # bf16 logits, fp32 copy, fp32 log-softmax
    if s.drift_penalty:
        per_entry += 12  # the KL's backward keeps the fine-tune's log-softmax, the base's probabilities, their gap
    if s.fused_head:  # one chunk's tensors at a time (recomputed in the backward), the hidden states and their gradient
        from ..config.train import HEAD_CHUNK

        return min(tokens, HEAD_CHUNK) * s.shape.vocab * (per_entry + 4) + tokens * s.shape.hidden * 8.0
    return tokens * s.shape.vocab * per_entry


def setup_from_config(cfg, shape: ModelShape | None = None) -> Setup:
    """The planner's view of a run config: its train section on its hardware section."""
    t = cfg.train
    return Setup(
        shape=shape or ModelShape(),
        method=t.method,
        lora_r=t.lora_r,
        lora_dropout=t.lora_dropout,
        seq_len=cfg.data.max_seq_len,
        micro_batch=t.per_device_batch_size,
        gradient_checkpointing=t.gradient_checkpointing,
        checkpoint_fraction=t.checkpoint_fraction,
        gpus=cfg.hardware.gpus,
        # FSDP2 shards as ZeRO does: full_shard as stage 3, shard_grad_op (parameters gathered from a layer's
        # forward to its backward) as stage 2; its CPU offload moves the optimizer step there too
        zero_stage={None: 0, "zero2": 2, "zero3": 3}[t.deepspeed]
        or {None: 0, "shard_grad_op": 2, "full_shard": 3}[t.fsdp],
        offload_optimizer=t.offload_optimizer or bool(t.fsdp and t.offload_params),
        offload_params=t.offload_params and t.fsdp != "shard_grad_op",
        # DeepSpeed and FSDP2 keep fp32 master weights and Adam states; a full fine-tune without them
        # trains the weights it loaded (bf16 on a GPU) with bf16 optimizer states.
        optimizer_precision="mixed" if (t.deepspeed or t.fsdp or t.method != "full") else "bf16",
        gpu_memory_gib=cfg.hardware.gpu_memory_gib,
        compile=t.compile,
        liger=t.liger,
        base_precision=t.base_precision,
        drift_penalty=bool(t.drift_penalty),
        fused_head=t.head_fused,
    )


def load_setup(source: str | None, overrides: list[str] | tuple[str, ...] = ()) -> tuple[Setup, dict]:
    """A run config (preset name or YAML file, dotted overrides) as a Setup for Qwen2.5-7B's shapes,
    and its notes (a claimed peak to answer)."""
    from ..config import load_config

    cfg = load_config(source, overrides)
    notes = {"claimed_peak_gib": cfg.hardware.claimed_peak_gib} if cfg.hardware.claimed_peak_gib else {}
    return setup_from_config(cfg), notes


def report(name: str, setup: Setup, notes: dict) -> str:
    plan = estimate(setup)
    ckpt = (
        "off"
        if not setup.gradient_checkpointing
        else ("on" if setup.checkpoint_fraction >= 1 else f"on for {setup.checkpoint_fraction:.0%} of the layers")
    )
    head = (
        f"{name}: Qwen2.5-7B ({setup.shape.params() / 1e9:.2f} B parameters), {setup.method}"
        f"{f' r={setup.lora_r}' if setup.method != 'full' else ''}, {setup.gpus} GPU(s), ZeRO-{setup.zero_stage}"
        f"{' + optimizer offload' if setup.offload_optimizer else ''}{' + parameter offload' if setup.offload_params else ''}, "
        f"seq {setup.seq_len} × micro-batch {setup.micro_batch}, checkpointing {ckpt}"
        f"{'' if setup.compile == 'none' else f', compiled {setup.compile}'}{', Liger' if setup.liger else ''}"
        f"{', FP8 base' if setup.base_precision == 'fp8' else ''}"
    )
    lines = [head, *plan.lines(setup)]
    if "claimed_peak_gib" in notes:
        claim = notes["claimed_peak_gib"]
        lines.append(
            f"the seed document claims {claim:g} GiB per GPU; this estimate is {plan.total_gib:.1f} GiB "
            f"({plan.total_gib / claim - 1:+.0%})"
        )
    return "\n".join(lines)
