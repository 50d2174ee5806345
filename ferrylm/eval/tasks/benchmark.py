"""The seam every executed code benchmark goes through.

A benchmark is a module of this package named after it ("humaneval-x" → `humaneval_x.py`) with
`tracks(e, inputs) -> list[Track]`, given the eval config and the data stage's outputs (own_code.py reads
the repositories there): one track per language it measures, holding its
selected tasks and how a task becomes a prompt, a reply a completion, and a completion a program
for the sandbox (or why that language cannot be measured here). The stage generates every track's
tasks through one pool (a few tasks per language would otherwise leave a server's batch idle),
executes each track in the sandbox and summarises it; the criteria and the report read the
summaries, never a benchmark's name. A new benchmark or language is one module plus its data.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from math import comb
from pathlib import Path

from ...prompts import code_block_closed, user_message
from ..execution.sandbox import Sandbox
from ..heldout.few_shot import with_shots
from ..progress import Progress, pool_map


@dataclass
class Track:
    benchmark: str  # as eval.benchmarks names it
    language: str
    title: str  # how the report names it: "HumanEval-X cpp"
    key: str  # the criterion its Pass@1 feeds: "pass_at_1_cpp"
    problems: list[dict] = field(default_factory=list)  # the selected tasks
    total: int = 0  # the data set's size (the problems may be a seeded subset of it)
    prompt: Callable[[dict], str] = lambda p: p["prompt"]  # what the model continues
    question: Callable[[dict], str] | None = None  # the chat question, where not the instruction around prompt
    from_reply: Callable[[dict, str], str] | None = None  # chat reply -> completion
    base_stops: tuple[str, ...] = ()  # base mode: where a completion ends ...
    from_base: Callable[[dict, str], str] = lambda p, text: text  # ... and what closes it again
    program: Callable[[dict, str], object] | None = None  # (problem, completion) -> what the sandbox runs
    binds: tuple[str, ...] = ()  # directories the programs read (bound read-only)
    timeout_s: float = 10.0
    limits: dict | None = None  # the sandbox's limits where they differ from eval.exec_memory_mb's
    not_measured: str | None = None  # why this language cannot be measured here
    canary: list[str] = field(default_factory=list)  # tasks left out: the training's canary chose on them
    form: str = "body"  # without a question of its own: asked for the body or the whole function (asked_for)
    gave_none: dict[str, str] = field(default_factory=dict)  # own code: repositories that gave no task, and why
    ran_with: dict[str, str] = field(default_factory=dict)  # own code: repository -> the toolchain its tests ran with

    def ask(self, p: dict) -> str:
        """The chat question for task `p`: the track's own, else the prompt in the fine-tune's instruction."""
        return self.question(p) if self.question else user_message(self.prompt(p), self.language, self.form)


def module(name: str):
    """The benchmark's module; an unknown name is refused when the config is read."""
    return importlib.import_module(f"{__package__}.{name.replace('-', '_')}")


def tracks(e, inputs: dict) -> list[Track]:
    """Every track of every benchmark `e.benchmarks` names (the team's own code among them: own-code), in that
    order. A benchmark whose data is missing raises here, before any model is loaded or server started."""
    names = dict.fromkeys(e.benchmarks)
    return [t for name in names for t in module(name).tracks(e, inputs)]


def with_tasks(tracks: list[Track]) -> tuple[list[Track], dict[str, str]]:
    """(the tracks, less own code's where no repository gave a task; those repositories and why): the report
    names them without a track, column or criterion that could never be measured."""
    empty = {id(t) for t in tracks if not t.problems and t.gave_none}
    none = {r: why for t in tracks if id(t) in empty for r, why in t.gave_none.items()}
    return [t for t in tracks if id(t) not in empty], none


def asked_for(tracks: list[Track], form: str) -> list[Track]:
    """Each track that has no question of its own asks for the body or the whole function (the form the
    fine-tune was trained to answer in: the data stage's answer_form); every model is asked alike."""
    for t in tracks:
        t.form = form
    return tracks


def for_each_problem(items: list, one, concurrency: int, what: str) -> list:
    """`one(item)` → a list, over a pool, with progress, flattened in order."""
    progress = Progress(what, len(items))
    return [s for group in pool_map(progress.wrap(one), items, concurrency) for s in group]


