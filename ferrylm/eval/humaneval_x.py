"""HumanEval-X: the 164 HumanEval tasks hand-translated to other languages (THUDM/humaneval-x,
Apache-2.0), executed in the sandbox like HumanEval.

Each language is a `Language`: how its file is named, how a completion becomes a program
(declaration + completion + the published test), and the steps that compile and run it. The
published test's entry point is renamed and called from a harness that writes the run's token on
fd 3 after it returns, so an early exit with status 0 fails as it does in Python.

The data is read from a local copy (`humaneval_<lang>.jsonl.gz` files): `eval.humaneval_x_dir`, or
the environment variable FERRYLM_HUMANEVAL_X.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..data.render import code_block_closed, extract_code, user_message
from ..errors import FerryError

ENV = "FERRYLM_HUMANEVAL_X"


class HumanEvalXMissing(FerryError, FileNotFoundError):
    """No local copy of the data set; one line saying how to point at one."""


_CPP_HARNESS = """
#include <cstdlib>
#include <cstring>
#include <unistd.h>
int main() {
    ferry_tests_main();
    const char *token = std::getenv("FERRY_TOKEN");
    if (token) { ssize_t n = write(3, token, std::strlen(token)); (void)n; }
    return 0;
}
"""


# The reference harness's standard headers, put before a prompt that lacks them (CodeGeeX's
# evaluate_humaneval_x.py); the program is then headers + prompt + completion + test.
_CPP_HEADERS = ("#include<stdlib.h>", "#include<algorithm>", "#include<math.h>", "#include<stdio.h>",
                "#include<vector>", "#include<string>", "#include<climits>", "#include<cstring>",
                "#include<iostream>", "#include<cassert>")


def _cpp_program(problem: dict, completion: str) -> dict:
    test, n = re.subn(r"\bint\s+main\s*\(\s*\)", "int ferry_tests_main()", problem["test"], count=1)
    if not n:
        raise ValueError(f"{problem['task_id']}: its test has no `int main()`")
    headers = "".join(h + "\n" for h in _CPP_HEADERS if h not in problem["prompt"])
    source = headers + problem["prompt"] + completion + "\n" + test + _CPP_HARNESS
    flags = ["-lcrypto"] if "openssl/" in source else []
    return {"files": {"main.cpp": source},
            "steps": [["g++", "-std=c++17", "-O0", "-w", "main.cpp", "-o", "main", *flags], ["./main"]]}


_JAVA_HARNESS = """
public class Main {
    public static void main(String[] args) throws Exception {
        FerryTests.main(args);
        String token = System.getenv("FERRY_TOKEN");
        if (token != null) {   // fd 3 is a pipe of the worker's: reopening it by path is not allowed to this uid
            java.io.FileDescriptor fd = new java.io.FileDescriptor();
            java.lang.reflect.Field f = java.io.FileDescriptor.class.getDeclaredField("fd");
            f.setAccessible(true);
            f.setInt(fd, 3);
            try (java.io.FileOutputStream out = new java.io.FileOutputStream(fd)) { out.write(token.getBytes()); }
        }
    }
}
"""
# The JVM reserves far more address space than it uses; these keep it (javac's too) under the
# sandbox's memory limit and its thread count under the process limit.
_JVM = ["-Xmx256m", "-Xss4m", "-XX:ReservedCodeCacheSize=64m", "-XX:MaxMetaspaceSize=128m",
        "-XX:CompressedClassSpaceSize=64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1"]


def _java_program(problem: dict, completion: str) -> dict:
    test, n = re.subn(r"public\s+class\s+Main\b", "class FerryTests", problem["test"], count=1)
    if not n:
        raise ValueError(f"{problem['task_id']}: its test has no `public class Main`")
    javac, java = (os.path.realpath(shutil.which(t) or t) for t in ("javac", "java"))   # not via /etc/alternatives
    env = ["/usr/bin/env", "MALLOC_ARENA_MAX=2"]     # glibc's per-thread arenas would take the address space
    return {"files": {"Main.java": problem["prompt"] + completion + "\n" + test + _JAVA_HARNESS},
            "steps": [[*env, javac, *(f"-J{o}" for o in _JVM), "-nowarn", "-encoding", "UTF-8", "Main.java"],
                      [*env, java, *_JVM, "--add-opens", "java.base/java.io=ALL-UNNAMED", "-cp", ".", "Main"]]}


@dataclass(frozen=True)
class Language:
    name: str           # as in the data set's file names
    tool: str           # the toolchain binary whose absence means "not measured"
    program: Callable[[dict, str], dict]
    fence: str          # the code block's language tag, as the data stage renders training pairs
    base_stops: tuple[str, ...]   # base mode: where a completion of the prompt's function ends


LANGUAGES = {"cpp": Language("cpp", "g++", _cpp_program, "cpp", ("\n}\n",)),
             "java": Language("java", "javac", _java_program, "java", ("\n    }\n",))}


def _entry_point(problem: dict) -> str:
    """The function the prompt opens: the last `name(...) {` of the declaration."""
    names = re.findall(r"(\w+)\s*\([^;{}]*\)\s*\{", problem["declaration"])
    return names[-1] if names else ""


def completion_from_reply(problem: dict, reply: str) -> str:
    """What follows the prompt (which ends inside the opened function): the body and the function's
    closing brace. The model may repeat the signature (its body is taken) or leave the brace out."""
    code = extract_code(reply)
    name = _entry_point(problem)
    m = re.search(rf"\b{re.escape(name)}\s*\([^;{{}}]*\)\s*\{{", code) if name else None
    if m:
        code = code[m.end():]
    missing = 1 + code.count("{") - code.count("}")   # the prompt left one brace open
    return code.rstrip() + "\n" + "}\n" * max(missing, 0)


def generate(generator, language: str, problems: list[dict], max_tokens: int, concurrency: int,
             mode: str = "chat", n: int = 1, temperature: float = 0.0, what: str = "") -> list[tuple[str, str]]:
    """n completions per problem, as (task_id, completion), the way humaneval.generate does it."""
    from .humaneval import for_each_problem

    lang = LANGUAGES[language]

    def one(p: dict) -> list[tuple[str, str]]:
        if mode == "base":
            texts = generator.complete(p["prompt"], max_tokens, temperature, n=n, stop=list(lang.base_stops))
            return [(p["task_id"], t + "\n}\n") for t in texts]
        replies = generator.chat([{"role": "user", "content": user_message(p["prompt"], lang.fence)}], max_tokens,
                                 temperature, n=n, until=code_block_closed)
        return [(p["task_id"], completion_from_reply(p, r)) for r in replies]

    return for_each_problem(problems, one, concurrency, what or f"HumanEval-X {language} generation")


def data_dir(configured: str | None = None) -> Path:
    where = configured or os.environ.get(ENV)
    if not where:
        raise HumanEvalXMissing(f"HumanEval-X: no local copy given; download THUDM/humaneval-x's "
                                f"humaneval_<lang>.jsonl.gz files and set eval.humaneval_x_dir (or {ENV}) to their folder")
    return Path(where)


def load_problems(language: str, configured: str | None = None, limit: int | None = None,
                  seed: int | None = None) -> list[dict]:
    path = data_dir(configured) / f"humaneval_{language}.jsonl.gz"
    if not path.is_file():
        raise HumanEvalXMissing(f"HumanEval-X: {path} does not exist (eval.humaneval_x_dir / {ENV})")
    with gzip.open(path, "rt") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    from .humaneval import select

    return select(problems, limit, seed)


def missing_tool(language: str) -> str | None:
    """The toolchain binary a language needs that this machine lacks, or None."""
    tool = LANGUAGES[language].tool
    return None if shutil.which(tool) else tool


def execute_samples(language: str, problems: list[dict], samples: list[tuple[str, str]], **kw) -> list[dict]:
    by_id = {p["task_id"]: p for p in problems}
    return execute(language, [by_id[t] for t, _ in samples], [c for _, c in samples], **kw)


def execute(language: str, problems: list[dict], completions: list[str], timeout_s: float = 20.0,
            memory_mb: int = 1024, workers: int = 2, unconfined: bool = False, what: str = "") -> list[dict]:
    """One result per (problem, completion), in order: {"task_id", "passed", "result", "isolation"}."""
    from .humaneval import run_programs

    lang = LANGUAGES[language]
    return run_programs([p["task_id"] for p in problems], [lang.program(p, c) for p, c in zip(problems, completions)],
                        timeout_s, memory_mb, workers, unconfined, what or f"HumanEval-X {language} execution")
