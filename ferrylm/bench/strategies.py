"""The training strategies `ferrylm bench` compares, as train-stage overrides; which apply on a machine.

Each strategy sets every knob that distinguishes strategies (method, precision, checkpointing,
Liger, compilation, ZeRO, offload, the base's precision), so a config's own choices of those do not leak into a row; the
rest (model, batch, accumulation, learning rate, LoRA rank) is the user's config. No heavy imports:
the config validates strategy names against this table.
"""

from __future__ import annotations

from dataclasses import dataclass

# What a strategy leaves at these values unless it names them.
NEUTRAL = {
    "train.precision": "bf16",
    "train.gradient_checkpointing": "false",
    "train.checkpoint_fraction": "1.0",
    "train.liger": "false",
    "train.compile": "none",
    "train.deepspeed": "null",
    "train.offload_optimizer": "false",
    "train.offload_params": "false",
    "train.base_precision": "model",
}


@dataclass(frozen=True)
class Strategy:
    name: str
    what: str
    method: str
    settings: tuple[tuple[str, str], ...] = ()
    needs: str | None = None  # "cuda": a CUDA GPU; "gpus": several GPUs (launched one process each)

    def overrides(self) -> list[str]:
        merged = {**NEUTRAL, "train.method": self.method, **{f"train.{k}": v for k, v in self.settings}}
        return [f"{k}={v}" for k, v in merged.items()]


def _s(name: str, what: str, method: str, needs: str | None = None, **settings: str) -> Strategy:
    return Strategy(name, what, method, tuple(settings.items()), needs)


CKPT = {"gradient_checkpointing": "true"}
TRAINING: dict[str, Strategy] = {
    s.name: s
    for s in (
        _s("full-fp32", "full fine-tune, fp32", "full", precision="fp32"),
        _s("full-bf16", "full fine-tune, bf16 autocast", "full"),
        _s("full-fp16", "full fine-tune, fp16 autocast with loss scaling", "full", "cuda", precision="fp16"),
        _s("full-bf16-ckpt", "full fine-tune, bf16, gradient checkpointing", "full", **CKPT),
        _s("lora-bf16", "LoRA, bf16", "lora"),
        _s("lora-bf16-ckpt", "LoRA, bf16, gradient checkpointing", "lora", **CKPT),
        _s(
            "lora-bf16-ckpt-half",
            "LoRA, bf16, checkpointing half the layers",
            "lora",
            **CKPT,
            checkpoint_fraction="0.5",
        ),
        _s("lora-bf16-liger", "LoRA, bf16, Liger kernels", "lora", "cuda", liger="true"),
        _s("lora-bf16-compiled", "LoRA, bf16, each decoder layer compiled", "lora", compile="layers"),
        _s("lora-fp8base", "LoRA on an FP8 base (e4m3 products), bf16", "lora", "cuda", base_precision="fp8"),
        _s(
            "lora-fp8base-compiled",
            "LoRA on an FP8 base, each decoder layer compiled",
            "lora",
            "cuda",
            base_precision="fp8",
            compile="layers",
        ),
        _s("qlora-bf16-ckpt", "QLoRA (4-bit NF4 base), bf16, checkpointing", "qlora", "cuda", **CKPT),
        _s(
            "zero2-full-bf16-ckpt",
            "full fine-tune, ZeRO-2, bf16, checkpointing",
            "full",
            "gpus",
            deepspeed="zero2",
            **CKPT,
        ),
        _s(
            "zero3-full-bf16-ckpt",
            "full fine-tune, ZeRO-3, bf16, checkpointing",
            "full",
            "gpus",
            deepspeed="zero3",
            **CKPT,
        ),
        _s(
            "zero3-full-bf16-ckpt-offload",
            "full fine-tune, ZeRO-3, optimizer state on the CPU",
            "full",
            "gpus",
            deepspeed="zero3",
            offload_optimizer="true",
            **CKPT,
        ),
        _s("zero2-lora-bf16", "LoRA, ZeRO-2, bf16", "lora", "gpus", deepspeed="zero2"),
    )
}


def plan(names: list[str] | str, has_cuda: bool, gpus: int) -> tuple[list[Strategy], dict[str, str]]:
    """(strategies to run, {strategy: why it does not apply}). "auto" runs those that apply here;
    named strategies always run (one that cannot gets its row with the train stage's reason)."""
    if names != "auto":
        return [TRAINING[n] for n in names], {}
    run, skipped = [], {}
    for s in TRAINING.values():
        if s.needs == "cuda" and not has_cuda:
            skipped[s.name] = "needs a CUDA GPU"
        elif s.needs == "gpus" and gpus < 2:
            skipped[s.name] = "ZeRO shards over several GPUs; this machine has " + ("one" if has_cuda else "none")
        else:
            run.append(s)
    return run, skipped
