"""How far the suite's pinned floating-point numbers move across CPUs (tests/pinning.py).

Runs the tests that pin numbers once per numeric variant of this machine, each variant adding in
another order the way another CPU kind does (one thread instead of all; ATen's scalar kernels
instead of its AVX2/AVX-512 ones; MKL's SSE4.2 or AVX kernels instead of its widest), collects what
each test computed through $FERRYLM_PIN_LOG, and prints per pin: the largest distance from the pin
(made on another machine) and between variants. Then it measures what a real change moves: the same
tests with the learning rate 10 % higher.

    .venv/bin/python benchmarks/pin_spread.py --out benchmarks/results/pin_spread_<cpu>.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/train/test_train.py::test_lora_training_lowers_loss_and_writes_adapter",
    "tests/train/test_fp8.py::test_lora_on_an_fp8_base_trains_as_on_the_full_precision_base",
    "tests/data/test_cpt.py",
    "tests/export/test_gptq.py::test_gptq_stays_on_the_grid_and_moves_a_layers_outputs_less_than_rounding",
    "tests/train/test_deepspeed.py::test_zero3_full_fine_tune_with_leaf_layers_trains_the_same_numbers",
]
VARIANTS = {
    "this machine": {},
    "one thread": {"OMP_NUM_THREADS": "1"},
    "ATen scalar kernels": {"ATEN_CPU_CAPABILITY": "default"},
    "MKL SSE4.2 kernels": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "MKL AVX kernels": {"MKL_ENABLE_INSTRUCTIONS": "AVX"},
}
# A real change for scale: the tests' learning rate 10 % higher (tests/conftest.py reads this).
REAL_CHANGE = {"lr +10 %": {"FERRYLM_TEST_LR_SCALE": "1.1"}}


def flat(value) -> list[float]:
    if isinstance(value, dict):
        return [float(value[k]) for k in sorted(value, key=lambda k: int(k))]
    return [float(v) for v in value] if isinstance(value, list) else [float(value)]


def run_variant(env_extra: dict[str, str]) -> dict[str, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "pins.jsonl"
        env = {**os.environ, **env_extra, "FERRYLM_PIN_LOG": str(log)}
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {r["name"]: r for r in rows}


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the table as JSON here")
    args = ap.parse_args(argv)
    flags = Path("/proc/cpuinfo").read_text()
    isa = "amx" if "amx_tile" in flags else "avx512" if "avx512f" in flags else "avx2"
    runs = {name: run_variant(env) for name, env in {**VARIANTS, **REAL_CHANGE}.items()}
    table = {}
    for name, first in runs["this machine"].items():
        want = flat(first["want"])
        seen = {v: flat(runs[v][name]["got"]) for v in VARIANTS if name in runs[v]}
        base = seen["this machine"]
        changed = flat(runs["lr +10 %"][name]["got"]) if name in runs["lr +10 %"] else None
        table[name] = {
            "family": first["family"],
            "pin": want,
            "values": seen,
            "max_from_pin": max(abs(a - b) for vals in seen.values() for a, b in zip(vals, want)),
            "max_between_variants": max(abs(a - b) for vals in seen.values() for a, b in zip(vals, base)),
            "real_change_moves": None if changed is None else max(abs(a - b) for a, b in zip(changed, base)),
        }
        t = table[name]
        print(
            f"{name:28s} {t['family']:12s} from pin {t['max_from_pin']:.2e}  between variants "
            f"{t['max_between_variants']:.2e}  lr +10 % moves {t['real_change_moves'] or float('nan'):.2e}"
        )
    if args.out:
        args.out.write_text(json.dumps({"cpu": cpu_name(), "isa": isa, "pins": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
