"""HumanEval-X in compiled languages through the sandbox: the published canonical solutions pass
(the exact count, every failure named), wrong completions fail, and hostile programs stay contained.

The data is not in the repository: the Makefile points FERRYLM_HUMANEVAL_X at ../shared/data/humaneval-x
when that copy exists; without it these tests skip and say so."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ferrylm.eval.execution.sandbox import bwrap_command
from ferrylm.eval.replies import braces as br
from ferrylm.eval.tasks import humaneval_x as hx

DATA = os.environ.get(hx.ENV)
pytestmark = [
    pytest.mark.skipif(
        not DATA or not Path(DATA).is_dir(),
        reason=f"{hx.ENV} is not set to a "
        "HumanEval-X copy (the Makefile sets it when ../shared/data/humaneval-x exists)",
    ),
    pytest.mark.skipif(bwrap_command() is None, reason="bubblewrap is not usable here"),
]
# Published C++ tasks whose programs include Boost (boost/any.hpp): they pass where libboost-dev is installed.
BOOST_TASKS = {"CPP/22", "CPP/137"}


def _has_boost() -> bool:
    return Path("/usr/include/boost/any.hpp").is_file()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_every_cpp_canonical_solution_passes_but_the_boost_tasks_without_boost():
    problems = hx.load_problems("cpp")
    results = hx.execute("cpp", problems, [p["canonical_solution"] for p in problems])
    failed = {r["task_id"]: r["result"] for r in results if not r["passed"]}
    expected = set() if _has_boost() else BOOST_TASKS
    assert set(failed) == expected, failed
    assert sum(r["passed"] for r in results) == 164 - len(expected)
    assert {r["isolation"] for r in results} <= {"bwrap+uid", "bwrap"}
    for task in expected:
        assert (
            failed[task].startswith("failed: compile step g++ failed (exit code 1): ")
            and "boost/any.hpp" in failed[task]
        )


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_cpp_wrong_and_early_exiting_completions_fail():
    first = hx.load_problems("cpp", limit=1)[0]  # has_close_elements
    body = first["canonical_solution"]
    completions = {
        "wrong answer": "    return true;\n}\n",
        "does not compile": "    return undefined_name;\n}\n",
        "exits 0 before the tests": "    exit(0);\n}\n",
        "quick_exit(0) before the tests": "    std::quick_exit(0);\n}\n",
        "_Exit(0) before the tests": "    std::_Exit(0);\n}\n",
        "closes the token's descriptor": '    fclose(fdopen(3, "w"));\n' + body,
        "canonical": body,
    }
    results = hx.execute("cpp", [first] * len(completions), list(completions.values()))
    verdicts = dict(zip(completions, (r["result"] for r in results)))
    assert verdicts.pop("canonical") == "passed"
    assert verdicts["wrong answer"] == "failed: killed by SIGABRT"  # the failed assert
    assert verdicts["does not compile"].startswith("failed: compile step g++ failed (exit code 1): main.cpp:")
    assert "‘undefined_name’ was not declared" in verdicts["does not compile"]  # the compiler's own reason
    for early in ("exits 0 before the tests", "quick_exit(0) before the tests", "_Exit(0) before the tests"):
        assert verdicts[early] == "failed: exited before the tests finished (exit code 0)", early
    assert verdicts["closes the token's descriptor"].startswith("failed"), verdicts


def test_the_renamed_cpp_main_returns_before_its_closing_brace_whatever_its_strings_hold():
    code = "int f() {\n  s = \"}{\"; c = '}'; // }\n  /* { */ if (x) { g(); }\n}\nint h() {}\n"
    assert hx._returning(code, 0) == code.replace("g(); }\n}", "g(); }\n    return 0;\n}")
    with pytest.raises(ValueError, match="no closing brace"):
        hx._returning('int f() { "}" ', 0)


# flowing off the end of the renamed `main` is undefined: GCC 13 traps there at -O0 (every task then
# failed by SIGILL); a full compile with -Werror=return-type finds it on any GCC
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("task", ["CPP/0", "CPP/1", "CPP/61"])  # CPP/1 and CPP/61: parentheses in the tests' strings
def test_cpp_programs_return_from_the_published_tests(task, tmp_path):
    problem = next(p for p in hx.load_problems("cpp") if p["task_id"] == task)
    program = hx._cpp_program(problem, problem["canonical_solution"])
    (tmp_path / "main.cpp").write_text(program["files"]["main.cpp"])
    done = subprocess.run(
        ["g++", "-std=c++17", "-c", "-Werror=return-type", "main.cpp", "-o", "main.o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-500:]


HOSTILE = {
    "connects to the network": """
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
bool has_close_elements(vector<float> numbers, float threshold){
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{}; a.sin_family = AF_INET; a.sin_port = htons(80); inet_pton(AF_INET, "1.1.1.1", &a.sin_addr);
    if (s >= 0 && connect(s, (sockaddr*)&a, sizeof a) == 0) return numbers.size() > 0;   // only a connection passes
    abort();
}
""",
    "writes outside its directory": """
