"""Floating-point numbers pinned so that they hold on every CPU the suite runs on.

How to pin a number:
- Pin what a recipe computes (a loss curve, an error), never a timing.
- The same code gives different low bits on Intel with AMX, AMD with AVX-512 and an AVX2-only
  machine: their matrix kernels and vectorised reductions add in different orders, and a few steps
  of training (or an FP8 rounding that flips) carry that into the fourth decimal.
- So the tolerance is not a guess: it is at least 2.5 times a family's largest spread measured across
  CPU kinds, taken from `SPREAD` below. `benchmarks/pin_spread.py` measures it (it runs the pinned tests under
  numeric variants of this machine and compares with the pins made elsewhere) and prints the table
  docs/notes/pinned_numbers.md keeps.
- The margin must stay well below what a real change moves: each family's entry names the smallest
  real change measured and how far it moves the number.
"""

from __future__ import annotations

import json
import os

import pytest

# family -> (tolerance, what the spread measured and what a real change moves). Measured by
# benchmarks/pin_spread.py on an AMD EPYC with AVX2 only (its variants: one thread, ATen's scalar kernels,
# MKL's SSE4.2 and AVX kernels) against pins made on an Intel Xeon with AMX, and the AMD EPYC with
# AVX-512 of issue 50; docs/notes/pinned_numbers.md has the table.
SPREAD = {
    "train-loss": (
        2.5e-4,
        "fp32 losses: at most 4.6e-5 from the pins; lr +10 % moves the LoRA curve by "
        "6.9e-3 and the two-step CPT losses by 7.2e-4",
    ),
    "fp8-curve": (
        1.5e-3,
        "LoRA on an FP8 base, where a last-bit difference flips an e4m3 rounding: at most "
        "6.2e-4 from the pins (AVX2; AVX-512 5e-4)",
    ),
    "zero3-loss": (1e-4, "ZeRO-3's losses: at most 5.4e-6 from the pins; lr +10 % moves them by 3.0e-2"),
    "quant-error": (
        2e-4,
        "layer output errors: at most 5e-5 from the pins (their rounding); RTN's 0.1046 against GPTQ's 0.0091",
    ),
}


def int8_products() -> str:
    """How ONNX Runtime multiplies int8 here: "vnni" (AVX-512 VNNI, AVX-VNNI or AMX: exact int32 sums) or
    "avx2" (pairwise int16 sums that saturate — ONNX Runtime's documented u8s8 behaviour on AVX2)."""
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    return "vnni" if any(f in flags for f in ("avx512_vnni", "avx_vnni", "amx_int8")) else "avx2"


def learning_rate(value: float = 3e-3) -> str:
    """The tiny recipes' learning-rate override; benchmarks/pin_spread.py scales it (FERRYLM_TEST_LR_SCALE)
    to measure how far a real change moves the pinned numbers."""
    return f"train.learning_rate={value * float(os.environ.get('FERRYLM_TEST_LR_SCALE', '1')):g}"


def pinned(name: str, family: str, got, want):
    """Assert that `got` (a number, list or dict of numbers) equals the pin `want` within the family's
    measured tolerance; first write `got` to $FERRYLM_PIN_LOG for benchmarks/pin_spread.py."""
    log = os.environ.get("FERRYLM_PIN_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"name": name, "family": family, "got": got, "want": want}) + "\n")
    tolerance, _ = SPREAD[family]
    assert got == pytest.approx(want, abs=tolerance), f"{name} ({family}, tolerance {tolerance})"
