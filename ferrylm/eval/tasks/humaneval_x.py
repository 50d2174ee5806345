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

import functools
import gzip
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...errors import FerryError
from ..execution import hx_libs
from ..execution.sandbox import past_alternatives
from ..replies.braces import completion_from_reply
from .benchmark import Track, run_programs
from .humaneval import select

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
_CPP_HEADERS = (
    "#include<stdlib.h>",
    "#include<algorithm>",
    "#include<math.h>",
    "#include<stdio.h>",
    "#include<vector>",
    "#include<string>",
    "#include<climits>",
    "#include<cstring>",
    "#include<iostream>",
    "#include<cassert>",
)


_C_SKIP = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)


def _returning(code: str, start: int) -> str:
    """`code` with `return 0;` before the brace that closes the function whose body opens at or after
    `start`: a renamed `main` has no implicit return, and flowing off its end is undefined (GCC 13
    and later trap there at -O0). Strings, characters and comments are skipped when counting."""
    depth, i = 0, start
    while i < len(code):
        if m := _C_SKIP.match(code, i):
            i = m.end()
            continue
        if code[i] == "{":
            depth += 1
        elif code[i] == "}" and depth:
            depth -= 1
            if not depth:
                return code[:i] + "    return 0;\n" + code[i:]
        i += 1
    raise ValueError("its `int main()` has no closing brace")


def _cpp_program(problem: dict, completion: str, libs: str | None = None) -> dict:
    m = re.search(r"\bint\s+main\s*\(\s*\)", problem["test"])
    if not m:
        raise ValueError(f"{problem['task_id']}: its test has no `int main()`")
    renamed = problem["test"][: m.start()] + "int ferry_tests_main()" + problem["test"][m.end() :]
    try:
        test = _returning(renamed, m.start())
    except ValueError as e:
        raise ValueError(f"{problem['task_id']}: {e}") from None
    headers = "".join(h + "\n" for h in _CPP_HEADERS if h not in problem["prompt"])
    source = headers + problem["prompt"] + completion + "\n" + test + _CPP_HARNESS
    flags = ["-lcrypto"] if "openssl/" in source else []
    return {
        "files": {"main.cpp": source},
        "steps": [["g++", "-std=c++17", "-O0", "-w", "main.cpp", "-o", "main", *flags], ["./main"]],
    }


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
# glibc gives each thread of a multi-threaded compiler (javac, rustc's LLVM) its own 64 MB arena
# reservation, and how many it makes depends on contention: rustc took 500 MB to over 1 GB of address
# space for one HumanEval-X program and, on a loaded machine, died of LLVM's "out of memory" under the
# 1 GB limit. Two arenas keep it under 500 MB (tests/eval/tasks/test_humaneval_x.py holds it under 512).
FEW_ARENAS = ["/usr/bin/env", "MALLOC_ARENA_MAX=2"]
# The JVM reserves far more address space than it uses; these keep it (javac's too) under the
# sandbox's memory limit and its thread count under the process limit.
_JVM = [
    "-Xmx256m",
    "-Xss4m",
    "-XX:ReservedCodeCacheSize=64m",
    "-XX:MaxMetaspaceSize=128m",
    "-XX:CompressedClassSpaceSize=64m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:CICompilerCount=1",
]


def _java_program(problem: dict, completion: str, libs: str | None = None) -> dict:
    test, n = re.subn(r"public\s+class\s+Main\b", "class FerryTests", problem["test"], count=1)
    if not n:
        raise ValueError(f"{problem['task_id']}: its test has no `public class Main`")
    javac, java = past_alternatives("javac"), past_alternatives("java")
    return {
        "files": {"Main.java": problem["prompt"] + completion + "\n" + test + _JAVA_HARNESS},
        "steps": [
            [*FEW_ARENAS, javac, *(f"-J{o}" for o in _JVM), "-nowarn", "-encoding", "UTF-8", "Main.java"],
            [*FEW_ARENAS, java, *_JVM, "--add-opens", "java.base/java.io=ALL-UNNAMED", "-cp", ".", "Main"],
        ],
    }


_GO_HARNESS = """
func TestMain(m *testing.M) {
    code := m.Run()
    if token := ferryos.Getenv("FERRY_TOKEN"); code == 0 && token != "" {
        ferryos.NewFile(3, "token").WriteString(token)
    }
    ferryos.Exit(code)
}
"""
# Standard packages a completion may use without importing them (Go rejects unused imports, so only
# those it names are added), as the reference harness does (CodeGeeX's evaluate_humaneval_x.py).
_GO_IMPORTS = ("math", "strings", "fmt", "strconv", "time", "bytes", "regexp", "sort", "math/rand", "crypto/md5")


