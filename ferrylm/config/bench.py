"""`bench`: short measured trials of training strategies and decoding."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .base import _Section

# The training strategies `ferrylm bench` knows (bench/strategies.py holds what each one sets, in this order).
STRATEGIES = (
    "full-fp32",
    "full-bf16",
    "full-fp16",
    "full-bf16-ckpt",
    "lora-bf16",
    "lora-bf16-ckpt",
    "lora-bf16-ckpt-half",
    "lora-bf16-liger",
    "lora-bf16-compiled",
    "lora-fp8base",
    "lora-fp8base-compiled",
    "qlora-bf16-ckpt",
    "zero2-full-bf16-ckpt",
    "zero3-full-bf16-ckpt",
    "zero3-full-bf16-ckpt-offload",
    "zero2-lora-bf16",
)


class BenchConfig(_Section):
    """`ferrylm bench`: short measured trials of training strategies on the config's model, and decoding
    of every artifact the export stage wrote."""

    strategies: list[str] | Literal["auto"] = "auto"
    """auto: every strategy that applies on this machine"""
    warmup_steps: int = Field(1, ge=0)
    """steps run but not timed (start-up, compilation)"""
    steps: int = Field(3, gt=0)
    """timed steps per strategy"""
    rows: Literal["auto", "data", "synthetic"] = "auto"
    """auto: the data stage's rows when it has run"""
    seq_len: int | None = Field(None, ge=8)
    """synthetic rows' tokens (None: data.max_seq_len)"""
    gpus: int | None = Field(None, gt=0)
    """processes for the ZeRO strategies (None: every visible GPU)"""
    decode: bool = True
    """decode each exported artifact too"""
    decode_tokens: int = Field(512, gt=1)
    """Tokens decoded per artifact (batch 1, greedy)."""
    trial_timeout_s: float = Field(1800, gt=0)
    """one trial past this is stopped and reported"""

    @field_validator("strategies")
    @classmethod
    def _known_strategies(cls, v):
        if v != "auto" and (unknown := [s for s in v if s not in STRATEGIES]):
            raise ValueError(f"unknown strategy {', '.join(unknown)} (known: {', '.join(STRATEGIES)})")
        return v
