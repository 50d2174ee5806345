"""How an `Engine` decodes: one validated object instead of a row of switches, so a forbidden pair is
refused in one place and the engine reads what a combination means (its decoder, its 4-bit weights)."""

from __future__ import annotations

from dataclasses import dataclass

from .kernels.gemv import CONFIG_KEYS


@dataclass(frozen=True)
class EngineOptions:
    compile: bool | None = None
    """Compile (or, with `gemv`, capture by hand) the decode step into a CUDA graph; None: on CUDA."""
    tune: bool = True
    """Let inductor generate the batch-1 matrix-vector kernels itself (gpt-fast's setting)."""
    fused: bool = False
    """Run `FusedDecoder` (q/k/v and gate/up fused, Llama-family models) instead of transformers' model."""
    int4_group: int | None = None
    """4-bit round-to-nearest weights in groups of this many inputs (the fused decoder)."""
    w4a16_dir: str | None = None
    """The export stage's W4A16 artifact: its own integers and scales (the fused decoder)."""
    gemv: bool = False
    """(CUDA, bf16) The linear layers on the Triton matrix-vector kernels and the one-token step of
    decode_step.py; 4-bit weights on the 4-bit kernel."""
    gemv_fixed: dict | None = None
    """`gemv`: this configuration (block_n, block_k, num_warps, num_stages) for every kernel, untuned."""
    tuned_dir: str | bool | None = None
    """`gemv`: where the engine's choices are saved (None: ferrylm's cache; False: neither read nor saved)."""
    prefill_bucket: int | None = None
    """Prompts padded to a multiple of this (the captured kernel engine's default: 64)."""
    tune_budget_s: float | None = None
    """`gemv`: seconds of tuning left to the engine at start (None: no bound)."""

    def __post_init__(self):
        if self.int4_group and self.w4a16_dir:  # each gives the decoder its 4-bit weights: one would silently win
            raise ValueError("Engine: int4_group and w4a16_dir each choose the decoder's 4-bit weights; give one")
        if self.int4_group is not None and (self.int4_group <= 0 or self.int4_group & (self.int4_group - 1)):
            raise ValueError(f"Engine: int4_group must be a power of two, not {self.int4_group}")
        if self.gemv_fixed is not None and set(self.gemv_fixed) != set(CONFIG_KEYS):
            raise ValueError(f"Engine: gemv_fixed names {', '.join(CONFIG_KEYS)}, not {sorted(self.gemv_fixed)}")
        if self.gemv_fixed is not None and not self.gemv:
            raise ValueError("Engine: gemv_fixed configures the matrix-vector kernels; it needs gemv=True")
        if self.prefill_bucket is not None and self.prefill_bucket <= 0:
            raise ValueError(f"Engine: prefill_bucket must be positive, not {self.prefill_bucket}")

    @property
    def fused_decoder(self) -> bool:
        """Whether the engine runs `FusedDecoder`: asked for, or needed by 4-bit weights or the kernels."""
        return bool(self.fused or self.int4_group or self.w4a16_dir or self.gemv)

    def compiled(self, device_type: str) -> bool:
        return device_type == "cuda" if self.compile is None else self.compile
