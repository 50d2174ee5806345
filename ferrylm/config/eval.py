"""`eval`: benchmarks, held-out measures, latency, criteria."""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from pydantic import Field, field_validator

from .base import _Section


class EvalConfig(_Section):
    # None: the eval stage starts its own endpoints (fine-tuned, and base when compare_base).
    endpoint: Optional[str] = None
    local: bool = False                          # run the models in-process instead of serving them
    compare_base: bool = True
    humaneval_limit: Optional[int] = Field(None, gt=0)
    # Benchmarks run on every model, each a module of ferrylm/eval (eval/benchmark.py): "humaneval"
    # (Python), "humaneval-x" (the same tasks in the languages below, compiled and run in the
    # sandbox; data from humaneval_x_dir or $FERRYLM_HUMANEVAL_X).
    benchmarks: list[str] = Field(default_factory=lambda: ["humaneval"])
    humaneval_x_languages: list[Literal["cpp", "java", "go", "rust"]] = Field(
        default_factory=lambda: ["cpp", "java", "go", "rust"])
    humaneval_x_dir: Optional[str] = None
    humaneval_x_limit: Optional[int] = Field(None, gt=0)
    # With a seed the limits above take that many tasks drawn at random (the same task numbers in
    # every language) instead of the first ones; the report says "N of 164".
    subset_seed: Optional[int] = None
    # Held-out examples per task (explain, generate) generated and scored for each model.
    bleu_limit: int = Field(64, gt=0)
    heldout_loss: bool = True                    # each model's loss per held-out example (in-process)
    max_new_tokens: int = Field(384, gt=0)
    latency_new_tokens: int = Field(512, gt=0)
    concurrency: int = Field(8, gt=0)
    exec_timeout_s: float = Field(10.0, gt=0)
    exec_memory_mb: int = Field(1024, gt=0)
    exec_workers: int = Field(2, gt=0)
    # Generated programs run in a bubblewrap jail; without bubblewrap the stage refuses unless this
    # is set, and the report then records "unconfined" beside every result.
    exec_unconfined: bool = False
    prompt_mode: Literal["chat", "base"] = "chat"
    samples_per_task: int = Field(1, gt=0)       # n; temperature 0 with n=1 is greedy
    temperature: float = Field(0.0, ge=0)
    pass_k: list[int] = Field(default_factory=lambda: [1, 10, 100])  # reported where k <= n
    latency_runs: int = Field(3, gt=0)
    latency_concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4])
    criteria: str = "seed"                       # shipped set name or a YAML path
    enforce_gates: bool = True                   # exit non-zero when a gating criterion fails

    @field_validator("benchmarks")
    @classmethod
    def _known_benchmarks(cls, v: list[str]) -> list[str]:
        # Without importing the eval package (torch, the sandbox) just to read a config.
        here = Path(__file__).parent.parent / "eval"

        def is_benchmark(p: Path) -> bool:
            return p.stem != "benchmark" and p.is_file() and "\ndef tracks(" in p.read_text()

        if unknown := [b for b in v if not is_benchmark(here / f"{b.replace('-', '_')}.py")]:
            known = sorted(p.stem.replace("_", "-") for p in here.glob("*.py") if is_benchmark(p))
            raise ValueError(f"unknown benchmark {', '.join(unknown)} (known: {', '.join(known)})")
        return v
