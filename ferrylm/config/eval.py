"""`eval`: benchmarks, held-out measures, latency, criteria."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from .base import _Section


class EvalConfig(_Section):
    endpoint: str | None = None
    """None: the eval stage starts its own endpoints (fine-tuned, and base when compare_base)."""
    local: bool = False
    """run the models in-process instead of serving them"""
    compare_base: bool = True
    """Also evaluate the base model on everything, and test each difference."""
    few_shot: int = Field(2, ge=0, le=8)
    """With compare_base: also ask the base model every question after this many training examples of the
    same task and language, shown as earlier chat turns (the "base 2-shot" column; 0: not asked; at most
    the 8 the data stage keeps per task and language)."""
    humaneval_limit: int | None = Field(None, gt=0)
    """Run only this many of HumanEval's 164 tasks (None: all; with subset_seed a seeded draw)."""
    benchmarks: list[str] = Field(default_factory=lambda: ["humaneval", "own-code"])
    """Benchmarks run on every model, each a module of ferrylm/eval/tasks (benchmark.py there): "humaneval" (Python),
    "humaneval-x" (the same tasks in the languages below, compiled and run in the sandbox; data from
    humaneval_x_dir or $FERRYLM_HUMANEVAL_X), "own-code" (executed Pass@1 on the held-out repositories' own
    functions: each function whose own tests are proven to check it, eval/repo/tasks.py, becomes a task, scored by
    running those tests in the sandbox)."""
    humaneval_x_languages: list[Literal["cpp", "java", "go", "rust"]] = Field(
        default_factory=lambda: ["cpp", "java", "go", "rust"]
    )
    """benchmarks with humaneval-x: the languages run."""
    humaneval_x_dir: str | None = None
    """Local copy of HumanEval-X (None: $FERRYLM_HUMANEVAL_X)."""
    humaneval_x_limit: int | None = Field(None, gt=0)
    """Tasks per HumanEval-X language (None: all 164)."""
    subset_seed: int | None = None
    """With a seed the limits above take that many tasks drawn at random (the same task numbers in every
    language) instead of the first ones; the report says "N of 164"."""
    bleu_limit: int = Field(64, gt=0)
    """Held-out examples per task (explain, generate) generated and scored for each model."""
    heldout_loss: bool = True
    """each model's loss per held-out example (in-process)"""
    repo_task_limit: int = Field(40, gt=0)
    """own-code: at most this many tasks per held-out repository (a training repository's held-out functions
    are all asked: data.holdout_functions bounds them)."""
    repo_task_cache: bool = True
    """own-code: the tasks found are kept under $XDG_CACHE_HOME/ferrylm/repo-tasks, keyed by the repository's
    files, its test command and requirements, the functions asked for and the finder's code, so an eval of the
    same code after another fine-tune reads them back instead of running every test suite again."""
    repo_context: Literal["file", "none"] = "file"
    """How repository tasks are asked: "file" shows the function's own file with its body cut out (imports,
    constants, siblings, the enclosing class), as a team's assistant sees it; "none" the signature and doc
    comment alone. Every model is asked the same way; the report names the setting."""
    repo_context_tokens: int = Field(768, gt=0)
    """repo_context=file: the file around the function is trimmed to about this many tokens (3 characters each),
    so the question, 2 shown examples (384 tokens each at most) and the reply fit serve.max_model_len (2,048)."""
    repo_context_outline: float = Field(0.0, ge=0, le=0.5)
    """repo_context=file: this share of the window (after the imports) outlines the lines it leaves out
    (Python: def and class lines, `self.x =` and module-level assignments, nearest the function first), so a
    body can name what its file defines far from it. Keep it at data.file_context_outline. 0: off, the default:
    at 0.3 both models passed fewer Python tasks of the team corpus (studies/python_own_code)."""
    retrieval_k: int = Field(4, ge=0)
    """Repository tasks: two more columns, the base and the fine-tuned model each shown this many functions
    retrieved (BM25 over the data stage's library of the training functions: a held-out function's own repository
    only, a held-out repository's task the training repositories'; never the task's own function nor a near
    duplicate of its body) above the same question.
    0 = off."""
    retrieval_tokens: int = Field(512, gt=0)
    """retrieval_k: the retrieved functions fill at most about this many tokens (3 characters each), whole
    functions in rank order, on top of repo_context_tokens."""
    artifacts: list[Literal["w4a16", "fp8"]] = Field(default_factory=list)
    """Exported quantized artifacts (export.vllm_quantize) asked the general benchmarks too (HumanEval,
    HumanEval-X; not the held-out examples or own code): a column each, "fine-tuned (w4a16)", with McNemar's
    test against the fine-tuned model, served as that one is (in-process on a GPU: the engine on the artifact's
    own 4-bit integers, as its backend serves it; on a CPU: its weights dequantized)."""
    max_new_tokens: int = Field(768, gt=0)
    """Tokens generated per benchmark task or held-out example: room for a 40-line body after a reply that repeats
    the function's signature and doc comment, as a 1.5B often does (a reply stops at its closed code block)."""
    latency_new_tokens: int = Field(512, gt=0)
    """Tokens generated in each latency run (the seed's 512-token criterion)."""
    concurrency: int = Field(8, gt=0)
    """Requests in flight at once while generating for benchmarks and held-out examples."""
    exec_timeout_s: float = Field(10.0, gt=0)
    """Wall-clock limit per generated program in the sandbox (compilation included)."""
    exec_memory_mb: int = Field(1024, gt=0)
    """Address-space limit per generated program in the sandbox."""
    exec_workers: int = Field(2, gt=0)
    """Programs run at once in the sandbox (in all: on a GPU, several models' replies share them)."""
    exec_unconfined: bool = False
    """Generated programs run in a bubblewrap sandbox; without bubblewrap the stage refuses unless this is set,
    and the report then records "unconfined" beside every result."""
    prompt_mode: Literal["chat", "base"] = "chat"
    """"chat": tasks as chat messages, the code taken from the reply; "base": the raw prompt completed."""
    samples_per_task: int = Field(1, gt=0)
    """n; temperature 0 with n=1 is greedy"""
    temperature: float = Field(0.0, ge=0)
    """Sampling temperature (0: greedy)."""
    pass_k: list[int] = Field(default_factory=lambda: [1, 10, 100])
    """reported where k <= n"""
    latency_runs: int = Field(3, ge=0)
    """Latency requests per model at concurrency 1 (p50/p95/p99 over them); 0: latency not measured."""
    latency_concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4])
    """Concurrency levels of the latency sweep."""
    criteria: str = "seed"
    """shipped set name or a YAML path"""
    enforce_gates: bool = True
    """exit non-zero when a gating criterion fails"""

    @field_validator("benchmarks")
    @classmethod
    def _known_benchmarks(cls, v: list[str]) -> list[str]:
        # Without importing the eval package (torch, the sandbox) just to read a config.
        here = Path(__file__).parent.parent / "eval" / "tasks"

        def is_benchmark(p: Path) -> bool:
            return p.stem != "benchmark" and p.is_file() and "\ndef tracks(" in p.read_text()

        if unknown := [b for b in v if not is_benchmark(here / f"{b.replace('-', '_')}.py")]:
            known = sorted(p.stem.replace("_", "-") for p in here.glob("*.py") if is_benchmark(p))
            raise ValueError(f"unknown benchmark {', '.join(unknown)} (known: {', '.join(known)})")
        return v
