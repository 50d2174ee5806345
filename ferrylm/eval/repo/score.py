"""A model's bodies for repository tasks, each spliced into a copy of its repository and run against the
task's tests in the jail: `ferrylm eval score --benchmark repo --tasks T --samples S`.

A sample is {"task_id", "completion"}: the completion is read as models write it (a fenced block or
not, the body alone or the whole function with its signature and doc comment repeated). Pass = every
test of the task passes within its time limit. The repository must be as it was when the tasks were
found (its file's hash is checked): otherwise the tasks are stale and scoring stops with one line.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ...prompts import extract_code
from ..tasks.benchmark import summarise
from ..tasks.brace_replies import completion_from_reply
from ..tasks.humaneval import SamplesError
from . import runner


def read_tasks(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--tasks: {path} does not exist")
    tasks = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
                row["task_id"], row["file"], row["start"], row["end"], row["command"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise SamplesError(
                    f"{path}:{n}: not a repository task (write them with ferrylm eval repo-tasks)"
                ) from None
            tasks.append(row)
    if not tasks:
        raise SamplesError(f"{path}: no tasks")
    return tasks


def _relative_indent(task: dict) -> str:
    """The original body's indentation beyond the def line's."""
    first = next((ln for ln in task["body"].splitlines() if ln.strip()), task["indent"] + "    ")
    return first[len(task["indent"]) : len(first) - len(first.lstrip())] or "    "


def python_body(task: dict, reply: str) -> str:
    """The body a reply gives, indented as the function's body stands in its file."""
    code = extract_code(reply).replace("\r\n", "\n")
    name = task["name"].rsplit(".", 1)[-1]
    m = re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", code, re.M)
    if m:  # the whole function: its body, past a doc string, after the imports the reply wrote above it
        above = _imports(code[: m.start()])
        chunk = textwrap.dedent(code[code.rfind("\n", 0, m.start()) + 1 :])
        try:
            node = next(n for n in ast.parse(chunk).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
            # past the doc string (comments after it stay), else from the first statement
            start = (
                node.body[0].end_lineno if ast.get_docstring(node) and len(node.body) > 1 else node.body[0].lineno - 1
            )
            code = "\n".join(
                above + textwrap.dedent("\n".join(chunk.splitlines()[start : node.end_lineno])).splitlines()
            )
        except (SyntaxError, StopIteration):
            pass  # scored as written: the tests will say
    lines = textwrap.dedent(code).strip("\n").splitlines()
    prefix = task["indent"] + _relative_indent(task)
    return "".join((prefix + ln if ln.strip() else "") + "\n" for ln in lines) or f"{prefix}pass\n"


def _imports(text: str) -> list[str]:
    """The import statements a reply wrote at its top level (above its function): they travel with the
    body as its first lines, since the name they bind is what the body uses."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return [ln.strip() for ln in text.splitlines() if re.match(r"(?:import|from)\s+[\w.]+", ln)]
    return [
        ast.unparse(n)
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom)) and getattr(n, "module", None) != "__future__"
    ]


_GO_IMPORT = re.compile(r'^import\s*(?:\(([^)]*)\)|((?:[\w.]+\s+)?"[^"]+"))', re.M)
_GO_MARK = "// ferrylm:import "  # a reply's import, carried in its body to the file's import block


def go_body(task: dict, reply: str) -> str:
    """What follows the prompt's opening brace: the body, its closing brace, and any helpers after it;
    the imports the reply wrote above its function ride along as marked comment lines (spliced_text
    moves them into the file)."""
    reply = reply.replace("\r\n", "\n")
    body = completion_from_reply({"declaration": task["prompt"]}, reply)
    code = extract_code(reply)
    head = code[: code.find("func ")] if "func " in code else ""
    specs = [
        ln.strip()
        for m in _GO_IMPORT.finditer(head)
        for ln in (m.group(1) or m.group(2)).splitlines()
        if ln.strip() and not ln.strip().startswith("//")
    ]
    # only what the body uses: Go refuses an unused import (a dropped usage example's "fmt")
    used = [sp for sp in specs if re.search(rf"\b{re.escape(_go_name(sp))}\.", body)]
    return "".join(f"\t{_GO_MARK}{spec}\n" for spec in used) + body


def _go_name(spec: str) -> str:
    """The name an import spec binds: its alias, else its path's last element."""
    alias, _, path = spec.rpartition(" ")
    return alias.strip() or path.strip('"').rsplit("/", 1)[-1]


def _go_imports_moved(text: str) -> str:
    """The marked imports out of the body and into the file, after its package clause, where the file
    does not import that path already (Go refuses an import declared twice)."""
    marks = re.findall(rf"^\s*{re.escape(_GO_MARK)}(.+)\n", text, re.M)
    if not marks:
        return text
    text = re.sub(rf"^\s*{re.escape(_GO_MARK)}.+\n", "", text, flags=re.M)
    have = set(re.findall(r'"([^"]+)"', "".join(m.group(0) for m in _GO_IMPORT.finditer(text))))
    new = [spec for spec in dict.fromkeys(marks) if spec.split('"')[1] not in have]
    package = re.search(r"^package\s+\w+.*\n", text, re.M)
    if not new or not package:
        return text
    return text[: package.end()] + "".join(f"import {spec}\n" for spec in new) + text[package.end() :]


def task_file(task: dict) -> bytes:
    """The task's file as it was when the task was found (its offsets count these bytes); a changed file
    stops with one line: its tasks are stale."""
    path = Path(task["repo"]) / task["file"]
    raw = path.read_bytes()
    if hashlib.sha256(raw).hexdigest() != task["file_sha256"]:
        raise SamplesError(f"{path} changed since its tasks were found: find them again (ferrylm eval repo-tasks)")
    return raw


def spliced_text(task: dict, body: str) -> str:
    """The task's file with `body` in place of the original one."""
    raw = task_file(task)
    text = (raw[: task["start"]] + body.encode() + raw[task["end"] :]).decode()
    return _go_imports_moved(text) if task.get("language") == "go" else text


def body_from_reply(task: dict, reply: str) -> str:
    """The body a reply gives, in its language's reading."""
    return python_body(task, reply) if task["language"] == "python" else go_body(task, reply)


def spliced(task: dict, reply: str) -> str:
    """The task's file with the reply's body in place of the original."""
    return spliced_text(task, body_from_reply(task, reply))


def execute(
    tasks: list[dict], samples: list[tuple[str, str]], workers: int = 2, unconfined: bool = False
) -> list[dict]:
    """One result per sample, in order: {"task_id", "passed", "result", "isolation"}."""
    by_id = {t["task_id"]: t for t in tasks}
    texts = [spliced(by_id[t], c) for t, c in samples]  # stale tasks stop here, before anything runs
    results: list[dict | None] = [None] * len(samples)
    for repo in sorted({by_id[t]["repo"] for t, _ in samples}):
        mine = [i for i, (t, _) in enumerate(samples) if by_id[t]["repo"] == repo]
        longest = max(by_id[samples[i][0]]["timeout_s"] for i in mine)
        deps = next((by_id[samples[i][0]].get("test_deps") for i in mine), None)
        with runner.sandbox(Path(repo), longest, workers, unconfined, deps) as box:

            def one(i: int) -> dict:
                task = by_id[samples[i][0]]
                out = runner.run(box, Path(repo), task["command"], {task["file"]: texts[i]}, task["timeout_s"])
                return {
                    "task_id": task["task_id"],
                    "passed": out.status == "passed",
                    "result": out.status,
                    "isolation": out.isolation,
                }

            with ThreadPoolExecutor(workers) as pool:
                for i, r in zip(mine, pool.map(one, mine)):
                    results[i] = r
    return results


def score(
    tasks_path: str | Path,
    samples_path: str | Path,
    workers: int = 2,
    unconfined: bool = False,
    ks: tuple[int, ...] = (1, 10, 100),
) -> dict:
    from ..tasks.score import read_samples

    tasks = read_tasks(tasks_path)
    path = Path(samples_path)
    samples = read_samples(path, {t["task_id"] for t in tasks})
    results = execute(tasks, samples, workers, unconfined)
    out = path.with_name(path.name + "_results.jsonl")
    out.write_text("".join(json.dumps({**r, "completion": c}) + "\n" for r, (_, c) in zip(results, samples)))
    summary = summarise(results, list(ks))
    summary.pop("per_task")
    return {"benchmark": "repo", **summary, "results": str(out)}