#include <fstream>
bool has_close_elements(vector<float> numbers, float threshold){
    std::ofstream f("/usr/ferrylm-escaped"); f << "x"; f.close();
    if (!std::ifstream("/usr/ferrylm-escaped").good()) abort();
    return numbers.size() > 0;
}
""",
    "fork bomb": """
#include <unistd.h>
bool has_close_elements(vector<float> numbers, float threshold){ while (true) fork(); }
""",
    "memory bomb": """
#include <cstdlib>
#include <cstring>
bool has_close_elements(vector<float> numbers, float threshold){
    while (true) { char *p = (char*)malloc(1 << 26); if (!p) abort(); memset(p, 1, 1 << 26); }
}
""",
    "infinite loop": """
bool has_close_elements(vector<float> numbers, float threshold){ volatile long i = 0; while (true) i++; }
""",
}


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_hostile_cpp_programs_are_contained(tmp_path):
    first = dict(hx.load_problems("cpp", limit=1)[0])
    # The hostile bodies define the whole function: the prompt keeps only its headers and comment.
    first["prompt"] = first["prompt"].split("bool has_close_elements")[0]
    results = hx.execute("cpp", [first] * len(HOSTILE), list(HOSTILE.values()), timeout_s=8, memory_mb=256)
    verdicts = dict(zip(HOSTILE, (r["result"] for r in results)))
    assert not any(v == "passed" for v in verdicts.values()), verdicts
    assert verdicts["infinite loop"] in ("timed out", "failed: killed by SIGXCPU", "failed: killed by SIGKILL")
    assert not Path("/usr/ferrylm-escaped").exists()
    # The sandbox is still usable after all of them.
    again = hx.execute(
        "cpp", [hx.load_problems("cpp", limit=1)[0]], [hx.load_problems("cpp", limit=1)[0]["canonical_solution"]]
    )
    assert again[0]["passed"]


def test_a_missing_copy_says_where_to_point():
    with pytest.raises(hx.HumanEvalXMissing, match="eval.humaneval_x_dir"):
        hx.load_problems("cpp", "/nonexistent/humaneval-x")


DECL = {
    "task_id": "CPP/0",
    "declaration": "#include<vector>\nusing namespace std;\nbool has_close_elements(vector<float> numbers, float threshold){\n",
}


@pytest.mark.parametrize(
    "reply, expected",
    [
        # body only, closing brace included / left out
        ("```cpp\n    return true;\n}\n```", "    return true;\n}\n"),
        ("```cpp\n    return true;\n```", "    return true;\n}\n"),
        # the signature repeated: its body is taken
        (
            "Here it is:\n```cpp\nbool has_close_elements(vector<float> numbers, float threshold){\n    return false;\n}\n```",
            "\n    return false;\n}\n",
        ),
        # a nested block with the final brace missing
        (
            "```cpp\n    for (int i=0;i<3;i++){\n        if (i) return true;\n    }\n    return false;\n```",
            "    for (int i=0;i<3;i++){\n        if (i) return true;\n    }\n    return false;\n}\n",
        ),
    ],
)
def test_cpp_completion_from_a_reply(reply, expected):
    assert hx.completion_from_reply(DECL, reply) == expected


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("javac") is None, reason="javac is not installed")
def test_java_canonical_solutions_pass_and_wrong_or_early_exits_fail():
    """Every 8th task's canonical solution (all 164 pass: benchmarks/humaneval_x_canonical.py, 2.5 min, too
    long for the suite), and the ways a Java completion must fail."""
    problems = hx.load_problems("java")
    some = problems[::8]
    first = problems[0]  # hasCloseElements
    wrong = {
        "wrong answer": "        return true;\n    }\n}\n",
        "does not compile": "        return undefinedName;\n    }\n}\n",
        "System.exit(0) before the tests": "        System.exit(0);\n        return false;\n    }\n}\n",
        "Runtime.halt(0) before the tests": "        Runtime.getRuntime().halt(0);\n        return false;\n    }\n}\n",
    }
    results = hx.execute(
        "java", some + [first] * len(wrong), [p["canonical_solution"] for p in some] + list(wrong.values())
    )
    assert [r["result"] for r in results[: len(some)]] == ["passed"] * len(some)
    verdicts = dict(zip(wrong, (r["result"] for r in results[len(some) :])))
    assert verdicts["wrong answer"] == "failed: run step java failed (exit code 1)"  # the AssertionError
    assert verdicts["does not compile"].startswith("failed: compile step javac failed (exit code 1): Main.java:")
    for early in ("System.exit(0) before the tests", "Runtime.halt(0) before the tests"):
        assert verdicts[early] == "failed: exited before the tests finished (exit code 0)", early


def _sandbox_has(tool: str) -> bool:
    return shutil.which(tool, path="/usr/bin:/bin") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _sandbox_has("go"), reason="Debian's golang-go is not installed")
def test_go_canonical_solutions_pass_and_wrong_or_early_exits_fail():
    """Every 8th task's canonical solution (all 164: benchmarks/humaneval_x_canonical.py), and the ways a Go
    completion must fail: the harness's own `os` alias is in scope, so exiting early is one call."""
    problems = hx.load_problems("go")
    some, first = problems[::8], problems[0]  # HasCloseElements
    wrong = {
        "wrong answer": "    return true\n}\n",
        "does not compile": "    return undefinedName\n}\n",
        "wrong type": '    return "no"\n}\n',
        "exits 0 before the tests": "    ferryos.Exit(0)\n    return false\n}\n",
        "closes the token's descriptor": '    ferryos.NewFile(3, "t").Close()\n' + first["canonical_solution"],
    }
    results = hx.execute(
        "go", some + [first] * len(wrong), [p["canonical_solution"] for p in some] + list(wrong.values())
    )
    assert [r["result"] for r in results[: len(some)]] == ["passed"] * len(some), results[: len(some)]
    verdicts = dict(zip(wrong, (r["result"] for r in results[len(some) :])))
    assert verdicts["wrong answer"] == "failed: run step main.test failed (exit code 1)", verdicts
    assert verdicts["does not compile"].startswith("failed: compile step go failed (exit code 2): ")
    assert "undefined: undefinedName" in verdicts["does not compile"]
    assert "main_test.go:" in verdicts["wrong type"] and "cannot use" in verdicts["wrong type"], verdicts  # not "FAIL"
    assert verdicts["exits 0 before the tests"].startswith("failed"), verdicts
    assert verdicts["closes the token's descriptor"].startswith("failed"), verdicts