def _go_program(problem: dict, completion: str, libs: str) -> dict:
    prompt = problem["prompt"].replace(problem["import"], "")
    used = [
        p
        for p in _GO_IMPORTS
        if p not in problem["test_setup"] and re.search(rf"\b{p.split('/')[-1]}\.", problem["declaration"] + completion)
    ]
    source = (
        problem["test_setup"]
        + "".join(f'import "{p}"\n' for p in used)
        + 'import ferryos "os"\n'
        + prompt
        + completion
        + "\n"
        + problem["test"]
        + _GO_HARNESS
    )
    m = hx_libs.GO_MODULE  # the directory the libraries' cache entries were built in
    setup = (
        f"mkdir {m} && cp main_test.go {libs}/go.mod {libs}/go.sum {m}/ && ln -s {libs}/vendor {m}/vendor && "
        f"cp -r {libs}/cache {m}/.cache"
    )
    build = [
        "/usr/bin/env",
        "-C",
        m,
        f"GOCACHE={m}/.cache",
        f"GOPATH={m}/.gopath",
        *hx_libs.GO_ENV,
        hx_libs.GO,
        "test",
        "-c",
        "-vet=off",
        "-o",
        f"{m}/main.test",
        ".",
    ]
    return {
        "files": {"main_test.go": source},
        "steps": [["/bin/sh", "-c", setup], build, [f"{m}/main.test", "-test.count=1"]],
    }


def _rust_program(problem: dict, completion: str, libs: str) -> dict:
    # The published tests are a #[cfg(test)] module for libtest, which has no hook after the last
    # test; they become plain functions that main() calls in order, then writes the token.
    live = re.sub(r"/\*.*?\*/", "", problem["test"], flags=re.S)
    test_fn = r"#\[test\]\s*(?://[^\n]*\n\s*)*fn\s+"  # a line comment may sit between (Rust/50)
    names = re.findall(test_fn + r"(\w+)", live)
    if not names:  # Rust/32's published test is commented out: passing it would check nothing
        return {
            "files": {},
            "steps": [
                [
                    "/bin/sh",
                    "-c",
                    "echo 'the published test has no live #[test] function: nothing checks this task'; exit 1",
                ],
                ["/bin/true"],
            ],
        }
    test = re.sub(test_fn, "pub fn ", live.replace("#[cfg(test)]", ""))
    main = (
        "\nfn main() {\n"
        + "".join(f"    tests::{n}();\n" for n in names)
        + '    if let Ok(token) = std::env::var("FERRY_TOKEN") {\n        use std::io::Write;\n'
        "        use std::os::unix::io::FromRawFd;\n"
        "        let _ = unsafe { std::fs::File::from_raw_fd(3) }.write_all(token.as_bytes());\n    }\n}\n"
    )
    source = _rust_prompt(problem) + completion + "\n" + test + main
    return {
        "files": {"main.rs": source},
        "steps": [
            [
                *FEW_ARENAS,
                hx_libs.RUSTC,
                "--edition",
                "2021",
                "-C",
                "opt-level=0",
                "--cap-lints",
                "allow",
                "-A",
                "warnings",
                "-C",
                "debuginfo=0",
                "-C",
                "strip=debuginfo",
                "-C",
                f"linker={past_alternatives('cc')}",
                "-L",
                f"dependency={libs}/deps",
                *hx_libs.rust_externs(libs),
                "main.rs",
                "-o",
                "main",
            ],
            ["./main"],
        ],
    }


def _rust_prompt(problem: dict) -> str:
    """Rust's published prompt is the doc comment only; the `use` lines and the signature follow it."""
    return problem["prompt"] + problem["declaration"]


def _own_prompt(problem: dict) -> str:
    return problem["prompt"]


@dataclass(frozen=True)
class Language:
    name: str  # as in the data set's file names
    tool: str  # the toolchain binary whose absence means "not measured" (in the sandbox's /usr/bin)
    program: Callable[[dict, str, str | None], dict]  # (problem, completion, libs) -> {"files", "steps"}
    fence: str  # the code block's language tag, as the data stage renders training pairs
    base_stops: tuple[str, ...]  # base mode: where a completion of the prompt's function ends
    prompt: Callable[[dict], str] = _own_prompt  # what the model continues: ends inside the opened function
    libs: Callable[[Path], str] | None = None  # prepares the test libraries (a directory bound read-only)