def generate(
    generator,
    tracks: list[Track],
    max_tokens: int,
    concurrency: int,
    mode: str = "chat",
    n: int = 1,
    temperature: float = 0.0,
    what: str = "generation",
    shots=None,
) -> list[list[tuple[str, str]]]:
    """n completions per task of every track through one pool, as one [(task_id, completion), ...]
    per track. chat: the prompt in the fine-tune's instruction, the first code block of the reply
    (generation stops once it closes); base: the raw prompt, cut at the track's stop sequences.
    `shots` (few_shot.FewShot): training examples of the track's language shown first."""

    def one(item: tuple[int, dict]) -> list[tuple[int, str, str]]:
        i, p = item
        t = tracks[i]
        if mode == "base":
            prompt = (shots.prefix(t.language) if shots else "") + t.prompt(p)
            texts = generator.complete(prompt, max_tokens, temperature, n=n, stop=list(t.base_stops))
            return [(i, p["task_id"], t.from_base(p, text)) for text in texts]
        question = [{"role": "user", "content": t.ask(p)}]
        replies = generator.chat(
            with_shots(shots, question, "generate", t.language), max_tokens, temperature, n=n, until=code_block_closed
        )
        return [(i, p["task_id"], t.from_reply(p, r)) for r in replies]

    items = [(i, p) for i, t in enumerate(tracks) for p in t.problems]
    out: list[list[tuple[str, str]]] = [[] for _ in tracks]
    for i, task_id, completion in for_each_problem(items, one, concurrency, what):
        out[i].append((task_id, completion))
    return out


def run_programs(
    task_ids: list[str],
    programs: list,
    timeout_s: float,
    memory_mb: int,
    workers: int,
    unconfined: bool = False,
    what: str = "execution",
    binds: tuple[str, ...] = (),
    limits: dict | None = None,
    gate=None,
) -> list[dict]:
    """Each program (Python source, or a compiled program for the sandbox) in the sandbox, with progress;
    one {"task_id", "passed", "result", "isolation"} per program, in order. `gate`: a semaphore shared with
    other executions, held by each program while it runs."""
    progress = Progress(what, len(programs))
    with Sandbox(
        workers, timeout_s, **({"memory_mb": memory_mb} | (limits or {})), unconfined=unconfined, binds=binds
    ) as box:
        outcomes = pool_map(progress.wrap(gated(box.run, gate)), programs, workers)
    return [
        {"task_id": t, "passed": o.status == "passed", "result": o.status, "isolation": o.isolation}
        for t, o in zip(task_ids, outcomes)
    ]


def execute(
    track: Track,
    samples: list[tuple[str, str]],
    memory_mb: int,
    workers: int,
    unconfined: bool = False,
    what: str = "execution",
    gate=None,
) -> list[dict]:
    """Each (task_id, completion) of the track run in the sandbox; one result per sample, in order."""
    by_id = {p["task_id"]: p for p in track.problems}
    return run_programs(
        [t for t, _ in samples],
        [track.program(by_id[t], c) for t, c in samples],
        track.timeout_s,
        memory_mb,
        workers,
        unconfined,
        what,
        binds=track.binds,
        limits=track.limits,
        gate=gate,
    )