# Published Rust tasks that cannot pass here, with why (benchmarks/humaneval_x_canonical.py: the other 162 pass).
RUST_KNOWN = {
    "Rust/32": "failed: compile step sh failed (exit code 1): the published test has no live #[test] "
    "function: nothing checks this task",  # its test module is commented out
    "Rust/50": "failed: compile step rustc failed (exit code 1): error[E0277]: the trait bound "
    "`{integer}: SampleRange<_>` is not satisfied",
}  # written for rand < 0.8's gen_range(a, b)


@pytest.mark.slow
@pytest.mark.skipif(not _sandbox_has("rustc"), reason="Debian's rustc is not installed")
def test_rust_canonical_solutions_pass_and_wrong_or_early_exits_fail():
    problems = hx.load_problems("rust")
    some, first = problems[::8] + [problems[50]], problems[0]  # has_close_elements
    wrong = {
        "wrong answer": "    return true;\n}\n",
        "does not compile": "    return undefined_name;\n}\n",
        "exits 0 before the tests": "    std::process::exit(0);\n}\n",
    }
    results = hx.execute(
        "rust", some + [first] * len(wrong), [p["canonical_solution"] for p in some] + list(wrong.values())
    )
    assert {r["task_id"]: r["result"] for r in results[: len(some)]} == {
        p["task_id"]: RUST_KNOWN.get(p["task_id"], "passed") for p in some
    }
    verdicts = dict(zip(wrong, (r["result"] for r in results[len(some) :])))
    assert verdicts["wrong answer"] == "failed: run step main failed (exit code 101)", verdicts  # the panic
    assert verdicts["does not compile"].startswith("failed: compile step rustc failed (exit code 1): error[E0425]")
    assert verdicts["exits 0 before the tests"] == "failed: exited before the tests finished (exit code 0)"

    # rustc's address space under glibc's default arenas ranged from 500 MB to over the 1 GB limit
    # (LLVM's "out of memory", SIGABRT, twice in a fresh make test); with two arenas 512 MB is enough.
    tight = hx.execute("rust", [first] * 3, [first["canonical_solution"]] * 3, memory_mb=512)
    assert [r["result"] for r in tight] == ["passed"] * 3, tight