LANGUAGES = {
    "cpp": Language("cpp", "g++", _cpp_program, "cpp", ("\n}\n",)),
    "java": Language("java", "javac", _java_program, "java", ("\n    }\n",)),
    "go": Language("go", "go", _go_program, "go", ("\n}\n",), libs=hx_libs.go_libs),
    "rust": Language(
        "rust", "rustc", _rust_program, "rust", ("\n}\n",), prompt=_rust_prompt, libs=lambda data: hx_libs.rust_libs()
    ),
}


def _opened(lang: Language, problem: dict) -> int:
    """How many braces the prompt leaves open (1; 2 in Java, whose method is inside `class Solution`)."""
    prompt = lang.prompt(problem)
    return max(1, prompt.count("{") - prompt.count("}"))


def data_dir(configured: str | None = None) -> Path:
    where = configured or os.environ.get(ENV)
    if not where:
        raise HumanEvalXMissing(
            f"HumanEval-X: no local copy given; download THUDM/humaneval-x's "
            f"humaneval_<lang>.jsonl.gz files and set eval.humaneval_x_dir (or {ENV}) to their folder"
        )
    return Path(where)


def load_problems(language: str, configured: str | None = None, limit: int | None = None) -> list[dict]:
    path = data_dir(configured) / f"humaneval_{language}.jsonl.gz"
    if not path.is_file():
        raise HumanEvalXMissing(f"HumanEval-X: {path} does not exist (eval.humaneval_x_dir / {ENV})")
    with gzip.open(path, "rt") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    return problems[:limit] if limit else problems


def unavailable(language: str, configured: str | None = None) -> str | None:
    """Why a language cannot be measured here (its toolchain missing from the sandbox's /usr/bin, or its
    test libraries not preparable), or None."""
    lang = LANGUAGES[language]
    if not shutil.which(lang.tool, path="/usr/bin:/bin"):
        return f"{lang.tool} missing"
    try:
        if lang.libs is not None:
            lang.libs(data_dir(configured))
    except hx_libs.LibsError as e:
        return str(e)
    return None


def tracks(e, inputs: dict | None = None) -> list[Track]:
    """The benchmark seam (benchmark.py): one track per configured language, each feeding its own
    `pass_at_1_<language>` criterion. Missing data raises; a missing toolchain or library makes
    that language "not measured" and the rest still run."""
    out = []
    for name in e.humaneval_x_languages:
        lang = LANGUAGES[name]
        every = load_problems(name, e.humaneval_x_dir)
        t = Track(
            "humaneval-x",
            name,
            f"HumanEval-X {name}",
            f"pass_at_1_{name}",
            prompt=lang.prompt,
            from_reply=lambda p, reply, lang=lang: completion_from_reply(p, reply, _opened(lang, p)),
            base_stops=lang.base_stops,
            from_base=lambda p, text, lang=lang: text + "\n}\n" * _opened(lang, p),
            timeout_s=max(e.exec_timeout_s, 20.0),
        )  # a compile step comes first
        t.not_measured = unavailable(name, e.humaneval_x_dir)
        if not t.not_measured:
            libs = lang.libs(data_dir(e.humaneval_x_dir)) if lang.libs is not None else None  # cached: prepared above
            t.problems, t.total = select(every, e.humaneval_x_limit, e.subset_seed), len(every)
            t.program, t.binds = functools.partial(lang.program, libs=libs), (libs,) if libs else ()
        out.append(t)
    return out


def execute(
    language: str,
    problems: list[dict],
    completions: list[str],
    timeout_s: float = 20.0,
    memory_mb: int = 1024,
    workers: int = 2,
    unconfined: bool = False,
    what: str = "",
    data: str | None = None,
) -> list[dict]:
    """One result per (problem, completion), in order: {"task_id", "passed", "result", "isolation"}."""
    lang = LANGUAGES[language]
    libs = lang.libs(data_dir(data)) if lang.libs is not None else None
    programs = [lang.program(p, c, libs) for p, c in zip(problems, completions)]
    return run_programs(
        [p["task_id"] for p in problems],
        programs,
        timeout_s,
        memory_mb,
        workers,
        unconfined,
        what or f"HumanEval-X {language} execution",
        binds=(libs,) if libs else (),
    )
