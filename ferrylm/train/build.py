"""The model a train section asks for: precision, attention kernel, then LoRA, QLoRA or all weights.

Choices that depend on the machine (bf16, FlashAttention-2) are made here, once, and logged; a
choice the machine cannot honour (fp16 or Liger without a GPU, QLoRA without bitsandbytes) stops
with one line naming the key.
"""

from __future__ import annotations

import importlib.util

import torch

from ..config import TrainConfig
from ..errors import FerryError
from ..log import get_logger

log = get_logger("train")


class TrainSetupError(FerryError, RuntimeError):
    pass


LIGER_LOSS_ONLY = {
    "rope": False,
    "swiglu": False,
    "rms_norm": False,
    "cross_entropy": False,
    "fused_linear_cross_entropy": True,
}
# the drift penalty reads the logits (or, fused, the hidden states): Liger keeps to the decoder's layers
LIGER_LAYERS_ONLY = {
    "rope": True,
    "swiglu": True,
    "rms_norm": True,
    "cross_entropy": False,
    "fused_linear_cross_entropy": False,
}


def liger_config(t: TrainConfig) -> dict | None:
    """Which of Liger's kernels train.liger applies; None: all of them (the Trainer's default)."""
    if not t.liger:
        return None
    if t.drift_penalty:
        return LIGER_LAYERS_ONLY
    return LIGER_LOSS_ONLY if t.compile == "layers" else None


def choose_precision(requested: str, has_cuda: bool) -> str:
    if requested == "auto":
        return "bf16" if has_cuda and torch.cuda.is_bf16_supported() else "fp32"
    if requested == "fp16" and not has_cuda:
        raise TrainSetupError("train.precision: fp16 training (with loss scaling) needs a CUDA GPU; use fp32 or bf16")
    return requested


def choose_attention(requested: str, has_cuda: bool) -> str:
    has_flash = importlib.util.find_spec("flash_attn") is not None
    if requested == "auto":
        return "flash_attention_2" if has_cuda and has_flash else "sdpa"
    if requested == "flash_attention_2" and not (has_cuda and has_flash):
        raise TrainSetupError(
            "train.attention: flash_attention_2 needs a CUDA GPU and the flash-attn package; use auto or sdpa"
        )
    return requested


def check_liger(t: TrainConfig, has_cuda: bool) -> None:
    if not t.liger:
        return
    if not has_cuda:
        raise TrainSetupError("train.liger: Liger's kernels are Triton kernels and need a CUDA GPU")
    if importlib.util.find_spec("liger_kernel") is None:
        raise TrainSetupError("train.liger: liger-kernel is not installed (pip install 'ferrylm[liger]')")


def load_dtype(t: TrainConfig, precision: str, has_cuda: bool) -> torch.dtype:
    """Weights in the training precision on a GPU. Exception: fp16 without DeepSpeed is torch AMP,
    whose loss scaler needs fp32 weights for whatever it updates — a full fine-tune then loads fp32
    (adapters are fp32 anyway, so LoRA keeps an fp16 base)."""
    if not has_cuda or precision == "fp32":
        return torch.float32
    if precision == "fp16":
        return torch.float32 if (t.method == "full" and not t.deepspeed) else torch.float16
    return torch.bfloat16


def _nf4(precision: str, has_cuda: bool) -> dict:
    """from_pretrained's arguments for 4-bit NF4 base weights (train.method=qlora)."""
    if importlib.util.find_spec("bitsandbytes") is None:
        raise TrainSetupError("train.method: qlora needs bitsandbytes (pip install 'ferrylm[qlora]')")
    from transformers import BitsAndBytesConfig

    compute = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    out = {
        "quantization_config": BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=compute
        )
    }
    if has_cuda:
        out["device_map"] = {"": torch.cuda.current_device()}
    return out


def build_model(t: TrainConfig, model_dir, precision: str, attention: str, has_cuda: bool):
    """Load the base and make the trainable model. Under ZeRO-3 the TrainingArguments must exist
    before this runs, so from_pretrained loads every weight straight into its shard."""
    from transformers import AutoModelForCausalLM

    kwargs = {
        "dtype": load_dtype(t, precision, has_cuda),
        "attn_implementation": attention,
        **(_nf4(precision, has_cuda) if t.method == "qlora" else {}),
    }
    model = AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)
    model.config.use_cache = False
    if t.method == "full":
        _, total = parameter_count(model)
        log.info(
            "full fine-tune: %.1f M trainable parameters, %s weights, %s attention",
            total / 1e6,
            kwargs["dtype"],
            attention,
        )
        return model

    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if t.method == "qlora":
        if not has_cuda:
            # bitsandbytes' CPU path repacks 4-bit weights into an inference layout the first time
            # it runs in eval mode (our step-0 eval), after which its backward fails; keep the
            # trainable layout.
            for module in model.modules():
                if hasattr(module, "support_avx512bf16_for_cpu"):
                    module.support_avx512bf16_for_cpu = False
        # Norms and the output layer in fp32, inputs that require grad for checkpointing.
        model = prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=t.gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
    lora = LoraConfig(
        r=t.lora_r,
        lora_alpha=t.lora_alpha,
        lora_dropout=t.lora_dropout,
        target_modules=t.target_modules,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, lora)
    trainable, total = model.get_nb_trainable_parameters()
    log.info(
        "%s r=%d: %.2f M trainable of %.1f M parameters, %s attention",
        t.method,
        t.lora_r,
        trainable / 1e6,
        total / 1e6,
        attention,
    )
    if t.base_precision == "fp8":
        _fp8_base(model, has_cuda)
    return model


def _fp8_base(model, has_cuda: bool) -> None:
    from .fp8 import fp8_base, fp8_unsupported_reason

    device = torch.device("cuda", torch.cuda.current_device()) if has_cuda else torch.device("cpu")
    reason = fp8_unsupported_reason(device)
    if reason:
        raise TrainSetupError(f"train.base_precision: fp8 on this machine: {reason}; use base_precision=model")
    if has_cuda:  # converted where the products will run (each bf16 weight freed as its layer is converted)
        model.to(device)
    count = fp8_base(model)
    log.info(
        "FP8 base: %d linear layers in e4m3 with per-channel scales%s",
        count,
        "" if has_cuda else " (emulated by torch on the CPU: slower than fp32)",
    )


def decoder_layers(model) -> list:
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]


def zero3_leaf_layers(model) -> None:
    """Mark each decoder layer a ZeRO-3 leaf (before DeepSpeed installs its hooks)."""
    from deepspeed.utils import set_z3_leaf_modules

    classes = sorted({type(m) for m in decoder_layers(model)}, key=lambda c: c.__name__)
    if not classes:
        log.warning("train.zero3_leaf_layers: this model has no module named *DecoderLayer; ZeRO-3 gathers per module")
        return
    set_z3_leaf_modules(model, classes)
    log.info("ZeRO-3 gathers each of %d decoder layers whole", len(decoder_layers(model)))


def compile_layers(model) -> None:
    """torch.compile each decoder layer in place. The layers share one code path, so the compiler
    traces it once and reuses the graph; what lies outside (embedding, output layer, loss) stays eager."""
    layers = decoder_layers(model)
    for layer in layers:
        layer.compile()
    log.info("compiled %d decoder layers", len(layers))


def parameter_count(model) -> tuple[int, int]:
    """(trainable, total), counting ZeRO-3 shards and 4-bit packed weights as the full tensors."""
    if hasattr(model, "get_nb_trainable_parameters"):
        return model.get_nb_trainable_parameters()
    total = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
    trainable = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)
    return trainable, total