HOSTILE_BODIES = {  # per language: the body of the first task's function, each must not pass
    "java": {
        "connects to the network": '        try { new java.net.Socket("1.1.1.1", 80).close(); }\n'
        "        catch (Exception e) { throw new RuntimeException(e); }\n"
        "        return numbers.size() > 0;\n    }\n}\n",
        "writes outside its directory": "        try { java.nio.file.Files.writeString(java.nio.file.Path.of("
        '"/usr/ferrylm-escaped"), "x"); }\n        catch (Exception e) '
        "{ throw new RuntimeException(e); }\n        return true;\n    }\n}\n",
        "fork bomb": '        while (true) { try { new ProcessBuilder("/bin/sh", "-c", "sleep 100").start(); } '
        "catch (Exception e) { } }\n    }\n}\n",
        "memory bomb": "        java.util.List<long[]> keep = new java.util.ArrayList<>();\n"
        "        while (true) keep.add(new long[1 << 24]);\n    }\n}\n",
        "infinite loop": "        long i = 0;\n        while (true) i++;\n    }\n}\n",
    },
    "go": {
        "connects to the network": '    c, err := net.Dial("tcp", "1.1.1.1:80")\n    if err != nil { panic(err) }\n'
        "    c.Close()\n    return len(numbers) > 0\n}\n",
        "writes outside its directory": '    if ferryos.WriteFile("/usr/ferrylm-escaped", []byte("x"), 0644) != nil '
        '{ panic("no") }\n    return true\n}\n',
        "fork bomb": '    for { syscall.ForkExec("/proc/self/exe", nil, nil) }\n}\n',
        "memory bomb": "    var keep [][]byte\n    for { keep = append(keep, make([]byte, 1<<26)); keep[len(keep)-1][0] = 1 }\n}\n",
        "infinite loop": "    i := 0\n    for { i++ }\n}\n",
    },
    "rust": {
        "connects to the network": '    std::net::TcpStream::connect("1.1.1.1:80").unwrap();\n    numbers.len() > 0\n}\n',
        "writes outside its directory": '    std::fs::write("/usr/ferrylm-escaped", "x").unwrap();\n    true\n}\n',
        "fork bomb": '    loop { let _ = std::process::Command::new("/proc/self/exe").spawn(); }\n}\n',
        "memory bomb": "    let mut keep = Vec::new();\n    loop { keep.push(vec![1u8; 1 << 26]); }\n}\n",
        "infinite loop": "    let mut i: u64 = 0;\n    loop { i = i.wrapping_add(1); }\n}\n",
    },
}


@pytest.mark.integration
@pytest.mark.parametrize("language", ["java", "go", "rust"])
def test_hostile_java_go_and_rust_programs_are_contained(language):
    if not _sandbox_has({"java": "javac", "go": "go", "rust": "rustc"}[language]):
        pytest.skip(f"Debian's {language} toolchain is not installed")
    original = hx.load_problems(language, limit=1)[0]
    first, bodies = dict(original), HOSTILE_BODIES[language]
    if language == "go":  # the hostile bodies need more packages than the reference harness adds
        first["test_setup"] = first["test_setup"].replace('"testing"', '"testing"\n    "net"\n    "syscall"')
        bodies = {k: "    _, _ = net.Dial, syscall.ForkExec\n" + v for k, v in bodies.items()}
    # 10 s, not the language's 20: the infinite loop and the fork bomb each run to the limit.
    results = hx.execute(language, [first] * len(bodies), list(bodies.values()), timeout_s=10, memory_mb=1024)
    verdicts = dict(zip(bodies, (r["result"] for r in results)))
    assert not any(v == "passed" for v in verdicts.values()), verdicts
    # compiled within the limit, then refused while running
    assert all("run step" in verdicts[k] for k in ("connects to the network", "writes outside its directory")), verdicts
    assert verdicts["infinite loop"] in ("timed out", "failed: killed by SIGXCPU", "failed: killed by SIGKILL"), (
        verdicts
    )
    assert not Path("/usr/ferrylm-escaped").exists()
    again = hx.execute(language, [original], [original["canonical_solution"]])
    assert again[0]["passed"], again