def gated(run, gate):
    """`run`, holding `gate` while it runs (as it is without one)."""
    if gate is None:
        return run

    def held(program):
        with gate:
            return run(program)

    return held


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of pass@k from n samples of which c passed (Chen et al., 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def summarise(results: list[dict], ks: list[int], of: int | None = None) -> dict:
    """pass@k for each k (mean over tasks), and per-task pass counts; `of`: the data set's size, kept
    when the tasks were a subset of it."""
    per_task: dict[str, list[int]] = {}
    for r in results:
        n_c = per_task.setdefault(r["task_id"], [0, 0])
        n_c[0] += 1
        n_c[1] += r["passed"]
    out = {
        "tasks": len(per_task),
        "samples": len(results),
        "passed_samples": sum(r["passed"] for r in results),
        "per_task": {t: c / n for t, (n, c) in per_task.items()},
        "isolation": sorted({r.get("isolation", "none") for r in results}),
    }
    if of is not None and of > len(per_task):
        out["subset_of"] = of
    n_min = min((n for n, _ in per_task.values()), default=0)
    for k in ks:
        if k <= n_min:
            out[f"pass@{k}"] = sum(pass_at_k(n, c, k) for n, c in per_task.values()) / len(per_task)
    return out


def asked(t: Track, p: dict, mode: str) -> str:
    """What the model was shown for a task: its chat question where the track words its own or asks for the
    whole function, else the prompt it continued or completed."""
    return t.ask(p) if mode == "chat" and (t.question or t.form != "body") else t.prompt(p)


def file_label(label: str) -> str:
    """A model's label as file names carry it ("base 2-shot" -> "base-2-shot")."""
    return label.replace(" ", "-")


def results_file(benchmark: str, language: str, label: str) -> str:
    """Where one model's samples of one track are kept (in the eval stage's directory)."""
    return f"{benchmark.replace('-', '_')}_{language}_{file_label(label)}.jsonl"


def replies_file(benchmark: str, language: str, label: str) -> str:
    """Where one model's replies to one track are kept as generated, before execution."""
    return results_file(benchmark, language, label).removesuffix(".jsonl") + ".replies.jsonl"


def measure(generator, tracks: list[Track], e, out: Path, label: str, shots=None, later=None):
    """Every track through `generator` (shown `shots` first, when given): one summary per track, named
    by its benchmark, language, title and criterion key; per-sample results in
    `<benchmark>_<language>_<label>.jsonl`. `later`: given, the replies' execution is handed to it
    (`later(fn)` runs `fn(gate)` and returns what stands for its result; each program holds the gate, a
    semaphore, while it runs) while the caller goes on."""
    live = [t for t in tracks if t.not_measured is None and t.problems]
    samples = (
        generate(
            generator,
            live,
            e.max_new_tokens,
            e.concurrency,
            e.prompt_mode,
            e.samples_per_task,
            e.temperature,
            what=f"[{label}] generation, {', '.join(t.title for t in live)}",
            shots=shots,
        )
        if live
        else []
    )
    done = {id(t): s for t, s in zip(live, samples)}
    for t in live:  # the replies before they run: a run stopped in execution is scored anywhere (`ferrylm eval score`)
        with open(out / replies_file(t.benchmark, t.language, label), "w") as fh:
            fh.writelines(json.dumps({"task_id": i, "completion": c}) + "\n" for i, c in done[id(t)])
    run = partial(scored, tracks, done, e, out, label)
    return later(run) if later else run(None)


def scored(tracks: list[Track], done: dict, e, out: Path, label: str, gate) -> list[dict]:
    """measure()'s summaries: each track's replies (`done`, by the track's id) executed and written (also replies
    read back from their file, executed where a run stopped before they ran)."""
    summaries = []
    for t in tracks:
        head = {"benchmark": t.benchmark, "language": t.language, "title": t.title, "key": t.key}
        if id(t) not in done:
            summaries.append({**head, "not_measured": t.not_measured or "no tasks"})
            continue
        results = execute(
            t,
            done[id(t)],
            e.exec_memory_mb,
            e.exec_workers,
            e.exec_unconfined,
            what=f"[{label}] {t.title} execution",
            gate=gate,
        )
        by_id = {p["task_id"]: p for p in t.problems}
        with open(out / results_file(t.benchmark, t.language, label), "w") as fh:
            for r, (task_id, completion) in zip(results, done[id(t)]):
                p = by_id[task_id]  # the prompt and reference too: a reader (or reviewer) needs nothing else
                fh.write(
                    json.dumps(
                        {
                            **r,
                            "completion": completion,
                            "prompt": asked(t, p, e.prompt_mode),
                            "reference": p.get("canonical_solution"),
                        }
                    )
                    + "\n"
                )
        summaries.append(
            {**head, **summarise(results, e.pass_k, of=t.total)}
            | ({"canary_left_out": t.canary} if t.canary else {})
            | ({"gave_none": t.gave_none} if t.gave_none else {})
            | ({"ran_with": t.ran_with} if t.ran_with else {})
        )
    return summaries