def test_a_language_whose_libraries_cannot_be_prepared_is_not_measured_with_the_reason(tmp_path):
    if not _sandbox_has("go"):
        pytest.skip("Debian's golang-go is not installed")
    (tmp_path / "humaneval_go.jsonl.gz").write_bytes((Path(DATA) / "humaneval_go.jsonl.gz").read_bytes())
    why = hx.unavailable("go", str(tmp_path))  # a copy without go-evaluation/
    assert why == f"HumanEval-X Go: {tmp_path}/go-evaluation/vendor.tar.gz is missing (the data set's Go module files)"
    assert hx.unavailable("go") is None


def _shapes(language: str, problem: dict, opened: int) -> dict[str, str]:
    """A correct answer to the task as models write it in a chat reply."""
    body = problem["canonical_solution"].rstrip()
    for _ in range(opened):  # the canonical solution closes what the prompt opened
        body = body.rstrip().removesuffix("}")
    signature = problem["declaration"].rstrip().splitlines()[-1]
    shapes = {
        "body, braces left out": f"```{language}\n{body}\n```",
        "body and the function's brace": f"```{language}\n{body}\n}}\n```",
        "the signature repeated": f"Here is the function:\n```{language}\n{signature}\n{body}\n}}\n```\nIt loops.",
        "two blocks, the first is the answer": f"```{language}\n{body}\n```\nUsage:\n```{language}\nmain();\n```",
    }
    if language == "java":
        shapes["the class repeated"] = f"```java\nclass Solution {{\n{signature}\n{body}\n    }}\n}}\n```"
        shapes["a usage example after it"] = (
            f"```java\nclass Solution {{\n{signature}\n{body}\n    }}\n"
            "    public static void main(String[] args) {\n    }\n}\n```"
        )
    else:
        main = {"cpp": "int main() {\n    return 0;\n}", "go": "func main() {\n}", "rust": "fn main() {\n}"}[language]
        shapes["a usage example after it"] = f"```{language}\n{signature}\n{body}\n}}\n\n{main}\n```"
    return shapes


@pytest.mark.parametrize("language", ["cpp", "java", "go", "rust"])
def test_a_correct_answer_passes_in_every_shape_a_reply_takes(language):
    """Through the track the eval stage uses: a right answer must not fail on how it was written
    (Java's prompt leaves its class open too, so a body alone needs two braces)."""
    from types import SimpleNamespace

    from ferrylm.eval.tasks import benchmark

    e = SimpleNamespace(
        humaneval_x_languages=[language],
        humaneval_x_dir=None,
        humaneval_x_limit=1,
        subset_seed=None,
        exec_timeout_s=20.0,
    )
    (track,) = hx.tracks(e)
    if track.not_measured:
        pytest.skip(track.not_measured)
    problem = track.problems[0]
    opened = 2 if language == "java" else 1
    shapes = _shapes(language, problem, opened)
    completions = {k: track.from_reply(problem, reply) for k, reply in shapes.items()}
    body = shapes["body, braces left out"].split("\n", 1)[1].rsplit("\n```", 1)[0]
    completions["base mode (cut at the stop sequence)"] = track.from_base(problem, body)
    results = benchmark.execute(track, [(problem["task_id"], c) for c in completions.values()], 1024, 2)
    verdicts = dict(zip(completions, (r["result"] for r in results)))
    assert verdicts == dict.fromkeys(completions, "passed"), verdicts


# Real SmolLM2-135M-Instruct replies (tests/eval/tasks/record_humaneval_x_replies.py records them): the verdict each gets
# through the eval stage's track, and why. Every failure is the model's own code, found by its
# compiler or tests, never one of our assembly (a brace we lost, an include inside the function,
# its usage example's second main).
SMOLLM2_VERDICTS = {
    "CPP/0": "failed: killed by SIGABRT",  # compiles; the assert fails
    "CPP/1": "expected ‘(’ before ‘}’ token",  # cut short at 200 tokens inside `else if`
    "CPP/2": "failed: killed by SIGABRT",
    "Java/0": "error: cannot find symbol",  # Stream has no .all()
    "Java/1": "error: illegal start of expression",  # repeats the class, then no method around its loop
    "Java/2": "failed: run step java failed (exit code 1)",
    "Go/0": "undefined: sum",
    "Go/1": "missing return",  # an empty body
    "Go/2": "illegal character U+003F '?'",  # a C ternary; its `func main` example is dropped
    "Rust/0": "failed: run step main failed (exit code 101)",  # compiles; the assert panics
    "Rust/1": "error: expected `;`, found `}`",  # cut short inside a statement
    "Rust/2": "error: expected `;`, found `}`",
}


@pytest.mark.parametrize("language", ["cpp", "java", "go", "rust"])
def test_real_smollm2_replies_become_programs_that_fail_only_for_the_models_reasons(language):
    import json
    from types import SimpleNamespace

    from ferrylm.eval.tasks import benchmark

    replies = json.loads((Path(__file__).parent / "data" / "smollm2_humaneval_x_replies.json").read_text())
    e = SimpleNamespace(
        humaneval_x_languages=[language],
        humaneval_x_dir=None,
        humaneval_x_limit=3,
        subset_seed=None,
        exec_timeout_s=20.0,
    )
    (track,) = hx.tracks(e)
    if track.not_measured:
        pytest.skip(track.not_measured)
    samples = [(p["task_id"], track.from_reply(p, replies[p["task_id"]])) for p in track.problems]
    for _, completion in samples:
        assert "```" not in completion and "#include" not in completion and "use std::" not in completion
        assert "func main" not in completion and "package main" not in completion
    verdicts = {r["task_id"]: r["result"] for r in benchmark.execute(track, samples, 1024, 2)}
    for task_id, verdict in verdicts.items():
        assert SMOLLM2_VERDICTS[task_id] in verdict, (task_id, verdict)
        for ours in (
            "reached end of file while parsing",
            "expected '}' at end of input",
            "unexpected EOF",
            "unclosed delimiter",
            "redefinition of",
            "main redeclared",
        ):
            assert ours not in verdict, (task_id, verdict)


def _signature(problem: dict) -> str:
    """The declaration from the line that names the function the prompt opens (Rust/Java generics,
    Go's brace-holding return types, C++ signatures split over lines, prompts that end inside a loop)."""
    decl = problem["declaration"]
    m = next(m for m in br.NAME_PAREN.finditer(decl) if m.group(1) == br.entry_point(problem) and br.declares(decl, m))
    return decl[decl.rfind("\n", 0, m.start()) + 1 :].rstrip()


def _chat_shapes(language: str, problem: dict) -> dict[str, str]:
    """A correct answer (the published solution) as chat models write it."""
    canon, sig = problem["canonical_solution"], _signature(problem)
    imports = {
        "cpp": "#include <vector>\n#include <string>\nusing namespace std;",
        "java": "import java.util.*;",
        "go": 'import (\n\t"strings"\n)',
        "rust": "use std::collections::HashMap;",
    }[language]
    shapes = {
        "the body only": f"```{language}\n{canon}\n```",
        "the signature repeated, prose around": f"Sure! Here it is:\n```{language}\n{sig}\n{canon}\n```\nThis works.",
        "the imports and the signature": f"```{language}\n{imports}\n\n{sig}\n{canon}\n```",
    }
    if language == "java":
        shapes["the class repeated"] = f"```java\n{imports}\nclass Solution {{\n{sig}\n{canon}\n```"
    else:
        main = {"cpp": "int main() {\n    return 0;\n}", "go": "func main() {\n}", "rust": "fn main() {\n}"}[language]
        shapes["a usage example after it"] = f"```{language}\n{sig}\n{canon}\n\n{main}\n```"
    return shapes


@pytest.mark.parametrize("language", ["cpp", "java", "go", "rust"])
def test_every_task_reads_a_wrapped_correct_answer_as_the_bare_one(language):
    """Over all 164 tasks: whichever way a chat reply wraps the published solution (signature repeated,
    imports, prose, the class, a usage example), the program built from it is the bare solution's, up to
    whitespace — so it passes wherever the canonical solution passes. Go's `interface{}` return types
    (13 tasks) and C++'s prompt that ends inside a loop (CPP/38) included."""
    problems = hx.load_problems(language)
    opened = {p["task_id"]: hx._opened(hx.LANGUAGES[language], p) for p in problems}
    norm = lambda s: " ".join(s.split())  # noqa: E731
    differ = {}
    for p in problems:
        got = {
            k: norm(hx.completion_from_reply(p, reply, opened[p["task_id"]]))
            for k, reply in _chat_shapes(language, p).items()
        }
        if len(set(got.values())) != 1:
            differ[p["task_id"]] = [k for k, v in got.items() if v != got["the body only"]]
    assert differ == {}
    assert len(problems) == 164


BRACED_GO = [
    "Go/12",
    "Go/22",
    "Go/71",
    "Go/90",
    "Go/92",
    "Go/95",
    "Go/103",
    "Go/112",
    "Go/125",
    "Go/128",
    "Go/136",
    "Go/137",
    "Go/162",
]


@pytest.mark.skipif(not _sandbox_has("go"), reason="Debian's golang-go is not installed")
def test_go_replies_repeating_a_brace_holding_return_type_pass():
    """The 13 Go tasks whose return type holds braces (`interface{}`): the signature-repeated reply used
    to lose its body to the `{` of `interface{}`; compiled and run, every one passes."""
    problems = {p["task_id"]: p for p in hx.load_problems("go")}
    # Go/95's published solution walks a map, whose order Go randomises: it fails now and then on its own
    # (seen once in a fresh make test); the all-tasks test above still checks its reply is read as the bare one.
    chosen = [problems[t] for t in BRACED_GO if t != "Go/95"]
    assert all("{}" in _signature(p) for p in chosen)
    replies = [_chat_shapes("go", p)["the signature repeated, prose around"] for p in chosen]
    results = hx.execute("go", chosen, [hx.completion_from_reply(p, r) for p, r in zip(chosen, replies)])
    assert [r["result"] for r in results] == ["passed"] * len(chosen), results


@pytest.mark.skipif(not _sandbox_has("go"), reason="Debian's golang-go is not installed")
def test_eval_score_scores_a_go_sample_file(tmp_path, capsys):
    """`ferrylm eval score` on another generator's Go samples: right and wrong completions, any number
    per task, results beside the file, Pass@k printed; a bad file is one line."""
    import json

    from ferrylm.cli import main

    problems = hx.load_problems("go")[:2]
    f = tmp_path / "go_samples.jsonl"
    rows = (
        [{"task_id": problems[0]["task_id"], "completion": problems[0]["canonical_solution"]}] * 2
        + [
            {"task_id": problems[0]["task_id"], "completion": "    return true\n}\n"},
            {"task_id": problems[1]["task_id"], "completion": "    return nil\n}\n"},
        ]
        + [{"task_id": problems[1]["task_id"], "completion": problems[1]["canonical_solution"]}]
    )
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["eval", "score", "--benchmark", "humaneval-x", "--language", "go", "--samples", str(f)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["benchmark"], out["language"], out["tasks"], out["samples"], out["passed_samples"]) == (
        "humaneval-x",
        "go",
        2,
        5,
        3,
    )
    assert out["pass@1"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    results = [json.loads(line) for line in open(out["results"])]
    assert [r["passed"] for r in results] == [True, True, False, False, True]
    bad = {
        "wrong shape": ('{"task_id": "Go/0"}\n', "go_bad.jsonl:1: expected a JSON object with task_id and completion"),
        "a Python id": ('{"task_id": "HumanEval/0", "completion": ""}\n', "unknown task_id 'HumanEval/0'"),
    }
    for name, (text, says) in bad.items():
        b = tmp_path / "go_bad.jsonl"
        b.write_text(text)
        assert main(["eval", "score", "--benchmark", "humaneval-x", "--language", "go", "--samples", str(b)]) == 2, name
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    assert main(["eval", "score", "--benchmark", "humaneval-x", "--language", "cobol", "--samples", str(f)]) == 2
    assert "--language: HumanEval-X has cpp, java, go, rust, not 'cobol'" in capsys.readouterr().err
